/**
 * What a DPU's ovn-controller did from its start until its first host's flows were in: the
 * CPU it ran, the time it was runnable but waited for a CPU (the kernel's run queue), and
 * the rest (waiting on its Southbound, its OVS, TLS), read from `/proc/<pid>/task/<tid>/
 * schedstat` (ns on a CPU, ns waiting on a run queue, summed over its threads). In the lab
 * the 20 simulated DPUs' daemons share the machine's cores, which real DPUs do not: the run
 * queue's share says how much of a first host's wait is that sharing.
 */
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { now, sleep } from './lab-probes.ts'

/** One read of a process: when, and its threads' time on a CPU and on a run queue (ms). */
interface Sample {
  readonly at: number
  readonly runMs: number
  readonly runqueueMs: number
}

/** One ovn-controller's start, until its first host's `ovn-installed`. */
export interface ControllerStart {
  /** From when it was first seen running (within `EVERY_MS` of its start) to the host's flows. */
  readonly wallMs: number
  readonly runMs: number
  readonly runqueueMs: number
}

/** How often a watched ovn-controller is read. */
const EVERY_MS = 50

/** Its threads' `schedstat`, summed; undefined once it is gone. */
async function schedstat(pid: number): Promise<{ runMs: number; runqueueMs: number } | undefined> {
  try {
    const tasks = await readdir(`/proc/${pid}/task`)
    let run = 0
    let queued = 0
    for (const tid of tasks) {
      const [onCpu = '0', waiting = '0'] = (
        await readFile(`/proc/${pid}/task/${tid}/schedstat`, 'utf8')
      ).split(' ')
      run += Number(onCpu)
      queued += Number(waiting)
    }
    return { runMs: run / 1e6, runqueueMs: queued / 1e6 }
  } catch {
    return undefined
  }
}

/** The pid in `pidFile`, when it names one. */
async function pidIn(pidFile: string): Promise<number | undefined> {
  const pid = Number((await readFile(pidFile, 'utf8').catch(() => '')).trim())
  return Number.isSafeInteger(pid) && pid > 0 ? pid : undefined
}

/**
 * Watches the ovn-controller of a DPU (its pid file in `runDir`) while a host attaches: only
 * one that starts after the watch began (the DPU's first host of the group starts it, or
 * restarts it with the group's certificate) is read. `stop(installed)` ends the watch and
 * gives what that one did up to `installed` (the host's `ovn-installed`), or undefined when
 * none started.
 */
export function watchControllerStart(runDir: string): {
  stop(installed: number | undefined): Promise<ControllerStart | undefined>
} {
  const pidFile = join(runDir, 'ovn-controller.pid')
  let stopped = false
  let old: number | undefined
  let fresh: number | undefined
  let seen = 0
  const samples: Sample[] = []
  const done = (async () => {
    old = await pidIn(pidFile)
    while (!stopped) {
      const pid = await pidIn(pidFile)
      if (pid !== undefined && pid !== old && pid !== fresh) {
        fresh = pid
        seen = now()
        samples.length = 0
      }
      if (fresh !== undefined) {
        const at = now()
        const stat = await schedstat(fresh)
        if (stat) samples.push({ at, ...stat })
      }
      await sleep(EVERY_MS)
    }
  })()
  return {
    async stop(installed) {
      stopped = true
      await done
      if (installed === undefined || samples.length === 0) return undefined
      // The first read at or after the flows were in (the last one when none was).
      const at = samples.find((s) => s.at >= installed) ?? samples[samples.length - 1]
      if (!at) return undefined
      return { wallMs: installed - seen, runMs: at.runMs, runqueueMs: at.runqueueMs }
    },
  }
}
