/** Facts about processes by pid, read from the kernel. */
import { readFile } from 'node:fs/promises'

/** True while a process with this pid exists (signal 0 probes without signalling). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** The parent of process `pid` (`/proc/<pid>/stat`), or undefined once it is gone. */
export async function parentOf(pid: number): Promise<number | undefined> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined)
  if (stat === undefined) return undefined
  // After "pid (comm) ": the state, then the parent's pid.
  return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1])
}
