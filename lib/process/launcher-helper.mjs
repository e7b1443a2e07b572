// The launcher's helper (lib/process/launcher.ts): a small Node process that starts programs
// for its parent over the IPC channel, so that the parent, whose heap may be large, never
// forks. Plain JavaScript on purpose: it runs without a TypeScript loader, in ~40 MB.
//
// Requests (one message each; `id` answers it):
//   {op: 'run', id, file, args, env, cwd?, timeoutMs?}  -> {id, op: 'ran', status, signal, stdout, stderr, error?, timedOutMs?}
//   {op: 'spawn', id, file, args, env, cwd?, logFile?}  -> {id, op: 'spawned', pid} | {id, op: 'failed', error}
//                                                          then {op: 'exit', pid, status, signal}
// A spawned program's stdin is a pipe this process holds open: when the parent goes away
// (the channel closes), this process exits and every such pipe sees end-of-file — what
// lib/process/reaper.sh waits for to stop its daemon.
import { execFile, spawn } from 'node:child_process'
import { closeSync, openSync } from 'node:fs'

/** Output a `run` keeps, per stream: a program that says more is cut short, not stopped. */
const MAX_OUTPUT = 16 * 1024 * 1024

/** @param {Record<string, unknown>} message */
function send(message) {
  if (process.connected) process.send?.(message)
}

/** @param {unknown} error */
function describe(error) {
  return error instanceof Error ? error.message : String(error)
}

/** @param {{id: number, file: string, args: string[], env: NodeJS.ProcessEnv, cwd?: string, timeoutMs?: number}} r */
function run(r) {
  execFile(
    r.file,
    r.args,
    {
      env: r.env,
      ...(r.cwd ? { cwd: r.cwd } : {}),
      ...(r.timeoutMs ? { timeout: r.timeoutMs } : {}),
      maxBuffer: MAX_OUTPUT,
      encoding: 'utf8',
    },
    (error, stdout, stderr) => {
      /** @type {{code?: unknown, signal?: unknown, killed?: boolean} | null} */
      const e = /** @type {any} */ (error)
      const status = e === null ? 0 : typeof e.code === 'number' ? e.code : null
      const signal = e !== null && typeof e.signal === 'string' ? e.signal : null
      send({
        id: r.id,
        op: 'ran',
        status,
        signal,
        stdout,
        stderr,
        // Not started at all (ENOENT, EACCES).
        ...(e !== null && status === null && signal === null ? { error: describe(error) } : {}),
        // Stopped (SIGTERM) for running past its timeout.
        ...(e?.killed && r.timeoutMs ? { timedOutMs: r.timeoutMs } : {}),
      })
    },
  )
}

/** @param {{id: number, file: string, args: string[], env: NodeJS.ProcessEnv, cwd?: string, logFile?: string}} r */
function start(r) {
  let out = /** @type {number | 'ignore'} */ ('ignore')
  try {
    if (r.logFile) out = openSync(r.logFile, 'a')
    const child = spawn(r.file, r.args, {
      env: r.env,
      ...(r.cwd ? { cwd: r.cwd } : {}),
      stdio: ['pipe', out, out],
      detached: true,
    })
    child.stdin?.on('error', () => {})
    child.once('error', (error) => {
      if (child.pid === undefined) send({ id: r.id, op: 'failed', error: describe(error) })
    })
    if (child.pid === undefined) return
    const pid = child.pid
    child.once('exit', (status, signal) => send({ op: 'exit', pid, status, signal }))
    send({ id: r.id, op: 'spawned', pid })
  } catch (error) {
    send({ id: r.id, op: 'failed', error: describe(error) })
  } finally {
    if (typeof out === 'number') closeSync(out)
  }
}

process.on('message', (/** @type {any} */ request) => {
  if (request?.op === 'run') run(request)
  else if (request?.op === 'spawn') start(request)
})
// The parent is gone: so are we, and with us the pipes the reapers watch.
process.on('disconnect', () => process.exit(0))
// Its parent decides when it goes (by closing the channel), not a terminal's ^C.
process.on('SIGINT', () => {})
