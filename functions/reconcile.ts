import type { Job } from 'bullmq'
import { deleteGroupTopology, groupsInNb } from '../lib/ovn/index.ts'
import type { HandlerDeps } from './internal/deps.ts'

export interface ReconcileReport {
  /** Groups whose NB rows differed from their desired topology and were repaired. */
  readonly repaired: string[]
  /** Groups that exist only in NB (Hydrazine-owned rows nothing wants) and were removed. */
  readonly orphansRemoved: string[]
  /** Groups gone from the store whose own central was still there, and was removed. */
  readonly centralsRemoved: string[]
  readonly checkedGroups: number
  readonly at: string
}

/**
 * `reconcile` (repeatable): compares every group's desired topology with the OVN NB and
 * repairs drift (one diff-and-commit per group, nothing when in sync), deletes rows that
 * carry Hydrazine's owner `external_ids` for groups that no longer exist, removes the own
 * centrals of groups that no longer exist, and reports what it repaired as its job result.
 */
export function createReconcile(
  deps: Pick<HandlerDeps, 'store' | 'ovn' | 'nb' | 'southbound' | 'groups'>,
) {
  return async function reconcile(_job: Job): Promise<ReconcileReport> {
    const groups = await deps.store.listGroups()
    const repaired: string[] = []
    const remotes = new Set<string>()
    for (const group of groups) {
      if (group.deletion || group.status.observedVersion === 0) continue
      const { endpoints, result } = await deps.groups.apply(group.name)
      remotes.add(endpoints.nb)
      if (result.changed) repaired.push(group.name)
    }

    for (const central of await deps.ovn.list()) remotes.add(central.nb)
    const known = new Set(groups.map((g) => g.name))
    const orphansRemoved: string[] = []
    for (const remote of remotes) {
      const { client } = await deps.nb.get(remote)
      for (const owner of await groupsInNb(client)) {
        if (known.has(owner)) continue
        await deleteGroupTopology(client, owner)
        orphansRemoved.push(owner)
      }
    }
    const centralsRemoved = await removeOrphanCentrals(deps, known)
    return {
      repaired,
      orphansRemoved,
      centralsRemoved,
      checkedGroups: groups.length,
      at: new Date().toISOString(),
    }
  }
}

/**
 * Centrals of groups the store no longer has (a delete that crashed after purging the
 * group, or files left from another run). Each is checked again right before it goes, so a
 * group created since the run began keeps its central.
 */
async function removeOrphanCentrals(
  deps: Pick<HandlerDeps, 'store' | 'ovn' | 'nb' | 'southbound'>,
  known: ReadonlySet<string>,
): Promise<string[]> {
  const removed: string[] = []
  for (const group of await deps.ovn.groups()) {
    if (known.has(group) || (await deps.store.getGroup(group))) continue
    const running = (await deps.ovn.list()).find((c) => c.group === group)
    await deps.ovn.release(group)
    if (running) {
      await deps.nb.drop(running.nb)
      await deps.southbound.drop(running.sbController)
    }
    removed.push(group)
  }
  return removed
}
