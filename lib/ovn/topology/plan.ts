/**
 * What applying a group's topology would change, without changing it: the rows an apply
 * would insert, update and delete, by row id (`<table>/<key>`, e.g.
 * `Logical_Switch_Port/lsp/hz/group-a/host-1`). The same diff an apply commits.
 */
import type { OvsdbClient } from '../client.ts'
import { type DesiredRows, TOPOLOGY_TABLES } from './compile.ts'
import { diffTopology } from './diff.ts'
import { ownerOf } from './names.ts'
import { type ActualRows, IndexedRows, readOwnedRows } from './owned-rows.ts'

export interface TopologyPlan {
  readonly insert: readonly string[]
  readonly update: readonly string[]
  readonly delete: readonly string[]
}

/**
 * The plan that takes `actual` (the group's owned rows as read) to `desired`. Pure.
 *
 * @example
 * planTopology(compileGroupTopology(spec), emptyRows()).insert
 * // ['Logical_Switch/ls', 'Logical_Router/lr', …]: a new group inserts everything
 */
export function planTopology(desired: DesiredRows, actual: ActualRows): TopologyPlan {
  const index = IndexedRows.of(actual)
  const wanted = new Set(desired.rows.map((r) => `${r.table}/${r.key}`))
  const { touched } = diffTopology(desired, index)
  const insert = touched.filter((id) => !index.byId.has(id))
  const update = touched.filter((id) => index.byId.has(id))
  const stale = [
    ...[...index.byId.keys()].filter((id) => !wanted.has(id)),
    ...[...index.extra].map((e) => `${e.table}/${e.row._uuid}`),
  ]
  return { insert: insert.sort(), update: update.sort(), delete: stale.sort() }
}

/** No rows at all: what a group without a central, or not yet applied, has. */
export function emptyRows(): ActualRows {
  return Object.fromEntries(TOPOLOGY_TABLES.map((table) => [table, []])) as unknown as ActualRows
}

/** Reads the group's rows from its NB and plans against them. */
export async function planGroupRows(
  client: OvsdbClient,
  group: string,
  desired: DesiredRows,
): Promise<TopologyPlan> {
  return planTopology(desired, await readOwnedRows(client, ownerOf(group)))
}
