import type { Job } from 'bullmq'
import { CentralStopJob } from '../lib/jobs/index.ts'
import type { CentralRelease } from '../lib/state/store.ts'
import { onDemand, stopUnwantedCentral } from './internal/central-demand.ts'
import type { HandlerDeps } from './internal/deps.ts'
import { parsePayload } from './internal/job.ts'

export interface CentralStopResult {
  readonly group: string
  /** True when this run stopped the group's central (false: a host took its slot again). */
  readonly stopped: boolean
  /** Why it did not: the group has hosts again (`busy`), a later stop decides (`recent`), … */
  readonly skipped?: CentralRelease | 'not on demand'
}

type CentralStopDeps = Pick<HandlerDeps, 'store' | 'ovn' | 'nb' | 'southbound'> &
  Partial<Pick<HandlerDeps, 'centralsOnDemand'>>

/**
 * `central.stop` (centrals on demand, scheduled by a group's last detach): once the group
 * has had no host for the grace period, gives its central slot back (atomically with the
 * host writes: a host arriving a moment later takes a slot again) and stops its central,
 * keeping its databases; the group reports `CentralRunning=False NoHosts`. A host that
 * arrived within the grace period kept the central: nothing stops. A host arriving while
 * it stops gets it started again (`stopUnwantedCentral`).
 */
export function createCentralStop(deps: CentralStopDeps) {
  return async function centralStop(job: Job): Promise<CentralStopResult> {
    const { group } = parsePayload(CentralStopJob, job)
    const demand = deps.centralsOnDemand
    if (!demand || !onDemand(deps)) {
      return { group, stopped: false, skipped: 'not on demand' }
    }
    const released = await deps.store.centrals.releaseIfIdle(group, Date.now(), demand.idleMs)
    if (released !== 'released') return { group, stopped: false, skipped: released }
    const running = (await deps.ovn.list()).find((c) => c.group === group)
    return { group, stopped: await stopUnwantedCentral(deps, group, running) }
  }
}
