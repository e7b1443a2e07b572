import type { OvsdbClient } from '../client.ts'
import { Database } from '../database.ts'
import type { MonitorHandle } from '../monitors.ts'
import type { TableUpdates2, WireAtom, WireRow, WireSet, WireValue } from '../protocol.ts'
import { type NbTables, nbSchema } from '../schema/nb.generated.ts'
import { decodeAtom } from '../values.ts'
import {
  CHILD_COLUMNS,
  CompileMemo,
  type DesiredRows,
  isParentTable,
  TOPOLOGY_TABLES,
  type TopologyTable,
} from './compile.ts'
import { OWNER_KEY } from './names.ts'
import {
  type ActualIndex,
  type ActualRow,
  type ActualRows,
  IndexedRows,
  keyOf,
} from './owned-rows.ts'

const nb = new Database<NbTables>(nbSchema)

/**
 * A local copy of the topology tables, fed by an OVSDB `monitor` and indexed by owner and
 * row key, so an apply reads a group's rows without a round trip, a server-side scan, or
 * re-indexing the group's rows on every apply. Rebuilt from scratch when the client
 * reconnects.
 *
 * @example
 * const cache = await NbTopologyCache.start(client)
 * await applyGroupTopology(client, spec, { cache })
 */
export class NbTopologyCache {
  /** What each group's last apply through this cache compiled, part by part (see CompileMemo). */
  readonly compiled = new CompileMemo()
  /**
   * Per owner: the compile its last apply through this cache left NB matching, and the
   * change mark it was diffed at (see `apply.ts`). Forgetting one makes its next apply
   * compare every row.
   */
  readonly applied = new Map<string, AppliedMark>()
  /**
   * Per owner: the desired rows its last apply through this cache left NB matching. What
   * an apply writes is drift only where NB differs from these (`ApplyResult.drifted`).
   */
  readonly written = new Map<string, DesiredRows>()
  private readonly rows = new Map<string, { table: TopologyTable; row: ActualRow }>()
  private readonly byOwner = new Map<string, IndexedRows>()
  private readonly changes = new Map<string, ChangeLog>()
  /** Per child row: the parent rows and reference columns that hold it. */
  private readonly heldBy = new Links()
  /** Bumped when the monitor starts over: marks from before name nothing any more. */
  private epoch = 0
  private monitor: MonitorHandle | undefined

  private constructor(private readonly client: OvsdbClient) {}

  static async start(client: OvsdbClient): Promise<NbTopologyCache> {
    const cache = new NbTopologyCache(client)
    const requests = Object.fromEntries(TOPOLOGY_TABLES.map((t) => [t, {}]))
    // monitor_cond: a host joining a 1,000-port switch arrives as one port, not 1,001.
    cache.monitor = await client.monitorCond(nb.name, requests, (u, reset) => cache.apply(u, reset))
    return cache
  }

  /**
   * The rows `owner` owns, indexed by row key (kept up to date as updates arrive: no work
   * per call). With `sync`, first waits until every update the server had sent before an
   * `echo` round trip has been applied (used after a lost race).
   */
  async ownedIndex(owner: string, sync = false): Promise<ActualIndex> {
    if (sync) await this.client.echo()
    return this.byOwner.get(owner) ?? EMPTY
  }

  /** The rows `owner` owns, per table. */
  async ownedRows(owner: string, sync = false): Promise<ActualRows> {
    const index = await this.ownedIndex(owner, sync)
    const out = Object.fromEntries(TOPOLOGY_TABLES.map((t) => [t, [] as ActualRow[]])) as Record<
      TopologyTable,
      ActualRow[]
    >
    for (const { table, row } of [...index.byId.values(), ...index.extra]) out[table].push(row)
    return out
  }

  /**
   * Where `owner`'s change log stands now: `changedSince` this mark lists what changes
   * after it. Synchronous, so a mark taken next to `ownedIndex`'s result describes it.
   */
  mark(owner: string): ChangeMark {
    const log = this.changes.get(owner)
    return { epoch: this.epoch, log: log?.id ?? 0, position: log?.end ?? 0 }
  }

