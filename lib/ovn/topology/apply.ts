import type { OvsdbClient } from '../client.ts'
import { Database } from '../database.ts'
import { OvsdbTimedOut } from '../errors.ts'
import type { Operation } from '../protocol.ts'
import { type NbTables, nbSchema } from '../schema/nb.generated.ts'
import type { NbTopologyCache } from './cache.ts'
import {
  compileGroupTopology,
  type DesiredRow,
  type DesiredRows,
  type ParentRef,
  rowId,
  TOPOLOGY_TABLES,
  type TopologyTable,
} from './compile.ts'
import { TopologyApplyContention } from './errors.ts'
import { groupOfRow, OWNER_KEY, ownerOf, ROW_KEY } from './names.ts'
import type { GroupTopologySpec } from './spec.ts'

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
}

/**
 * A group's rows indexed by row id, kept up to date row by row (the NB cache adds and
 * removes rows as monitor updates arrive), so a diff does not re-index the group.
 */
export class IndexedRows implements ActualIndex {
  readonly byId = new Map<string, IndexedRow>()
  readonly #extra = new Map<string, IndexedRow>()

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

/**
 * A desired row's id (or a parent reference's), computed once per object: a compile memo
 * hands out the same objects while their inputs are unchanged, and reusing one string
 * keeps the diff's map lookups from hashing a new one each time.
 */
function idOf(row: DesiredRow | ParentRef): string {
  let id = ids.get(row)
  if (id === undefined) {
    id = rowId(row)
    ids.set(row, id)
  }
  return id
}
const ids = new WeakMap<DesiredRow | ParentRef, string>()

export interface ApplyResult {
  /** True when a transaction was committed. */
  readonly changed: boolean
  /** Write operations committed (0 when NB already matched). */
  readonly ops: number
  /** Read-diff-commit rounds it took (more than 1 when another writer raced). */
  readonly attempts: number
  /**
   * The rows the committed transaction inserted, changed or deleted, by row id
   * (`<table>/<key>`, e.g. `Logical_Switch_Port/lsp/hz/group-a/host-1`); empty when
   * nothing was committed. What reconcile repaired, when it is reconcile that applies.
   */
  readonly touched: readonly string[]
}

export interface ApplyOptions {
  /** Give up with `TopologyApplyContention` after this many lost races. Default 8. */
  readonly maxAttempts?: number
  /**
   * Read owned rows from this monitor-fed cache instead of selecting them (one round
   * trip less and no table scans on the server). A stale cache only costs a retry.
   */
  readonly cache?: NbTopologyCache
}

/**
 * Converges NB to the group's compiled topology: reads the rows the group owns, diffs,
 * and commits only the difference in one transaction guarded by `wait` on the owned
 * rows' `_version` (retried from the read when another writer got there first).
 * Applying the same spec twice commits nothing the second time. Rows without the
 * group's owner `external_ids` are never touched.
 *
 * @example
 * const { changed } = await applyGroupTopology(client, spec)
 */
export function applyGroupTopology(
  client: OvsdbClient,
  spec: GroupTopologySpec | (() => Promise<GroupTopologySpec>),
  options: ApplyOptions = {},
): Promise<ApplyResult> {
  return applyDesiredRows(
    client,
    typeof spec === 'function'
      ? async () => compileGroupTopology(await spec(), options.cache?.compiled)
      : compileGroupTopology(spec, options.cache?.compiled),
    options,
  )
}

/** Removes every row the group owns (the apply of an empty desired state). */
export function deleteGroupTopology(
  client: OvsdbClient,
  groupName: string,
  options: ApplyOptions = {},
): Promise<ApplyResult> {
  options.cache?.compiled.forget(groupName)
  return applyDesiredRows(
    client,
    { group: groupName, owner: ownerOf(groupName), rows: [] },
    options,
  )
}

/**
 * `desired` may be a function: it is called again after every lost race. Pass one when
 * the desired state is read from a store that other writers change too (the group's
 * members): the loser of a race must not re-commit what it read before the winner's
 * change, or it would undo that change.
 */
export async function applyDesiredRows(
  client: OvsdbClient,
  desiredRows: DesiredRows | (() => Promise<DesiredRows>),
  options: ApplyOptions = {},
): Promise<ApplyResult> {
  const maxAttempts = options.maxAttempts ?? 8
  let group = typeof desiredRows === 'function' ? '' : desiredRows.group
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const desired = typeof desiredRows === 'function' ? await desiredRows() : desiredRows
    group = desired.group
    const actual = options.cache
      ? await options.cache.ownedIndex(desired.owner, attempt > 1)
      : await readOwnedRows(client, desired.owner)
    const { guards, writes, bump, touched } = diffTopology(desired, actual)
    if (writes.length === 0) return { changed: false, ops: 0, attempts: attempt, touched: [] }
    try {
      await client.transact(nb.name, [...guards, ...writes, ...bump])
      return { changed: true, ops: writes.length, attempts: attempt, touched }
    } catch (err) {
      if (!(err instanceof OvsdbTimedOut)) throw err
      await new Promise((r) => setTimeout(r, Math.random() * 5 * attempt))
    }
  }
  throw new TopologyApplyContention(group, maxAttempts)
}

