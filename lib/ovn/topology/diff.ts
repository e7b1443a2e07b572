/**
 * The pure diff of a group's topology: the OVSDB operations that turn the rows it owns in
 * NB into its desired rows — guards, writes, and the generation bump that makes two
 * applies racing on one group conflict — and the row ids they touch. No database here:
 * `apply.ts` reads the rows and commits the result in one transaction.
 */
import { Database } from '../database.ts'
import type { Operation } from '../protocol.ts'
import { type NbTables, nbSchema } from '../schema/nb.generated.ts'
import {
  CHILD_COLUMNS,
  type CompileChanges,
  type DesiredRow,
  type DesiredRows,
  isParentTable,
  type ParentRef,
  rowId,
} from './compile.ts'
import { GENERATION_KEY, GUARD_ID, GUARD_KEY, OWNER_KEY, ROW_KEY } from './names.ts'
import {
  type ActualIndex,
  type ActualRow,
  type ActualRows,
  type IndexedRow,
  IndexedRows,
  keyOf,
} from './owned-rows.ts'

const nb = new Database<NbTables>(nbSchema)

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

export { GENERATION_KEY, GUARD_ID } from './names.ts'

/**
 * The operations that turn `actual` into `desired`: `guards`, `writes` (empty when
 * nothing differs) and `bump` (the generation increment to commit with them). Pure.
 *
 * Every write also bumps a generation on the group's guard row, and the guard is a `wait`
 * on that row's generation (or on its absence for a new group): two applies of one group
 * that read the same state cannot both commit, so the loser re-reads and recomputes
 * instead of overwriting the winner's work. The guard is an `Address_Set` no match names,
 * which ovn-northd processes without recomputing: a write to a router's `external_ids`
 * would make it recompute the whole central on every apply.
 *
 * With `since` — what the compile of `desired` changed (`changes`, from its memo) and the
 * ids of the group's NB rows that changed since NB last matched the compile it follows
 * (`changed`, an `NbTopologyCache` change log) — only what differs is compared: the rows
 * the compile built, the rows of `changed`, and the rows the compile dropped; the cost
 * follows the change, not the group's size. What that cannot account for (an owned row no
 * compile asked for) falls back to comparing every row, as without `since`.
 */
