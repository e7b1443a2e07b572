/**
 * What one `reconcile` run reports (its job result): the groups it repaired, found in
 * sync, skipped or could not apply, the orphan rows it removed or held back, the centrals
 * it could not search, and what it retried; and why a piece failed, as a stable code.
 */

import { HydrazineError } from '../../lib/errors.ts'
import type { ChassisCaRotated, CredentialsSent } from './chassis-credentials.ts'
import type { Retried } from './retries.ts'

/** Why a group or a central was left out of one run, as the report and the log give it. */
export interface ReconcileFailure {
  /**
   * The error's stable code: `OVN_CENTRAL_UNAVAILABLE`, `OVSDB_CONNECTION`,
   * `RECONCILE_TIMEOUT` (no answer within the run's bound), …; `UNEXPECTED` when the
   * error carries none.
   */
  readonly code: string
  readonly message: string
  /** True when the next run may succeed without anyone acting. */
  readonly retryable: boolean
}

/** Orphan groups of one NB that a run found and did not delete, and why. */
export interface HeldOrphans {
  readonly nb: string
  readonly groups: readonly string[]
  readonly reason: 'StoreEpochMismatch' | 'TooManyOrphans'
  readonly message: string
}

/** A group whose topology this run could not apply. */
export interface GroupFailure extends ReconcileFailure {
  readonly group: string
}

/** A central whose NB this run could not search for orphan rows. */
export interface CentralFailure extends ReconcileFailure {
  /** The NB remote that did not answer. */
  readonly nb: string
  /** The provider's name for the central (`shared`, `central-g-…`). */
  readonly service: string
  /** The group whose own central it is, if any. */
  readonly group?: string
}

/**
 * The result of one `reconcile` run. Every group the store had is in exactly one of
 * `repaired`, `inSync`, `skipped` and `failed`.
 */
export interface ReconcileReport {
  /** Groups whose NB rows differed from their desired topology and were repaired. */
  readonly repaired: string[]
  /** Groups whose NB rows already matched. */
  readonly inSync: string[]
  /** Groups left to their own jobs: being deleted, never applied yet, or gone meanwhile. */
  readonly skipped: string[]
  /**
   * Groups whose apply failed or did not finish in time (their central is down, their NB
   * does not answer): the other groups converged regardless; the next run tries again.
   */
  readonly failed: GroupFailure[]
  /** Groups that exist only in NB (Hydrazine-owned rows nothing wants) and were removed. */
  readonly orphansRemoved: string[]
  /**
   * Orphan rows found but not deleted, per NB: the NB belongs to another store epoch (this
   * store lost its data, or is not the one the NB was built from: `StoreEpochMismatch`),
   * or there were more than the run may delete (`TooManyOrphans`). An operator decides.
   */
  readonly orphansHeld: HeldOrphans[]
  /** Centrals whose NB could not be searched for orphan rows (unreachable, or too slow). */
  readonly unreachableCentrals: CentralFailure[]
  /** Groups the store does not have whose own central is still on disk (kept). */
  readonly orphanCentrals: string[]
  /**
   * Objects this run tried again: Failed ones whose backoff passed (`Retrying`), and
   * converging ones whose job gave up (`RetriesExhausted`, now Failed) or stalled.
   */
  readonly retried: Retried[]
  /**
   * DPUs sent a new chassis certificate for their group's SB (less than half of the old
   * one's life was left), each through a `configure` of the host named.
   */
  readonly chassisRenewed?: CredentialsSent[]
  /**
   * DPUs serving a Ready host of a group whose SB admits only its own chassis that held no
   * valid certificate of its CA (it ran out, or an earlier version configured them), each
   * sent one through a `configure` of the host named.
   */
  readonly chassisIssued?: CredentialsSent[]
  /**
   * Groups whose chassis CA this run replaced because it still certified DPUs serving
   * none of their hosts (`left`): their certificates open the group's SB no more, and the
   * group's other DPUs were sent new ones (`sent`).
   */
  readonly chassisCaRotated?: ChassisCaRotated[]
  /**
   * Centrals on demand: groups with no host and no central slot whose central ran anyway
   * (an apply started it as its stop gave the slot back), stopped by this run.
   */
  readonly centralsStopped?: string[]
  readonly checkedGroups: number
  readonly at: string
}

/** A group's apply, or a central's NB, gave no answer within the run's bound. */
export class ReconcileTimeout extends HydrazineError {
  constructor(what: string, timeoutMs: number) {
    super('RECONCILE_TIMEOUT', `${what} did not answer within ${timeoutMs} ms`, {
      retryable: true,
    })
  }
}

/** Not one group could be applied nor one central searched: the run failed as a whole. */
export class ReconcileFailed extends HydrazineError {
  constructor(
    readonly failed: readonly GroupFailure[],
    readonly unreachableCentrals: readonly CentralFailure[],
  ) {
    const reasons = [
      ...failed.map((f) => `group ${f.group}: ${f.code}`),
      ...unreachableCentrals.map((c) => `NB ${c.nb}: ${c.code}`),
    ]
    super('RECONCILE_FAILED', `nothing answered: ${reasons.join('; ')}`, { retryable: true })
  }
}

/** A failure as the report gives it: the error's code, message and whether to retry. */
export function failureOf(error: unknown): ReconcileFailure {
  if (error instanceof HydrazineError)
    return { code: error.code, message: error.message, retryable: error.retryable }
  const code = (error as { code?: unknown } | null)?.code
  return {
    code: typeof code === 'string' ? code : 'UNEXPECTED',
    message: error instanceof Error ? error.message : String(error),
    retryable: true,
  }
}
