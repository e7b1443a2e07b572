import { execFile } from 'node:child_process'
import { promisify } from 'node:util'

const run = promisify(execFile)

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