export function diffTopology(
  desired: DesiredRows,
  actual: ActualRows | ActualIndex,
  since?: { readonly changes: CompileChanges; readonly changed: readonly string[] },
): TopologyDiff {
  // Owned rows by id; extra rows with the same id (or none) are stale.
  const index = 'byId' in actual ? actual : IndexedRows.of(actual)
  const guard = index.byId.get(GUARD_ID)?.row
  // The guard's external_ids carry the generation, so comparing them is a version check.
  const guards = [
    guard
      ? nb.wait(
          'Address_Set',
          [['_uuid', '==', guard._uuid]],
          ['external_ids'],
          [{ external_ids: externalIdsOf(guard) }],
        )
      : nb.wait(
          'Address_Set',
          [['external_ids', 'includes', { [OWNER_KEY]: desired.owner, [ROW_KEY]: GUARD_KEY }]],
          ['_uuid'],
          [],
        ),
  ]
  const scope =
    (since && scopeOfChanges(since.changes, index, since.changed)) ?? wholeScope(desired, index)
  const holds =
    index.holds ??
    ((parent: ActualRow, column: string, child: string) => refsOf(parent, column).has(child))

  // One pass over the rows in scope; its cost per unchanged row is a few lookups.
  // - a row NB lacks is inserted under a name this transaction refers to it by;
  // - a row NB has is compared, unless this very pair was found equal before;
  // - a child is listed for its parent only when the parent does not hold it yet.
  /** Inserts in desired order; a new parent's waits for its children (`undefined` until then). */
  const inserts: (Operation | undefined)[] = []
  const updates: Operation[] = []
  const touched: string[] = []
  const named = new Map<string, string>()
  /** Parents in scope; a new one with the place its insert takes in `inserts`. */
  const parents: { d: DesiredRow; id: string; have: ActualRow | undefined; slot: number }[] = []
  const missingRefs = new Map<string, Map<string, string[]>>()
  /** Names of the logical switch ports inserted, and of those deleted. */
  const added: string[] = []
  let compared = 0
  let matched = 0
  for (const d of scope.rows) {
    compared++
    const id = idOf(d)
    const have = index.byId.get(id)?.row
    let ref: string
    if (have) {
      matched++
      ref = have._uuid
      if (verified.get(have) !== d) {
        const changed = changedColumns(d, have)
        if (Object.keys(changed).length > 0) {
          updates.push(nb.update(d.table, [['_uuid', '==', have._uuid]], changed as never))
          touched.push(id)
        } else verified.set(have, d)
      }
    } else {
      ref = `row${named.size}`
      named.set(id, ref)
      touched.push(id)
    }
    if (isParentTable(d.table)) {
      // A parent NB lacks is inserted with its children, once they are all known.
      parents.push({ d, id, have, slot: have ? -1 : inserts.push(undefined) - 1 })
    } else if (!have) inserts.push(nb.insert(d.table, d.row as never, ref))
    if (!have && d.table === 'Logical_Switch_Port' && d.row.name) added.push(d.row.name)
    if (d.parent) {
      const parentId = idOf(d.parent)
      const parentHave = index.byId.get(parentId)?.row
      if (!have || !parentHave || !holds(parentHave, d.parent.column, ref)) {
        const byColumn = missingRefs.get(parentId) ?? new Map<string, string[]>()
        missingRefs.set(parentId, byColumn)
        const refs = byColumn.get(d.parent.column) ?? []
        refs.push(ref)
        byColumn.set(d.parent.column, refs)
      }
    }
  }
  /** How this transaction refers to a desired row: its name if inserted, else its UUID. */
  const refOf = (id: string): string | undefined =>
    named.get(id) ?? (scope.has(id) ? index.byId.get(id)?.row._uuid : undefined)

  const stale = scope.stale(matched)
  // Parents out of scope that gain children or lose stale ones: mutated like the rest.
  if (scope.parentsOutOfScope) {
    const inScope = new Set(parents.map((p) => p.id))
    for (const id of new Set([...missingRefs.keys(), ...scope.parentsOutOfScope])) {
      const d = inScope.has(id) ? undefined : scope.rowOf(id)
      const have = index.byId.get(id)?.row
      if (d && have) parents.push({ d, id, have, slot: -1 })
    }
  }
  const staleUuids = new Set(stale.map((s) => s.row._uuid))

  // Parents: new ones get their children in the insert; existing ones are mutated.
  const parentOps: Operation[] = []
  for (const { d, id, have, slot } of parents) {
    if (!isParentTable(d.table)) continue
    const mine = missingRefs.get(id) ?? new Map<string, string[]>()
    // Linked rows (a port group's ports) as this transaction refers to them.
    const linked = d.links?.ids.flatMap((l) => refOf(l) ?? [])
    if (!have) {
      const row: Record<string, unknown> = { ...d.row }
      for (const [column, refs] of mine) row[column] = refs
      if (d.links && linked) row[d.links.column] = linked
      inserts[slot] = nb.insert(d.table, row as never, named.get(id))
      continue
    }
    const mutations: [string, 'insert' | 'delete', string[]][] = []
    if (d.links && linked) {
      const current = refsOf(have, d.links.column)
      const wantedLinks = new Set(linked)
      const add = linked.filter((ref) => !current.has(ref))
      const drop = [...current].filter((u) => !wantedLinks.has(u))
      if (add.length > 0) mutations.push([d.links.column, 'insert', add])
      if (drop.length > 0) mutations.push([d.links.column, 'delete', drop])
      if ((add.length > 0 || drop.length > 0) && !touched.includes(id)) touched.push(id)
    }
    for (const column of CHILD_COLUMNS[d.table]) {
      const add = mine.get(column) ?? []
      const drop =
        staleUuids.size === 0 ? [] : [...staleUuids].filter((u) => holds(have, column, u))
      if (add.length > 0) mutations.push([column, 'insert', add])
      if (drop.length > 0) mutations.push([column, 'delete', drop])
    }
    if (mutations.length > 0) {
      parentOps.push(nb.mutate(d.table, [['_uuid', '==', have._uuid]], mutations as never))
    }
  }
  const insertOps = inserts.filter((op): op is Operation => op !== undefined)

  // Stale roots are deleted (a DNS row too: a switch refers to it weakly); stale
  // children vanish once unreferenced (above).
  const deletes = stale
    .filter((s) => nbSchema.tables[s.table]?.isRoot === true)
    .map((s) => nb.delete(s.table, [['_uuid', '==', s.row._uuid]]))

  const writes = [...insertOps, ...updates, ...parentOps, ...deletes]
  const bump: Operation[] = []
  const guardRef = scope.has(GUARD_ID) ? (named.get(GUARD_ID) ?? guard?._uuid) : undefined
  if (writes.length > 0 && guardRef !== undefined) {
    const generation = String(Number(externalIdsOf(guard)[GENERATION_KEY] ?? '0') + 1)
    const where = [['_uuid', '==', guardRef]] as const
    bump.push(
      nb.mutate('Address_Set', where, [
        ['external_ids', 'delete', [GENERATION_KEY]],
        ['external_ids', 'insert', { [GENERATION_KEY]: generation }],
      ]),
    )
  }
  for (const s of stale) touched.push(`${s.table}/${keyOf(s.row) ?? s.row._uuid}`)
  const removed = stale.flatMap((s) =>
    s.table === 'Logical_Switch_Port' && typeof s.row.name === 'string' ? [s.row.name] : [],
  )
  return { guards, writes, bump, touched, compared, ports: { added, removed } }
}

