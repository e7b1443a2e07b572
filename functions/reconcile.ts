import type { Job } from 'bullmq'
import { ConfigError } from '../lib/errors.ts'
import { implementationOf, type ResourceGroup } from '../lib/model/objects.ts'
import type { OvnCentralEndpoints } from '../lib/ovn/index.ts'
import { eachAtMost, withDeadline } from './internal/bounded-work.ts'
import { centralMayStop, onDemand, stopUnwantedCentral } from './internal/central-demand.ts'
import {
  type ChassisGroupFailure,
  certifyUncertified,
  renewChassisCertificates,
  rotateForLeavers,
} from './internal/chassis-credentials.ts'
import type { HandlerDeps } from './internal/deps.ts'
import { GroupGone } from './internal/group-apply.ts'
import { findOrphanCentrals, removeOrphanRows } from './internal/orphans.ts'
import {
  type CentralFailure,
  failureOf,
  type GroupFailure,
  type HeldOrphans,
  ReconcileFailed,
  type ReconcileReport,
} from './internal/reconcile-report.ts'
import { recordRepairs } from './internal/repair-events.ts'
import { retryDue } from './internal/retries.ts'

export {
  type CentralFailure,
  type GroupFailure,
  type HeldOrphans,
  ReconcileFailed,
  type ReconcileFailure,
  type ReconcileReport,
  ReconcileTimeout,
} from './internal/reconcile-report.ts'

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
  deps: Pick<
    HandlerDeps,
    'store' | 'ovn' | 'nb' | 'groups' | 'children' | 'jobs' | 'groupHosts' | 'agents'
  > &
    Partial<Pick<HandlerDeps, 'centralsOnDemand' | 'southbound' | 'dpuIdentities'>>,
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

  const bounds: RunBounds = { timeoutMs, concurrency, log }

  return async function reconcile(_job: Job): Promise<ReconcileReport> {
    const groups = await deps.store.groups.list()
    const applied = await applyEveryGroup(deps, groups, bounds)
    const { centrals } = applied
    const running = await deps.ovn.list()
    const stopped = await stopIdleCentrals(deps, running, applied.idle, log)
    for (const central of running) {
      if (!central.group || !stopped.includes(central.group)) centrals.set(central.nb, central)
    }
    const known = new Set(groups.map((g) => g.name))
    const orphans = await searchEveryCentral(deps, centrals, known, maxOrphanDeletions, bounds)

    const attempted = groups.length - applied.skipped.length + centrals.size
    const answered =
      applied.repaired.length + applied.inSync.length + centrals.size - orphans.unreachable.length
    if (attempted > 0 && answered === 0) {
      throw new ReconcileFailed(applied.failed, orphans.unreachable)
    }

    for (const h of orphans.held) {
      log(
        `reconcile: NB ${h.nb}: kept the rows of ${h.groups.join(', ')}: ${h.reason}: ${h.message}`,
      )
    }
    const orphanCentrals = await findOrphanCentrals(deps, known)
    await deps.ovn.tidy?.().catch((error: unknown) => {
      const { code, message } = failureOf(error)
      log(`reconcile: finishing earlier central releases did not finish: ${code}: ${message}`)
    })
    const retried = await retryDue(deps).catch((error: unknown) => {
      const { code, message } = failureOf(error)
      log(`reconcile: retrying failed and stalled objects did not finish: ${code}: ${message}`)
      return []
    })
    for (const r of retried) log(`reconcile: ${r.kind} ${r.name}: ${r.action}: ${r.message}`)
    // Leavers first: a renewal's certificate from a CA about to be replaced is wasted.
    const leavers = await rotateForLeavers(deps).catch((error: unknown) => ({
      rotated: [],
      failed: [{ group: '*', error }],
    }))
    logChassisFailures(
      log,
      leavers.failed,
      (group) => `the chassis CA of ${group} not replaced for DPUs that left`,
    )
    const chassisCaRotated = leavers.rotated
    for (const r of chassisCaRotated)
      log(
        `reconcile: group ${r.group}: chassis CA replaced, DPUs ${r.left.join(', ')} serve none of its hosts; sent new certificates to ${r.sent.map((s) => s.dpuId).join(', ') || 'no DPU'}`,
      )
    const chassisRenewed = await renewChassisCertificates(deps).catch((error: unknown) => {
      const { code, message } = failureOf(error)
      log(`reconcile: renewing chassis certificates did not finish: ${code}: ${message}`)
      return []
    })
    for (const r of chassisRenewed)
      log(`reconcile: DPU ${r.dpuId}: a new chassis certificate for ${r.group} (host ${r.host})`)
    const uncertified = await certifyUncertified(deps).catch((error: unknown) => ({
      sent: [],
      failed: [{ group: '*', error }],
    }))
    logChassisFailures(
      log,
      uncertified.failed,
      (group) => `DPUs of ${group} without a chassis certificate not sent one`,
    )
    const chassisIssued = uncertified.sent
    for (const r of chassisIssued)
      log(
        `reconcile: DPU ${r.dpuId} held no chassis certificate for ${r.group}: sent one (host ${r.host})`,
      )
    const byGroup = (a: GroupFailure, b: GroupFailure) => a.group.localeCompare(b.group)
    const byNb = (a: CentralFailure, b: CentralFailure) => a.nb.localeCompare(b.nb)
    return {
      repaired: applied.repaired.sort(),
      inSync: applied.inSync.sort(),
      skipped: applied.skipped.sort(),
      failed: applied.failed.sort(byGroup),
      orphansRemoved: orphans.removed.sort(),
      orphansHeld: orphans.held,
      unreachableCentrals: orphans.unreachable.sort(byNb),
      orphanCentrals,
      retried,
      ...(chassisRenewed.length > 0 ? { chassisRenewed } : {}),
      ...(chassisIssued.length > 0 ? { chassisIssued } : {}),
      ...(chassisCaRotated.length > 0 ? { chassisCaRotated } : {}),
      ...(stopped.length > 0 ? { centralsStopped: stopped } : {}),
      checkedGroups: groups.length,
      at: new Date().toISOString(),
    }
  }
}

