import type { Job } from 'bullmq'
import { Database, deleteGroupTopology, type NbTables, nbSchema } from '../lib/ovn/index.ts'
import type { HandlerDeps } from './deps.ts'
import { applyGroup } from './group-state.ts'

const nb = new Database<NbTables>(nbSchema)

export interface ReconcileReport {
  /** Groups whose NB rows differed from their desired topology and were repaired. */
  readonly repaired: string[]
  /** Groups that exist only in NB (Hydrazine-owned rows nothing wants) and were removed. */
  readonly orphansRemoved: string[]
  readonly checkedGroups: number
  readonly at: string
}

/**
 * `reconcile` (repeatable): compares every group's desired topology with the OVN NB and
 * repairs drift (one diff-and-commit per group, nothing when in sync), deletes rows that
 * carry Hydrazine's owner `external_ids` for groups that no longer exist, and reports
 * what it repaired as its job result.
 */
export function createReconcile(
  deps: Pick<HandlerDeps, 'store' | 'ipam' | 'ovn' | 'nb' | 'fabric'>,
) {
  return async function reconcile(_job: Job): Promise<ReconcileReport> {
    const groups = await deps.store.listGroups()
    const repaired: string[] = []
    const remotes = new Set<string>()
    for (const group of groups) {
      if (group.deletion || group.status.observedVersion === 0) continue
      const { endpoints, result } = await applyGroup(deps, group)
      remotes.add(endpoints.nb)
      if (result.changed) repaired.push(group.name)
    }

    for (const central of await deps.ovn.list()) remotes.add(central.nb)
    const known = new Set(groups.map((g) => g.name))
    const orphansRemoved: string[] = []
    for (const remote of remotes) {
      const { client } = await deps.nb.get(remote)
      const [routers] = await client.transact(nb.name, [
        nb.select('Logical_Router', [], ['external_ids']),
      ])
      const owners = new Set(
        nb
          .decodeRows('Logical_Router', routers?.rows)
          .map((r) => r.external_ids['hydrazine:group'])
          .filter((g): g is string => typeof g === 'string'),
      )
      for (const owner of owners) {
        if (known.has(owner)) continue
        await deleteGroupTopology(client, owner)
        orphansRemoved.push(owner)
      }
    }
    return {
      repaired,
      orphansRemoved,
      checkedGroups: groups.length,
      at: new Date().toISOString(),
    }
  }
}
