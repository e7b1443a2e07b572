import type { OvsdbClient } from '../client.ts'
import { Database } from '../database.ts'
import type { MonitorHandle } from '../monitors.ts'
import type { TableUpdates2 } from '../protocol.ts'
import { type NbTables, nbSchema } from '../schema/nb.generated.ts'
import { CompileMemo, TOPOLOGY_TABLES, type TopologyTable } from './compile.ts'
import { OWNER_KEY } from './names.ts'
import { type ActualIndex, type ActualRow, type ActualRows, IndexedRows } from './owned-rows.ts'

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
  private readonly rows = new Map<string, { table: TopologyTable; row: ActualRow }>()
  private readonly byOwner = new Map<string, IndexedRows>()
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

  async close(): Promise<void> {
    await this.monitor?.cancel()
  }

  private apply(updates: TableUpdates2, reset: boolean): void {
    if (reset) {
      this.rows.clear()
      this.byOwner.clear()
    }
    for (const table of TOPOLOGY_TABLES) {
      for (const [uuid, change] of Object.entries(updates[table] ?? {})) {
        const old = this.rows.get(uuid)?.row
        this.remove(uuid)
        const whole = change.initial ?? change.insert
        let row: ActualRow
        if (whole) row = { ...nb.decodeWholeRow(table, whole), _uuid: uuid } as unknown as ActualRow
        else if (change.modify && old) {
          row = nb.patchRow(table, old as never, change.modify) as unknown as ActualRow
        } else continue
        this.rows.set(uuid, { table, row })
        const owner = ownerOfRow(row)
        if (owner === undefined) continue
        let index = this.byOwner.get(owner)
        if (!index) {
          index = new IndexedRows()
          this.byOwner.set(owner, index)
        }
        index.add(table, row)
      }
    }
  }

  private remove(uuid: string): void {
    const entry = this.rows.get(uuid)
    if (!entry) return
    this.rows.delete(uuid)
    const owner = ownerOfRow(entry.row)
    if (owner === undefined) return
    const index = this.byOwner.get(owner)
    index?.remove(entry.table, entry.row)
    if (index?.size === 0) this.byOwner.delete(owner)
  }
}

const EMPTY: ActualIndex = new IndexedRows()

function ownerOfRow(row: ActualRow): string | undefined {
  return (row.external_ids as Record<string, string> | undefined)?.[OWNER_KEY]
}