/** Logs each group a chassis pass of reconcile could not finish, saying what it left undone. */
function logChassisFailures(
  log: (line: string) => void,
  failed: readonly ChassisGroupFailure[],
  undone: (group: string) => string,
): void {
  for (const { group, error } of failed) {
    const { code, message } = failureOf(error)
    log(`reconcile: ${undone(group)}: ${code}: ${message}`)
  }
}

/** How one run bounds each piece of its work, and where it reports what failed. */
interface RunBounds {
  readonly timeoutMs: number
  readonly concurrency: number
  readonly log: (line: string) => void
}

/**
 * Applies every Overlay group that is neither being deleted nor waiting for its first apply
 * (nor, with centrals on demand, without a running central),
 * each within the run's bound; returns how each fared and the centrals they answered
 * from (by NB remote).
 */
async function applyEveryGroup(
  deps: Pick<HandlerDeps, 'groups' | 'store' | 'groupHosts' | 'ovn' | 'jobs'> &
    Partial<Pick<HandlerDeps, 'centralsOnDemand'>>,
  groups: readonly ResourceGroup[],
  { timeoutMs, concurrency, log }: RunBounds,
) {
  const repaired: string[] = []
  const inSync: string[] = []
  const skipped: string[] = []
  /** Groups without hosts holding no central slot (on demand): their central should not run. */
  const idle: string[] = []
  const failed: GroupFailure[] = []
  const centrals = new Map<string, OvnCentralEndpoints>()
  // Centrals on demand: the groups holding a slot, read once for the run (a slot taken or
  // given back meanwhile: `hold` and `centralMayStop` are safe either way).
  const slots = onDemand(deps) ? new Set(await deps.store.centrals.list()) : undefined
  await eachAtMost(concurrency, groups, async (group) => {
    // A Fabric group has no OVN topology to compare.
    if (
      group.deletion ||
      group.status.observedVersion === 0 ||
      implementationOf(group.spec) === 'Fabric'
    ) {
      skipped.push(group.name)
      return
    }
    // Centrals on demand: a group without hosts runs no central, and none is started to
    // compare it; one whose stop was never scheduled (a crash after its last detach) gets it.
    // A group with hosts but no slot (stored by a version that started every group's
    // central with the group) takes its slot, past the cap: its hosts are attached already.
    if (slots) {
      const hosts = await deps.store.groups.memberCount(group.name)
      if (!slots.has(group.name)) {
        if (hosts === 0) {
          skipped.push(group.name)
          idle.push(group.name)
          return
        }
        await deps.store.centrals.hold(group.name)
      } else if (hosts === 0) await centralMayStop(deps, group.name, { keepMark: true })
    }
    try {
      const applied = await withDeadline(`group ${group.name}`, timeoutMs, () =>
        deps.groups.apply(group.name, { compareAll: true }),
      )
      const { endpoints, result } = applied
      if (!centrals.has(endpoints.nb)) centrals.set(endpoints.nb, endpoints)
      // Rows written for the first time (an attach's host not applied yet) are no repair:
      // only where NB differed from what was applied before.
      if (result.drifted.length > 0) {
        repaired.push(group.name)
        await recordRepairs(deps, group.name, applied)
      } else inSync.push(group.name)
      // A status write another process lost to a race is put right here.
      await deps.groupHosts?.refresh(group.name)
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
  return { repaired, inSync, skipped, failed, centrals, idle }
}

/**
 * Centrals on demand: stops the running centrals of groups that hold no slot and have no
 * host (`idle`), the ones an apply started just as `central.stop` gave the slot back (it
 * checked the slot a moment before): nothing else would stop them, and the cap does not
 * count them. Returns the groups whose central it stopped.
 */
async function stopIdleCentrals(
  deps: Pick<HandlerDeps, 'store' | 'ovn' | 'nb'> & Partial<Pick<HandlerDeps, 'southbound'>>,
  running: readonly OvnCentralEndpoints[],
  idle: readonly string[],
  log: (line: string) => void,
): Promise<string[]> {
  const stopped: string[] = []
  for (const central of running) {
    const group = central.group
    if (group === undefined || !idle.includes(group)) continue
    try {
      if (await stopUnwantedCentral(deps, group, central)) stopped.push(group)
    } catch (error) {
      const { code, message } = failureOf(error)
      log(`reconcile: the central of ${group} (no host, no slot) not stopped: ${code}: ${message}`)
    }
  }
  return stopped.sort()
}

/**
 * Searches every central's NB for rows of groups the store does not have (`known`, and
 * asked again before each deletion), each within the run's bound; returns the orphans it
 * removed and held back, and the centrals it could not search.
 */
async function searchEveryCentral(
  deps: Pick<HandlerDeps, 'nb' | 'store'>,
  centrals: ReadonlyMap<string, OvnCentralEndpoints>,
  known: ReadonlySet<string>,
  maxOrphanDeletions: number,
  { timeoutMs, concurrency, log }: RunBounds,
) {
  const removed: string[] = []
  const held: HeldOrphans[] = []
  const epoch = await deps.store.epoch()
  const unreachable: CentralFailure[] = []
  await eachAtMost(concurrency, [...centrals.entries()], async ([nb, central]) => {
    try {
      await withDeadline(`the NB of central ${central.service}`, timeoutMs, (signal) =>
        removeOrphanRows(deps, nb, known, signal, {
          epoch,
          max: maxOrphanDeletions,
          removed,
          held,
        }),
      )
    } catch (error) {
      const failure: CentralFailure = {
        nb,
        service: central.service,
        ...(central.group !== undefined ? { group: central.group } : {}),
        ...failureOf(error),
      }
      unreachable.push(failure)
      const whose = central.group ? ` (group ${central.group})` : ''
      log(
        `reconcile: NB ${nb}${whose} not searched for orphan rows: ` +
          `${failure.code}: ${failure.message}`,
      )
    }
  })
  return { removed, held, unreachable }
}
