import type { Job } from 'bullmq'
import { deleteGroupTopology, groupsInNb } from '../lib/ovn/index.ts'
import type { HandlerDeps } from './internal/deps.ts'

export interface ReconcileReport {
  /** Groups whose NB rows differed from their desired topology and were repaired. */
  readonly repaired: string[]
  /** Groups that exist only in NB (Hydrazine-owned rows nothing wants) and were removed. */
  readonly orphansRemoved: string[]
  /** Groups the store does not have whose own central is still on disk (kept). */
  readonly orphanCentrals: string[]
  readonly checkedGroups: number
  readonly at: string
}

/**
 * `reconcile` (repeatable): compares every group's desired topology with the OVN NB and
 * repairs drift (one diff-and-commit per group, nothing when in sync), deletes rows that
 * carry Hydrazine's owner `external_ids` for groups that no longer exist, and reports
 * what it repaired, and the centrals whose group it does not know, as its job result.
 */
export function createReconcile(deps: Pick<HandlerDeps, 'store' | 'ovn' | 'nb' | 'groups'>) {
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
    const orphanCentrals = await findOrphanCentrals(deps, known)
    return {
      repaired,
      orphansRemoved,
      orphanCentrals,
      checkedGroups: groups.length,
      at: new Date().toISOString(),
    }
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