/**
 * The groups that own rows in this NB, read from their distributed routers (every
 * group has one while it has any row; reconcile looks here for orphans).
 */
export async function groupsInNb(client: OvsdbClient): Promise<string[]> {
  const [routers] = await client.transact(nb.name, [
    nb.select(
      'Logical_Router',
      [['external_ids', 'includes', { [ROW_KEY]: 'lr' }]],
      ['external_ids'],
    ),
  ])
  const groups = nb
    .decodeRows('Logical_Router', routers?.rows)
    .map((r) => groupOfRow(r.external_ids))
    .filter((g): g is string => g !== undefined)
  return [...new Set(groups)].sort()
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

const REF_COLUMNS = {
  Logical_Switch: ['ports'],
  Logical_Router: ['ports', 'static_routes', 'policies', 'nat'],
} as const

/** `external_ids` key on the group's distributed router bumped by every apply. */
export const GENERATION_KEY = 'hydrazine:generation'

/**
 * The operations that turn `actual` into `desired`: `guards`, `writes` (empty when
 * nothing differs) and `bump` (the generation increment to commit with them). Pure.
 *
 * Every write also bumps a generation on the group's distributed router, and the guard
 * is a `wait` on that router's generation (or on its absence for a new group): two
 * applies of one group that read the same state cannot both commit, so the loser
 * re-reads and recomputes instead of overwriting the winner's work.
 */
export function diffTopology(
  desired: DesiredRows,
  actual: ActualRows | ActualIndex,
): { guards: Operation[]; writes: Operation[]; bump: Operation[]; touched: string[] } {
  // Owned rows by id; extra rows with the same id (or none) are stale.
  const index = 'byId' in actual ? actual : IndexedRows.of(actual)
  const stale: IndexedRow[] = [...index.extra]
  const wanted = new Set(desired.rows.map(idOf))
  for (const [id, entry] of index.byId) if (!wanted.has(id)) stale.push(entry)
  const existing = {
    get: (id: string): ActualRow | undefined => index.byId.get(id)?.row,
  }
  const router = existing.get('Logical_Router/lr')
  // The router's external_ids carry the generation, so comparing them is a version check.
  const guards = [
    router
      ? nb.wait(
          'Logical_Router',
          [['_uuid', '==', router._uuid]],
          ['external_ids'],
          [{ external_ids: routerIds(router) }],
        )
      : nb.wait(
          'Logical_Router',
          [['external_ids', 'includes', { [OWNER_KEY]: desired.owner, [ROW_KEY]: 'lr' }]],
          ['_uuid'],
          [],
        ),
  ]

  const inserts: Operation[] = []
  const updates: Operation[] = []
  const touched: string[] = []
  const refOf = new Map<string, string>()
  const children = new Map<string, Map<string, string[]>>()
  let named = 0
  for (const d of desired.rows) {
    const id = idOf(d)
    const have = existing.get(id)
    if (have) {
      refOf.set(id, have._uuid)
      if (verified.get(have) === d) continue
      const changed = changedColumns(d, have)
      if (Object.keys(changed).length > 0) {
        updates.push(nb.update(d.table, [['_uuid', '==', have._uuid]], changed as never))
        touched.push(id)
      } else verified.set(have, d)
    } else {
      refOf.set(id, `row${named++}`)
      touched.push(id)
    }
  }
  for (const d of desired.rows) {
    if (!d.parent) continue
    const parentId = idOf(d.parent)
    const byColumn = children.get(parentId) ?? new Map<string, string[]>()
    children.set(parentId, byColumn)
    const refs = byColumn.get(d.parent.column) ?? []
    refs.push(refOf.get(idOf(d)) ?? '')
    byColumn.set(d.parent.column, refs)
  }
  const staleUuids = new Set(stale.map((s) => s.row._uuid))

  // Parents: new ones get their children in the insert; existing ones are mutated.
  const parentOps: Operation[] = []
  for (const d of desired.rows) {
    const id = idOf(d)
    const have = existing.get(id)
    if (d.table !== 'Logical_Switch' && d.table !== 'Logical_Router') {
      if (!have) inserts.push(nb.insert(d.table, d.row as never, refOf.get(id)))
      continue
    }
    const mine = children.get(id) ?? new Map<string, string[]>()
    if (!have) {
      const row: Record<string, unknown> = { ...d.row }
      for (const [column, refs] of mine) row[column] = refs
      inserts.push(nb.insert(d.table, row as never, refOf.get(id)))
      continue
    }
    const mutations: [string, 'insert' | 'delete', string[]][] = []
    for (const column of REF_COLUMNS[d.table]) {
      const current = refsOf(have, column)
      const add = (mine.get(column) ?? []).filter((ref) => !current.has(ref))
      const drop = staleUuids.size === 0 ? [] : [...current].filter((u) => staleUuids.has(u))
      if (add.length > 0) mutations.push([column, 'insert', add])
      if (drop.length > 0) mutations.push([column, 'delete', drop])
    }
    if (mutations.length > 0) {
      parentOps.push(nb.mutate(d.table, [['_uuid', '==', have._uuid]], mutations as never))
    }
  }

  // Stale roots are deleted; stale children vanish once unreferenced (above).
  const deletes = stale
    .filter((s) => s.table === 'Logical_Switch' || s.table === 'Logical_Router')
    .map((s) => nb.delete(s.table, [['_uuid', '==', s.row._uuid]]))

  const writes = [...inserts, ...updates, ...parentOps, ...deletes]
  const bump: Operation[] = []
  const routerRef = refOf.get('Logical_Router/lr')
  if (writes.length > 0 && routerRef !== undefined) {
    const generation = String(Number(routerIds(router)[GENERATION_KEY] ?? '0') + 1)
    const where = [['_uuid', '==', routerRef]] as const
    bump.push(
      nb.mutate('Logical_Router', where, [
        ['external_ids', 'delete', [GENERATION_KEY]],
        ['external_ids', 'insert', { [GENERATION_KEY]: generation }],
      ]),
    )
  }
  for (const s of stale) touched.push(`${s.table}/${keyOf(s.row) ?? s.row._uuid}`)
  return { guards, writes, bump, touched }
}

/**
 * Which NB rows are known to match which desired rows. Both are immutable (the cache makes
 * a new row object for every update it receives; a compile memo hands out the same desired
 * row while its inputs are unchanged), so a pair once compared equal stays equal: an apply
 * compares only the rows that changed on either side since.
 */
const verified = new WeakMap<ActualRow, DesiredRow>()
/** A parent row's reference column as a set, built once per row object. */
const refSets = new WeakMap<ActualRow, Map<string, ReadonlySet<string>>>()

function refsOf(row: ActualRow, column: string): ReadonlySet<string> {
  let byColumn = refSets.get(row)
  if (!byColumn) {
    byColumn = new Map()
    refSets.set(row, byColumn)
  }
  let set = byColumn.get(column)
  if (!set) {
    set = new Set((row[column] as string[] | undefined) ?? [])
    byColumn.set(column, set)
  }
  return set
}

function routerIds(row: ActualRow | undefined): Record<string, string> {
  return (row?.external_ids as Record<string, string> | undefined) ?? {}
}

function keyOf(row: ActualRow): string | undefined {
  const ids = row.external_ids as Record<string, string> | undefined
  return ids?.[ROW_KEY]
}

function changedColumns(d: DesiredRow, have: ActualRow): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [column, value] of Object.entries(d.row)) {
    let current = have[column]
    if (column === 'external_ids' && d.table === 'Logical_Router') {
      const { [GENERATION_KEY]: _generation, ...rest } = (current ?? {}) as Record<string, string>
      current = rest
    }
    if (!sameValue(value, current)) out[column] = value
  }
  return out
}

