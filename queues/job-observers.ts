/**
 * What the controller worker tells whoever watches it (the composition root's metrics):
 * each handler run with its outcome and duration, the repairs `reconcile` and
 * `dpu.health` report, and hosts turning Ready. The watcher is optional and never
 * changes what a job does.
 */

import {
  DelayedError,
  type Job,
  RateLimitError,
  UnrecoverableError,
  WaitingChildrenError,
} from 'bullmq'
import type { DpuHealthResult } from '../functions/dpu-health.ts'
import type { GroupCommitted } from '../functions/internal/group-apply.ts'
import type { ReconcileReport } from '../functions/reconcile.ts'
import type { JobName } from '../lib/jobs/index.ts'

/**
 * How one run of a handler ended:
 * - `completed`: it returned;
 * - `waiting`: it parked itself (children pending, its object busy) and runs again;
 * - `retried`: it threw, and BullMQ tries again after a backoff;
 * - `failed`: it threw for good (unrecoverable, or its last attempt).
 */
export type JobOutcome = 'completed' | 'waiting' | 'retried' | 'failed'

/** What a repair was, as the repair metrics name it. */
export type RepairKind =
  /** A group's NB rows differed from its desired topology and were rewritten. */
  | 'nb_drift'
  /** Hydrazine-owned NB rows of a group the store no longer has were removed. */
  | 'orphan_rows'
  /** A Failed object got a new attempt once its backoff passed. */
  | 'retrying'
  /** A converging object whose job finished or vanished without reporting was re-driven. */
  | 'stalled'
  /** A converging object whose job gave up was marked Failed. */
  | 'retries_exhausted'
  /** A deletion whose job never reached the queue was queued. */
  | 'deletion_resumed'
  /** A group's chassis CA was replaced: it still certified DPUs that had left the group. */
  | 'chassis_ca_rotated'
  /**
   * A DPU serving a Ready host held no valid certificate of its group's chassis CA (it ran
   * out, or an earlier version configured it): it was sent one.
   */
  | 'chassis_certificate_issued'

/** What `dpu.health` repaired on a DPU (the last two: Fabric groups' VRFs). */
export type DpuRepairKind =
  | 'port_lost'
  | 'stray_port_isolated'
  | 'fabric_route_lost'
  | 'fabric_stray_isolated'

export interface WorkerObservers {
  /** One handler run ended. */
  readonly jobRun?: (job: JobName, outcome: JobOutcome, seconds: number) => void
  /** A reconcile run repaired `count` things of `kind` (called only for count > 0). */
  readonly reconcileRepaired?: (kind: RepairKind, count: number) => void
  /** A `dpu.health` run repaired something on a DPU. */
  readonly dpuRepaired?: (kind: DpuRepairKind) => void
  /** A `dpu.health` run revoked a DPU's credentials (over its bound in the agents' Redis). */
  readonly dpuRevoked?: (dpu: string) => void
  /** A `dpu.health` run revoked a queue producer's Redis user (over its bound there). */
  readonly producerRevoked?: (producer: string) => void
  /** A host turned Ready, `seconds` after its spec was accepted. */
  readonly hostReady?: (seconds: number) => void
  /** A group's NB commit that added or removed ports, once ovn-northd processed it. */
  readonly groupCommitted?: (commit: GroupCommitted) => void
}

/** The outcome of a run of `job` that threw `error` (see `JobOutcome`). */
export function outcomeOfError(
  job: Pick<Job, 'attemptsMade' | 'opts'>,
  error: unknown,
): JobOutcome {
  if (
    error instanceof DelayedError ||
    error instanceof WaitingChildrenError ||
    error instanceof RateLimitError
  ) {
    return 'waiting'
  }
  if (error instanceof UnrecoverableError) return 'failed'
  return job.attemptsMade + 1 < (job.opts.attempts ?? 1) ? 'retried' : 'failed'
}

/**
 * Errors that say "not yet" (an agent that has not answered, a child that must be added
 * again, a group still provisioning): the object's status carries the wait.
 */
const WAITING_CODES: ReadonlySet<string> = new Set(['NOT_READY', 'AWAITING_ACK'])

/**
 * The level a failed run is logged at, as BullMQ reports it (`attemptsMade` counts this
 * run): a wait that will be tried again is normal and logged at `debug`; anything else,
 * or a wait whose job has no attempt left, at `warn`.
 */
export function failureLogLevel(
  job: Pick<Job, 'attemptsMade' | 'opts'> | undefined,
  error: unknown,
): 'debug' | 'warn' {
  const waiting =
    typeof (error as { code?: unknown })?.code === 'string' &&
    WAITING_CODES.has((error as { code: string }).code)
  const retried = job !== undefined && job.attemptsMade < (job.opts.attempts ?? 1)
  return waiting && retried ? 'debug' : 'warn'
}

/** The repairs a reconcile report lists, by kind (kinds with none left out). */
export function reconcileRepairs(
  report: Pick<
    ReconcileReport,
    'repaired' | 'orphansRemoved' | 'retried' | 'chassisCaRotated' | 'chassisIssued'
  >,
): Map<RepairKind, number> {
  const counts = new Map<RepairKind, number>()
  const add = (kind: RepairKind, n: number) => {
    if (n > 0) counts.set(kind, (counts.get(kind) ?? 0) + n)
  }
  add('nb_drift', report.repaired.length)
  add('orphan_rows', report.orphansRemoved.length)
  for (const { action } of report.retried) add(RETRY_KINDS[action], 1)
  add('chassis_ca_rotated', report.chassisCaRotated?.length ?? 0)
  add('chassis_certificate_issued', report.chassisIssued?.length ?? 0)
  return counts
}

const RETRY_KINDS = {
  Retrying: 'retrying',
  Stalled: 'stalled',
  RetriesExhausted: 'retries_exhausted',
  DeletionResumed: 'deletion_resumed',
} as const satisfies Record<ReconcileReport['retried'][number]['action'], RepairKind>

/** The repairs a `dpu.health` run made, one kind per repair. */
export function dpuRepairs(result: Pick<DpuHealthResult, 'repairs'>): DpuRepairKind[] {
  return result.repairs.map((r) => DPU_REPAIR_KINDS[r.action])
}

const DPU_REPAIR_KINDS = {
  PortLost: 'port_lost',
  StrayPortIsolated: 'stray_port_isolated',
  RouteLost: 'fabric_route_lost',
  StrayVrfIsolated: 'fabric_stray_isolated',
} as const satisfies Record<DpuHealthResult['repairs'][number]['action'], DpuRepairKind>

/**
 * Wraps a handler so that each run is reported to `observers.jobRun` with its outcome and
 * duration; the handler's result and errors pass unchanged.
 */
export function timed<R>(
  name: JobName,
  handler: (job: Job, token?: string) => Promise<R>,
  observers: WorkerObservers,
): (job: Job, token?: string) => Promise<R> {
  if (!observers.jobRun) return handler
  const report = observers.jobRun
  return async function timedHandler(job, token) {
    const started = performance.now()
    const seconds = () => (performance.now() - started) / 1000
    try {
      const result = await handler(job, token)
      report(name, 'completed', seconds())
      return result
    } catch (error) {
      report(name, outcomeOfError(job, error), seconds())
      throw error
    }
  }
}

/** Wraps a handler so that `seen` gets each result it returns (the result passes unchanged). */
export function reporting<R>(
  handler: (job: Job, token?: string) => Promise<R>,
  seen: (result: R) => void,
): (job: Job, token?: string) => Promise<R> {
  return async function reportingHandler(job, token) {
    const result = await handler(job, token)
    seen(result)
    return result
  }
}