  /**
   * The ids (`<table>/<key>`) of `owner`'s rows that changed after `mark`: inserted,
   * deleted or modified, and children their parent stopped referring to; `undefined`
   * when the cache cannot tell (it started over since, or the log no longer reaches back).
   */
  changedSince(owner: string, mark: ChangeMark): readonly string[] | undefined {
    if (mark.epoch !== this.epoch) return undefined
    const log = this.changes.get(owner)
    if ((log?.id ?? 0) !== mark.log) return undefined
    return log ? log.since(mark.position) : []
  }

  async close(): Promise<void> {
    await this.monitor?.cancel()
  }

  private apply(updates: TableUpdates2, reset: boolean): void {
    try {
      this.update(updates, reset)
    } catch (error) {
      // Half applied: no mark describes the rows any more, every diff compares them all.
      this.applied.clear()
      this.epoch++
      throw error
    }
  }

  private update(updates: TableUpdates2, reset: boolean): void {
    if (reset) {
      this.rows.clear()
      this.byOwner.clear()
      this.changes.clear()
      this.heldBy.clear()
      this.applied.clear()
      this.epoch++
    }
    for (const table of TOPOLOGY_TABLES) {
      for (const [uuid, change] of Object.entries(updates[table] ?? {})) {
        const old = this.rows.get(uuid)?.row
        this.remove(uuid)
        const whole = change.initial ?? change.insert
        let row: ActualRow
        if (whole) {
          row = { ...nb.decodeWholeRow(table, whole), _uuid: uuid } as unknown as ActualRow
          if (old) this.release(table, old)
          this.hold(table, row)
        } else if (change.modify && old) row = this.patch(table, old, change.modify)
        else {
          if (old) {
            this.release(table, old)
            this.changed(table, old)
          }
          continue
        }
        if (old && (ownerOfRow(old) !== ownerOfRow(row) || keyOf(old) !== keyOf(row))) {
          this.changed(table, old)
        }
        this.rows.set(uuid, { table, row })
        this.changed(table, row)
        const owner = ownerOfRow(row)
        if (owner === undefined) continue
        let index = this.byOwner.get(owner)
        if (!index) {
          index = new IndexedRows(this.holds)
          this.byOwner.set(owner, index)
        }
        index.add(table, row)
      }
    }
  }

  /** Logs `row`'s id in its owner's change log. */
  private changed(table: TopologyTable, row: ActualRow): void {
    const owner = ownerOfRow(row)
    const key = keyOf(row)
    if (owner === undefined || key === undefined) return
    let log = this.changes.get(owner)
    if (!log) {
      log = new ChangeLog()
      this.changes.set(owner, log)
    }
    log.push(`${table}/${key}`)
  }

  /**
   * Whether `parent` refers to the row `child` in its reference `column` (one of its
   * children's columns): answered from links kept as updates arrive, so a diff need not
   * make a set of a 1,000-port switch's ports to ask about one port.
   */
  readonly holds = (parent: ActualRow, column: string, child: string): boolean =>
    this.heldBy.has(child, parent._uuid, column)

  /** Notes the links of a parent row read whole. */
  private hold(table: TopologyTable, row: ActualRow): void {
    for (const column of childColumnsOf(table)) {
      for (const child of (row[column] as readonly string[] | undefined) ?? []) {
        this.heldBy.add(child, row._uuid, column)
      }
    }
  }

  /**
   * Forgets the links of a parent row that is gone (or read whole again), and logs the
   * children it held: one that outlives it (a DNS row) is then linked again by the next
   * diff, even unchanged itself.
   */
  private release(table: TopologyTable, row: ActualRow): void {
    for (const column of childColumnsOf(table)) {
      for (const child of (row[column] as readonly string[] | undefined) ?? []) {
        this.heldBy.delete(child, row._uuid, column)
        const entry = this.rows.get(child)
        if (entry) this.changed(entry.table, entry.row)
      }
    }
  }