/**
 * Whether two column values are equal as OVSDB sees them (sets are unordered, absent is
 * null). Compares structurally first; falls back to a canonical JSON form for sets of
 * compound values. Hot: called for every column of every owned row on every apply.
 */
function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true
  if (a === null || a === undefined || b === null || b === undefined) {
    return (a ?? null) === (b ?? null)
  }
  if (Array.isArray(a) && Array.isArray(b)) {
    if (a.length !== b.length) return false
    if (a.some((x) => typeof x === 'object') || b.some((x) => typeof x === 'object')) {
      return canonical(a) === canonical(b)
    }
    const sa = [...a].sort()
    const sb = [...b].sort()
    return sa.every((x, i) => x === sb[i])
  }
  if (typeof a === 'object' && typeof b === 'object' && !Array.isArray(a) && !Array.isArray(b)) {
    const ea = Object.entries(a)
    if (ea.length !== Object.keys(b).length) return false
    return ea.every(([k, v]) => sameValue(v, (b as Record<string, unknown>)[k]))
  }
  return false
}

function canonical(value: unknown): string {
  if (Array.isArray(value)) return JSON.stringify(value.map(canonical).sort())
  if (value !== null && typeof value === 'object') {
    return JSON.stringify(Object.entries(value).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
  }
  return JSON.stringify(value ?? null)
}
