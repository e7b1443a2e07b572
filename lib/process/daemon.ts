import { type ChildProcess, spawn } from 'node:child_process'
import { accessSync, closeSync, constants, openSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import { constants as osConstants } from 'node:os'
import { delimiter, isAbsolute, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { DaemonStartError, MissingBinaryError } from './errors.ts'
import type { LaunchedExit, Launcher } from './launcher.ts'
import { debianPackageOf } from './packages.ts'
import { within } from './within.ts'

const reaper = fileURLToPath(new URL('./reaper.sh', import.meta.url))

export interface DaemonSpec {
  /** Short name used in errors and logs, e.g. `ovsdb-server(nb)`. */
  readonly name: string
  /** A binary on PATH or an absolute path. */
  readonly command: string
  readonly args: readonly string[]
  readonly env?: Readonly<Record<string, string>>
  readonly cwd?: string
  /** File creation mask of the daemon, e.g. 0o077 for files only its user may read. */
  readonly umask?: number
  /** Run inside this network namespace (`ip netns exec`). */
  readonly netns?: string
  /** File that receives the daemon's stdout and stderr (appended). */
  readonly logFile?: string
  /** Extra files (the daemon's own log) whose tail explains a failure. */
  readonly tailFiles?: readonly string[]
  /** Resolves true once the daemon answers; polled until `readyTimeoutMs`. */
  readonly ready?: () => Promise<boolean>
  readonly readyTimeoutMs?: number
  readonly stopTimeoutMs?: number
  /** Runs before each start, a supervisor's restarts included (e.g. to fix up a config). */
  readonly beforeStart?: () => Promise<void>
  /**
   * Start it through this launcher's helper instead of forking this process (see
   * lib/process/launcher.ts: what a fork costs a process with a large heap).
   */
  readonly launcher?: Launcher
}

export interface DaemonExit {
  readonly name: string
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly logTail: string
}

export interface Daemon {
  readonly name: string
  /** PID of the supervising reaper; the daemon runs in its process group. */
  readonly pid: number
  /** Resolves when the daemon has exited, for whatever reason. */
  readonly exited: Promise<DaemonExit>
  readonly running: boolean
  /** SIGTERM to the daemon, SIGKILL after `stopTimeoutMs`; resolves once it is gone. */
  stop(): Promise<void>
}

/** Throws MissingBinaryError (naming the Debian package) unless `command` is runnable. */
export function requireBinary(command: string): string {
  const candidates = isAbsolute(command)
    ? [command]
    : (process.env.PATH ?? '')
        .split(delimiter)
        .concat(['/usr/sbin', '/sbin'])
        .map((dir) => join(dir, command))
  for (const path of candidates) {
    try {
      accessSync(path, constants.X_OK)
      return path
    } catch {}
  }
  throw new MissingBinaryError(command, debianPackageOf[command])
}

const ADDRESS_IN_USE =
  /address already in use|EADDRINUSE|Could not create server TCP listening socket/i
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

async function tail(files: readonly string[], lines = 15): Promise<string> {
  const parts: string[] = []
  for (const file of files) {
    const text = await readFile(file, 'utf8').catch(() => '')
    const last = text.trimEnd().split('\n').slice(-lines).join('\n')
    if (last) parts.push(last)
  }
  return parts.join('\n')
}

/**
 * Starts a long-running daemon in the foreground (never with its own `--detach`), tied to
 * this process: if Node dies, even by SIGKILL, the reaper stops the daemon. Resolves once
 * `ready()` answers true; rejects with DaemonStartError (with the log tail) if it exits
 * or does not answer in time.
 *
 * @example
 * const redis = await startDaemon({
 *   name: 'redis', command: 'redis-server', args: ['--port', '7001'],
 *   ready: () => canConnect(7001),
 * })
 * await redis.stop()
 */
export async function startDaemon(spec: DaemonSpec): Promise<Daemon> {
  const binary = requireBinary(spec.command)
  await spec.beforeStart?.()
  const argv = spec.netns ? ['ip', 'netns', 'exec', spec.netns, binary] : [binary]
  const tailFiles = [...(spec.logFile ? [spec.logFile] : []), ...(spec.tailFiles ?? [])]
  const env = {
    ...process.env,
    ...spec.env,
    HZ_REAPER_UMASK: spec.umask === undefined ? '' : spec.umask.toString(8),
  }
  const started = spec.launcher
    ? await spec.launcher
        .spawn('sh', [reaper, ...argv, ...spec.args], {
          env,
          ...(spec.cwd ? { cwd: spec.cwd } : {}),
          ...(spec.logFile ? { logFile: spec.logFile } : {}),
        })
        .catch((error: Error) => {
          throw new DaemonStartError(spec.name, error.message, '', false)
        })
    : spawnHere(spec, argv, env)
  const pid = started.pid
  let running = true
  const exited = started.exited.then(async ({ status, signal }) => {
    running = false
    const code = status !== null && status > 128 ? null : status
    const sig = signal ?? (status !== null && status > 128 ? signalName(status - 128) : null)
    return { name: spec.name, code, signal: sig, logTail: await tail(tailFiles) }
  })

  const daemon: Daemon = {
    name: spec.name,
    pid,
    exited,
    get running() {
      return running
    },
    async stop() {
      if (!running) return
      signalGroup(pid, 'SIGTERM')
      const timeout = spec.stopTimeoutMs ?? 5000
      const done = await within(
        exited.then(() => true),
        timeout,
        false,
      )
      if (!done) {
        signalGroup(pid, 'SIGKILL')
        await exited
      }
      // The reaper may be gone while a straggler of its group is not.
      signalGroup(pid, 'SIGKILL')
    },
  }

  const deadline = Date.now() + (spec.readyTimeoutMs ?? 15_000)
  for (;;) {
    if (!running) {
      const exit = await exited
      throw new DaemonStartError(
        spec.name,
        `exited with ${exit.signal ?? `code ${exit.code}`}`,
        exit.logTail,
        ADDRESS_IN_USE.test(exit.logTail),
      )
    }
    if (!spec.ready || (await spec.ready().catch(() => false))) return daemon
    if (Date.now() > deadline) {
      await daemon.stop()
      const logTail = await tail(tailFiles)
      throw new DaemonStartError(
        spec.name,
        `did not answer within ${spec.readyTimeoutMs ?? 15_000} ms`,
        logTail,
        ADDRESS_IN_USE.test(logTail),
      )
    }
    await sleep(50)
  }
}

/** Spawns the reaper from this process, tied to it by its stdin pipe. */
function spawnHere(
  spec: DaemonSpec,
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
): { pid: number; exited: Promise<LaunchedExit> } {
  const out = spec.logFile ? openSync(spec.logFile, 'a') : 'ignore'
  let child: ChildProcess
  try {
    child = spawn('sh', [reaper, ...argv, ...spec.args], {
      cwd: spec.cwd,
      env,
      stdio: ['pipe', out, out],
      detached: true,
    })
  } finally {
    if (typeof out === 'number') closeSync(out)
  }
  const pid = child.pid
  if (pid === undefined) throw new DaemonStartError(spec.name, 'spawn failed', '', false)
  child.unref()
  // The pipe must stay open for the reaper, but must not keep Node alive on its own.
  const stdin = child.stdin as (NodeJS.WritableStream & { unref?: () => void }) | null
  stdin?.unref?.()
  stdin?.on('error', () => {})
  const exited = new Promise<LaunchedExit>((resolve) => {
    child.once('exit', (status, signal) => resolve({ status, signal }))
  })
  return { pid, exited }
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal)
  } catch {}
}

function signalName(n: number): NodeJS.Signals | null {
  const entry = Object.entries(osConstants.signals).find(([, value]) => value === n)
  return entry ? (entry[0] as NodeJS.Signals) : null
}
