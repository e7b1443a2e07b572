import type { Job } from 'bullmq'
import { ConfigError, HydrazineError } from '../lib/errors.ts'
import {
  claimStoreEpoch,
  deleteGroupTopology,
  groupsInNb,
  type OvnCentralEndpoints,
  STORE_EPOCH_KEY,
  topologyNames,
} from '../lib/ovn/index.ts'
import type { HandlerDeps } from './internal/deps.ts'
import { type GroupApplied, GroupGone } from './internal/group-apply.ts'
import { type Retried, retryDue } from './internal/retries.ts'

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
  readonly checkedGroups: number
  readonly at: string
}

export interface ReconcileOptions {
  /**
   * Longest one group's apply, and one central's search for orphan rows, may take before
   * the run reports it (`RECONCILE_TIMEOUT`) and moves on (default 10 s): a hung central
   * delays the run by about twice this, never stops it.
   */
  readonly timeoutMs?: number
  /** Groups applied, and centrals searched, at once (default 8). */
  readonly concurrency?: number
  /**
   * Most orphan groups one run deletes from one NB (default 8): more at once looks like a
   * store that lost data, not like groups deleted while their rows stayed.
   */
  readonly maxOrphanDeletions?: number
  /** Where each failed group and unreachable central is reported (default: nowhere). */
  readonly log?: (line: string) => void
}

/**
 * `reconcile` (repeatable): compares every group's desired topology with the OVN NB and
 * repairs drift (one diff-and-commit per group, nothing when in sync), deletes rows that
 * carry Hydrazine's owner `external_ids` for groups that no longer exist, and reports
 * what it repaired, and the centrals whose group it does not know, as its job result.
 *
 * Each group, and each central's NB, is handled on its own and within `timeoutMs`: one
 * central that is down or hangs is reported (`failed`, `unreachableCentrals`) and logged
 * while every other group converges, and the job still completes — it fails only when
 * nothing answered at all (Redis down, the one shared central down).
 *
 * @example
 * const reconcile = createReconcile(deps, { log: (line) => logger.warn(line) })
 * const { repaired, failed } = await reconcile(job)
 */