  /**
   * `old` with a `modify` applied. A parent's reference columns are patched from their
   * links (a set's `modify` lists the elements added or removed): a port added to a
   * 1,000-port switch costs a copy of its ports, not a set of them. A child its parent
   * stopped referring to is logged (it may be unchanged itself).
   */
  private patch(table: TopologyTable, old: ActualRow, diff: WireRow): ActualRow {
    const columns = childColumnsOf(table).filter((c) => diff[c] !== undefined)
    if (columns.length === 0) return nb.patchRow(table, old as never, diff) as unknown as ActualRow
    const rest: Record<string, WireValue> = { ...diff }
    for (const column of columns) delete rest[column]
    const row = nb.patchRow(table, old as never, rest) as unknown as Record<string, unknown>
    for (const column of columns) {
      const value = diff[column] as WireValue
      const atoms: readonly WireAtom[] =
        Array.isArray(value) && value[0] === 'set' ? (value as WireSet)[1] : [value as WireAtom]
      const elements = atoms.map((atom) => String(decodeAtom(atom)))
      const removed = new Set<string>()
      const added: string[] = []
      for (const child of elements) {
        if (this.heldBy.has(child, old._uuid, column)) {
          removed.add(child)
          this.heldBy.delete(child, old._uuid, column)
          const entry = this.rows.get(child)
          if (entry) this.changed(entry.table, entry.row)
        } else {
          added.push(child)
          this.heldBy.add(child, old._uuid, column)
        }
      }
      const before = (old[column] as readonly string[] | undefined) ?? []
      const kept = removed.size === 0 ? [...before] : before.filter((u) => !removed.has(u))
      row[column] = kept.concat(added)
    }
    return row as ActualRow
  }

  private remove(uuid: string): void {
    const entry = this.rows.get(uuid)
    if (!entry) return
    this.rows.delete(uuid)
    const owner = ownerOfRow(entry.row)
    if (owner === undefined) return
    const index = this.byOwner.get(owner)
    index?.remove(entry.table, entry.row)
    if (index?.size === 0) {
      // The group is gone from NB: its log goes too (a mark naming it asks for a whole diff).
      this.byOwner.delete(owner)
      this.changes.delete(owner)
    }
  }
}

const EMPTY: ActualIndex = new IndexedRows()

/** Where an owner's change log stood (see `NbTopologyCache.mark`). */
export interface ChangeMark {
  readonly epoch: number
  /** The log's id (0: the owner had none). */
  readonly log: number
  readonly position: number
}

/** A group's last apply through a cache: the compile it applied, and when it read NB. */
export interface AppliedMark {
  readonly compile: number
  readonly mark: ChangeMark
}

/**
 * The ids of one owner's rows in the order they changed, from `start` on: the oldest half
 * is dropped past 16,384 entries (a mark older than that asks for a whole diff).
 */
class ChangeLog {
  static #made = 0
  readonly id = ++ChangeLog.#made
  #ids: string[] = []
  #start = 0

  get end(): number {
    return this.#start + this.#ids.length
  }

  push(id: string): void {
    this.#ids.push(id)
    if (this.#ids.length <= 16_384) return
    const drop = this.#ids.length >> 1
    this.#ids.splice(0, drop)
    this.#start += drop
  }

  since(position: number): readonly string[] | undefined {
    if (position < this.#start || position > this.end) return undefined
    return this.#ids.slice(position - this.#start)
  }
}

/**
 * Which parent rows (and reference columns) hold each child row, by the child's UUID:
 * nearly always one; a row another tool also refers to may have more.
 */
class Links {
  readonly #holders = new Map<string, { parent: string; column: string }[]>()

  has(child: string, parent: string, column: string): boolean {
    const holders = this.#holders.get(child)
    if (!holders) return false
    for (const h of holders) if (h.parent === parent && h.column === column) return true
    return false
  }

  add(child: string, parent: string, column: string): void {
    const holders = this.#holders.get(child)
    if (!holders) this.#holders.set(child, [{ parent, column }])
    else if (!this.has(child, parent, column)) holders.push({ parent, column })
  }

  delete(child: string, parent: string, column: string): void {
    const holders = this.#holders.get(child)
    if (!holders) return
    const kept = holders.filter((h) => h.parent !== parent || h.column !== column)
    if (kept.length === 0) this.#holders.delete(child)
    else this.#holders.set(child, kept)
  }

  clear(): void {
    this.#holders.clear()
  }
}

/** A table's reference columns to the rows it holds (none: not a parent). */
function childColumnsOf(table: TopologyTable): readonly string[] {
  return isParentTable(table) ? CHILD_COLUMNS[table] : []
}

function ownerOfRow(row: ActualRow): string | undefined {
  return (row.external_ids as Record<string, string> | undefined)?.[OWNER_KEY]
}
