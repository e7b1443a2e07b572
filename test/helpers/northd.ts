import { execFile } from 'node:child_process'
import { promisify } from 'node:util'

const run = promisify(execFile)

/**
 * Pauses or resumes the ovn-northd behind control socket `ctl`. ovn-northd 23.03's `resume`
 * does not wake its main loop (fixed in OVN 24.09, "northd, ic: Fix handling of ovn-appctl
 * resume"): a northd that missed the wake-up sleeps until the next database change, however
 * long that is. `is-paused` right after it is a request of its own, so the loop runs once more
 * and, no longer paused, takes its lock and catches up.
 */
export async function northdAppctl(ctl: string, command: 'pause' | 'resume'): Promise<void> {
  await run('ovn-appctl', ['-t', ctl, command])
  if (command !== 'resume') return
  const { stdout } = await run('ovn-appctl', ['-t', ctl, 'is-paused'])
  if (stdout.trim() !== 'false') throw new Error(`ovn-northd still paused after resume: ${stdout}`)
}
