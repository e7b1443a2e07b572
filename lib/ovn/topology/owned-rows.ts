/**
 * The rows a group owns in NB, as read back (`readOwnedRows`: one select per topology
 * table on the owner `external_ids`) and indexed by row id (`<table>/<key>`), the form
 * the diff (`diff.ts`) compares with the desired rows. The NB cache (`cache.ts`) keeps an
 * index per group up to date row by row. Reconcile asks which groups own rows in an NB
 * (`groupsInNb`).
 */
import type { OvsdbClient } from '../client.ts'
import { Database } from '../database.ts'
import { type NbTables, nbSchema } from '../schema/nb.generated.ts'
import { TOPOLOGY_TABLES, type TopologyTable } from './compile.ts'
import { groupOfRow, OWNER_KEY, ROW_KEY, rowKeys } from './names.ts'

const nb = new Database<NbTables>(nbSchema)

/** A row as read back from NB, with its columns as plain values. */
export type ActualRow = { readonly _uuid: string; readonly _version: string } & Readonly<
  Record<string, unknown>
>
/** The rows a group owns in NB, per table. */
export type ActualRows = Readonly<Record<TopologyTable, readonly ActualRow[]>>

/** An owned row and its table. */
export interface IndexedRow {
  readonly table: TopologyTable
  readonly row: ActualRow
}

/** The rows a group owns in NB, by row id (`<table>/<key>`). */
export interface ActualIndex {
  /** One row per id. */
  readonly byId: ReadonlyMap<string, IndexedRow>
  /** Owned rows without a key, or with an id another row already has: stale. */
  readonly extra: Iterable<IndexedRow>
  /**
   * Whether `parent`'s reference `column` holds the row `child` (a UUID), when the index
   * can tell without reading the column (the NB cache keeps links); else the diff reads it.
   */
  readonly holds?: ((parent: ActualRow, column: string, child: string) => boolean) | undefined
}

/**
 * A group's rows indexed by row id, kept up to date row by row (the NB cache adds and
 * removes rows as monitor updates arrive), so a diff does not re-index the group.
 */
export class IndexedRows implements ActualIndex {
  readonly byId = new Map<string, IndexedRow>()
  readonly #extra = new Map<string, IndexedRow>()

  constructor(readonly holds?: (parent: ActualRow, column: string, child: string) => boolean) {}

  /** Indexes rows read back per table (the first row with an id wins; the rest are stale). */
  static of(actual: ActualRows): IndexedRows {
    const index = new IndexedRows()
    for (const table of TOPOLOGY_TABLES) for (const row of actual[table]) index.add(table, row)
    return index
  }

  get extra(): Iterable<IndexedRow> {
    return this.#extra.values()
  }

  get size(): number {
    return this.byId.size + this.#extra.size
  }

  add(table: TopologyTable, row: ActualRow): void {
    const id = actualIdOf(table, row)
    if (id === undefined || this.byId.has(id)) this.#extra.set(row._uuid, { table, row })
    else this.byId.set(id, { table, row })
  }

  remove(table: TopologyTable, row: ActualRow): void {
    if (this.#extra.delete(row._uuid)) return
    const id = actualIdOf(table, row)
    if (id === undefined || this.byId.get(id)?.row._uuid !== row._uuid) return
    this.byId.delete(id)
    // A stale duplicate with the same id takes its place.
    for (const [uuid, entry] of this.#extra) {
      if (actualIdOf(entry.table, entry.row) !== id) continue
      this.#extra.delete(uuid)
      this.byId.set(id, entry)
      return
    }
  }
}

function actualIdOf(table: TopologyTable, row: ActualRow): string | undefined {
  const key = keyOf(row)
  return key === undefined ? undefined : `${table}/${key}`
}

/** Reads every row of the topology tables whose owner `external_ids` is `owner`. */
export async function readOwnedRows(client: OvsdbClient, owner: string): Promise<ActualRows> {
  const results = await client.transact(
    nb.name,
    TOPOLOGY_TABLES.map((table) =>
      nb.select(table, [['external_ids', 'includes', { [OWNER_KEY]: owner }]]),
    ),
  )
  const out: Partial<Record<TopologyTable, ActualRow[]>> = {}
  for (const [i, table] of TOPOLOGY_TABLES.entries()) {
    out[table] = nb.decodeRows(table, results[i]?.rows) as unknown as ActualRow[]
  }
  return out as ActualRows
}

/**
 * The groups that own rows in this NB, read from their distributed routers (every
 * group has one while it has any row; reconcile looks here for orphans).
 */
export async function groupsInNb(client: OvsdbClient): Promise<string[]> {
  const [routers] = await client.transact(nb.name, [
    nb.select(
      'Logical_Router',
      [['external_ids', 'includes', { [ROW_KEY]: rowKeys.router }]],
      ['external_ids'],
    ),
  ])
  const groups = nb
    .decodeRows('Logical_Router', routers?.rows)
    .map((r) => groupOfRow(r.external_ids))
    .filter((g): g is string => g !== undefined)
  return [...new Set(groups)].sort()
}

/** A row's key (`ROW_KEY` in its `external_ids`), if it has one. */
export function keyOf(row: ActualRow): string | undefined {
  const ids = row.external_ids as Record<string, string> | undefined
  return ids?.[ROW_KEY]
}