export function createReconcile(
  deps: Pick<HandlerDeps, 'store' | 'ovn' | 'nb' | 'groups' | 'children' | 'jobs'>,
  {
    timeoutMs = 10_000,
    concurrency = 8,
    maxOrphanDeletions = 8,
    log = () => {},
  }: ReconcileOptions = {},
) {
  if (!(timeoutMs > 0 && Number.isFinite(timeoutMs)))
    throw new ConfigError(`reconcile timeoutMs must be a positive number of ms, not ${timeoutMs}`)
  if (!(Number.isInteger(concurrency) && concurrency >= 1))
    throw new ConfigError(`reconcile concurrency must be an integer >= 1, not ${concurrency}`)

  return async function reconcile(_job: Job): Promise<ReconcileReport> {
    const groups = await deps.store.listGroups()
    const repaired: string[] = []
    const inSync: string[] = []
    const skipped: string[] = []
    const failed: GroupFailure[] = []
    const centrals = new Map<string, OvnCentralEndpoints>()
    await eachAtMost(concurrency, groups, async (group) => {
      if (group.deletion || group.status.observedVersion === 0) {
        skipped.push(group.name)
        return
      }
      try {
        const applied = await withDeadline(`group ${group.name}`, timeoutMs, () =>
          deps.groups.apply(group.name),
        )
        const { endpoints, result } = applied
        if (!centrals.has(endpoints.nb)) centrals.set(endpoints.nb, endpoints)
        if (result.changed) {
          repaired.push(group.name)
          await recordRepairs(deps, group.name, applied)
        } else inSync.push(group.name)
      } catch (error) {
        if (error instanceof GroupGone) {
          skipped.push(group.name)
          return
        }
        const failure = { group: group.name, ...failureOf(error) }
        failed.push(failure)
        log(`reconcile: group ${group.name} not applied: ${failure.code}: ${failure.message}`)
      }
    })

    for (const central of await deps.ovn.list()) centrals.set(central.nb, central)
    const known = new Set(groups.map((g) => g.name))
    const orphansRemoved: string[] = []
    const orphansHeld: HeldOrphans[] = []
    const epoch = await deps.store.epoch()
    const unreachableCentrals: CentralFailure[] = []
    await eachAtMost(concurrency, [...centrals.entries()], async ([nb, central]) => {
      try {
        await withDeadline(`the NB of central ${central.service}`, timeoutMs, (signal) =>
          removeOrphanRows(deps, nb, known, signal, {
            epoch,
            max: maxOrphanDeletions,
            removed: orphansRemoved,
            held: orphansHeld,
          }),
        )
      } catch (error) {
        const failure: CentralFailure = {
          nb,
          service: central.service,
          ...(central.group !== undefined ? { group: central.group } : {}),
          ...failureOf(error),
        }
        unreachableCentrals.push(failure)
        const whose = central.group ? ` (group ${central.group})` : ''
        log(
          `reconcile: NB ${nb}${whose} not searched for orphan rows: ` +
            `${failure.code}: ${failure.message}`,
        )
      }
    })

    const attempted = groups.length - skipped.length + centrals.size
    const answered = repaired.length + inSync.length + centrals.size - unreachableCentrals.length
    if (attempted > 0 && answered === 0) throw new ReconcileFailed(failed, unreachableCentrals)

    for (const h of orphansHeld) {
      log(
        `reconcile: NB ${h.nb}: kept the rows of ${h.groups.join(', ')}: ${h.reason}: ${h.message}`,
      )
    }
    const orphanCentrals = await findOrphanCentrals(deps, known)
    const retried = await retryDue(deps).catch((error: unknown) => {
      const { code, message } = failureOf(error)
      log(`reconcile: retrying failed and stalled objects did not finish: ${code}: ${message}`)
      return []
    })
    for (const r of retried) log(`reconcile: ${r.kind} ${r.name}: ${r.action}: ${r.message}`)
    const byGroup = (a: GroupFailure, b: GroupFailure) => a.group.localeCompare(b.group)
    const byNb = (a: CentralFailure, b: CentralFailure) => a.nb.localeCompare(b.nb)
    return {
      repaired: repaired.sort(),
      inSync: inSync.sort(),
      skipped: skipped.sort(),
      failed: failed.sort(byGroup),
      orphansRemoved: orphansRemoved.sort(),
      orphansHeld,
      unreachableCentrals: unreachableCentrals.sort(byNb),
      orphanCentrals,
      retried,
      checkedGroups: groups.length,
      at: new Date().toISOString(),
    }
  }
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

/** Rows of a repair listed in one event at most; the rest are counted. */
const LISTED_ROWS = 8

/**
 * A repair goes into the group's events (the rows it rewrote) and into the events of
 * each host whose port it rewrote, so `…/events` says what was found wrong and mended.
 */
async function recordRepairs(
  deps: Pick<HandlerDeps, 'store'>,
  group: string,
  { result, state }: GroupApplied,
): Promise<void> {
  const rows = result.touched
  const listed = rows.slice(0, LISTED_ROWS).join(', ')
  const more = rows.length > LISTED_ROWS ? ` and ${rows.length - LISTED_ROWS} more` : ''
  await deps.store.events.record('rg', group, {
    type: 'Warning',
    reason: 'Repaired',
    message: `OVN NB differed from the desired topology; reconcile rewrote ${listed}${more}`,
  })
  const touched = new Set(rows)
  for (const { host } of state.members) {
    const port = topologyNames.hostPort(group, host.name)
    if (!touched.has(`Logical_Switch_Port/lsp/${port}`)) continue
    await deps.store.events.record('mr', host.name, {
      type: 'Warning',
      reason: 'Repaired',
      message: `the host's logical switch port ${port} differed from its spec in OVN NB; reconcile rewrote it`,
    })
  }
}

/** What one orphan search works with and reports into. */
interface OrphanSearch {
  /** This store's epoch: the NB must record it (or none, and then it records it). */
  readonly epoch: string
  /** Most orphan groups it deletes from this NB. */
  readonly max: number
  readonly removed: string[]
  readonly held: HeldOrphans[]
}

/**
 * Deletes the rows of groups the store does not have from one NB, adding each to
 * `removed` as it goes; starts no deletion once `signal` is aborted. Every deletion is
 * guarded:
 * - the NB must belong to this store (its recorded store epoch is this one's);
 * - no more than `max` groups at once (else none, reported `held`);
 * - the store is asked again right before each deletion: `known` is the run's first
 *   read, and a group created since (stored first, then applied) is not an orphan.
 */
async function removeOrphanRows(
  deps: Pick<HandlerDeps, 'nb' | 'store'>,
  nb: string,
  known: ReadonlySet<string>,
  signal: AbortSignal,
  search: OrphanSearch,
): Promise<void> {
  const { client } = await deps.nb.get(nb)
  signal.throwIfAborted()
  const check = await claimStoreEpoch(client, search.epoch)
  const orphans: string[] = []
  for (const owner of await groupsInNb(client)) {
    if (!known.has(owner) && !(await deps.store.getGroup(owner))) orphans.push(owner)
  }
  if (orphans.length === 0) return
  if (check.state === 'mismatch') {
    search.held.push({
      nb,
      groups: orphans,
      reason: 'StoreEpochMismatch',
      message: `the NB belongs to store epoch ${check.recorded}, not this store's ${search.epoch}: this store may have lost its data. If it is really the NB's store, remove NB_Global external_ids ${STORE_EPOCH_KEY} and the next run adopts it`,
    })
    return
  }
  if (orphans.length > search.max) {
    search.held.push({
      nb,
      groups: orphans,
      reason: 'TooManyOrphans',
      message: `${orphans.length} groups have rows in NB and none in the store, more than the ${search.max} one run deletes: check the store before deleting them by hand`,
    })
    return
  }
  for (const owner of orphans) {
    signal.throwIfAborted()
    if (await deps.store.getGroup(owner)) continue
    await deleteGroupTopology(client, owner)
    search.removed.push(owner)
  }
}

/**
 * Centrals of groups the store does not have. Group deletion releases a central before it
 * purges the group, so these come from a store that lost data (a wrong `REDIS_URL`, a
 * truncated AOF) or files left by another run: they are reported, never deleted, and an
 * operator decides. Each is checked again, so a group created since the run began is not
 * reported.
 */
async function findOrphanCentrals(
  deps: Pick<HandlerDeps, 'store' | 'ovn'>,
  known: ReadonlySet<string>,
): Promise<string[]> {
  const orphans: string[] = []
  for (const group of await deps.ovn.groups()) {
    if (known.has(group) || (await deps.store.getGroup(group))) continue
    orphans.push(group)
  }
  return orphans
}

/**
 * Runs `work` with a signal that aborts after `timeoutMs`, and rejects with
 * `ReconcileTimeout` then even if `work` goes on: neither the group applier nor a request
 * waiting for a lost connection to come back stops when asked, so the run does not wait
 * for them (what they still do is what the next run would do, and `work` checks `signal`
 * before each step it starts).
 */
async function withDeadline<T>(
  what: string,
  timeoutMs: number,
  work: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const abort = new AbortController()
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const timeout = new ReconcileTimeout(what, timeoutMs)
      abort.abort(timeout)
      reject(timeout)
    }, timeoutMs)
  })
  const working = (async () => work(abort.signal))()
  // Settled after the deadline, its outcome is no one's.
  working.catch(() => {})
  try {
    return await Promise.race([working, expired])
  } finally {
    clearTimeout(timer)
  }
}

/** Runs `work` on each item, at most `limit` at once; `work` must not reject. */
async function eachAtMost<T>(
  limit: number,
  items: readonly T[],
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0
  const lane = async () => {
    for (let i = next++; i < items.length; i = next++) await work(items[i] as T)
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane))
}

/** A failure as the report gives it: the error's code, message and whether to retry. */
function failureOf(error: unknown): ReconcileFailure {
  if (error instanceof HydrazineError)
    return { code: error.code, message: error.message, retryable: error.retryable }
  const code = (error as { code?: unknown } | null)?.code
  return {
    code: typeof code === 'string' ? code : 'UNEXPECTED',
    message: error instanceof Error ? error.message : String(error),
    retryable: true,
  }
}