/** What `diffTopology` found. */
export interface TopologyDiff {
  /** A `wait` on the group's generation: the writes commit only over what was read. */
  readonly guards: Operation[]
  /** Inserts, updates, parents' mutations and deletes; empty when NB matches. */
  readonly writes: Operation[]
  /** The generation increment to commit with `writes`. */
  readonly bump: Operation[]
  /** The ids of the rows `writes` insert, change or delete. */
  readonly touched: string[]
  /** How many desired rows were compared with NB (all of them without `since`). */
  readonly compared: number
  /** The logical switch ports `writes` insert and delete, by name. */
  readonly ports: PortChanges
}

/**
 * Logical switch ports a commit inserted and deleted, by name: ovn-northd has processed
 * the commit once the SB has a `Port_Binding` for each added one and none for the others.
 */
export interface PortChanges {
  readonly added: readonly string[]
  readonly removed: readonly string[]
}

/** The rows one diff looks at, and how it asks about the rest of the desired rows. */
interface DiffScope {
  /** Desired rows to compare with NB (each once). */
  readonly rows: Iterable<DesiredRow>
  /**
   * Owned rows no desired row is (to delete, and to unlink from their parents), given how
   * many rows of `rows` NB has.
   */
  readonly stale: (matched: number) => readonly IndexedRow[]
  /** Whether a row with this id is desired. */
  readonly has: (id: string) => boolean
  /** The desired row with this id. */
  readonly rowOf: (id: string) => DesiredRow | undefined
  /**
   * Desired parents outside `rows` that hold stale rows; absent when `rows` holds every
   * desired row (parents included).
   */
  readonly parentsOutOfScope?: ReadonlySet<string>
}

/** Every desired row, and every owned row none of them is. */
function wholeScope(desired: DesiredRows, index: ActualIndex): DiffScope {
  // Every desired row's id, built only when needed: when NB owns rows no desired row
  // matched (stale ones), or to resolve a port group's links.
  let wantedIds: Set<string> | undefined
  const wanted = () => {
    wantedIds ??= new Set(desired.rows.map(idOf))
    return wantedIds
  }
  let byId: Map<string, DesiredRow> | undefined
  return {
    rows: desired.rows,
    // NB owns rows no desired row is when fewer of them matched than it owns.
    stale: (matched) => {
      const stale: IndexedRow[] = [...index.extra]
      if (matched < index.byId.size) {
        for (const [id, entry] of index.byId) if (!wanted().has(id)) stale.push(entry)
      }
      return stale
    },
    has: (id) => wanted().has(id),
    rowOf: (id) => {
      byId ??= new Map(desired.rows.map((d) => [idOf(d), d]))
      return byId.get(id)
    },
  }
}

/**
 * The rows that can differ when NB matched the compile `changes.after` before the rows of
 * `changed` changed: what the compile built or dropped, and `changed`. Undefined when
 * that cannot be told: no such compile, or NB owns a row no compile asked for.
 */
function scopeOfChanges(
  changes: CompileChanges,
  index: ActualIndex,
  changed: readonly string[],
): DiffScope | undefined {
  if (changes.after === undefined) return undefined
  for (const _ of index.extra) return undefined
  const rows = new Set<DesiredRow>(changes.built)
  const stale: IndexedRow[] = []
  const parentsOutOfScope = new Set<string>()
  const droppedIds = new Set<string>()
  for (const d of changes.dropped) {
    const id = idOf(d)
    droppedIds.add(id)
    const entry = index.byId.get(id)
    if (!entry) continue
    stale.push(entry)
    if (d.parent) parentsOutOfScope.add(idOf(d.parent))
  }
  for (const id of changed) {
    const d = changes.rowOf(id)
    if (d) rows.add(d)
    else if (index.byId.has(id) && !droppedIds.has(id)) return undefined
  }
  return {
    rows,
    stale: () => stale,
    has: (id) => changes.rowOf(id) !== undefined,
    rowOf: changes.rowOf,
    parentsOutOfScope,
  }
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

function externalIdsOf(row: ActualRow | undefined): Record<string, string> {
  return (row?.external_ids as Record<string, string> | undefined) ?? {}
}

function changedColumns(d: DesiredRow, have: ActualRow): Record<string, unknown> {
  const out: Record<string, unknown> = {}
  for (const [column, value] of Object.entries(d.row)) {
    let current = have[column]
    if (column === 'external_ids' && d.table === 'Address_Set' && d.key === GUARD_KEY) {
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
