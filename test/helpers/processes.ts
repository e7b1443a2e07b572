import { execFile, spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'

const run = promisify(execFile)
const main = fileURLToPath(new URL('../../infra/main.ts', import.meta.url))

/**
 * `infra/main.ts` (what `npm start` runs) in a child process with `env` over this one's;
 * `output` is what it printed so far (stdout and stderr).
 */
export function startMain(env: Record<string, string>) {
  const child = spawn(process.execPath, ['--import', 'tsx', main], {
    // Metrics off unless a test turns them on: parallel runs would share the default port.
    env: { ...process.env, LOG_LEVEL: 'warn', HYDRAZINE_METRICS_LISTEN: 'off', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  let output = ''
  child.stdout.on('data', (c: Buffer) => {
    output += c.toString()
  })
  child.stderr.on('data', (c: Buffer) => {
    output += c.toString()
  })
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)))
  return { child, exited, output: () => output }
}

/** Command lines of running processes that mention `needle` (e.g. a data directory). */
export async function processesMentioning(needle: string): Promise<string[]> {
  const { stdout } = await run('ps', ['-eo', 'pid=,args='])
  return stdout
    .split('\n')
    .filter((line) => line.includes(needle) && !/\b(ps|grep)\b/.test(line))
    .map((line) => line.trim())
}

/** Polls `check` every 100 ms until it is true or `timeoutMs` passes; returns the last answer. */
export async function eventually(
  check: () => Promise<boolean>,
  timeoutMs = 10_000,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check()) return true
    if (Date.now() > deadline) return false
    await new Promise((r) => setTimeout(r, 100))
  }
}
