import type { OvsdbClient } from '../client.ts'
import { Database } from '../database.ts'
import type { Monitor } from '../monitors.ts'
import type { TableUpdates } from '../protocol.ts'
import { type NbTables, nbSchema } from '../schema/nb.generated.ts'
import type { ActualRow, ActualRows } from './apply.ts'
import { TOPOLOGY_TABLES, type TopologyTable } from './compile.ts'
import { OWNER_KEY } from './names.ts'

const nb = new Database<NbTables>(nbSchema)

/**
 * A local copy of the topology tables, fed by an OVSDB `monitor` and indexed by owner,
 * so an apply reads a group's rows without a round trip or a server-side scan.
 * Rebuilt from scratch when the client reconnects.
 *
 * @example
 * const cache = await NbTopologyCache.start(client)
 * await applyGroupTopology(client, spec, { cache })
 */
export class NbTopologyCache {
  private readonly rows = new Map<string, { table: TopologyTable; row: ActualRow }>()
  private readonly byOwner = new Map<string, Set<string>>()
  private monitor: Monitor | undefined

  private constructor(private readonly client: OvsdbClient) {}

  static async start(client: OvsdbClient): Promise<NbTopologyCache> {
    const cache = new NbTopologyCache(client)
    const requests = Object.fromEntries(TOPOLOGY_TABLES.map((t) => [t, {}]))
    cache.monitor = await client.monitor(nb.name, requests, (u, reset) => cache.apply(u, reset))
    return cache
  }

  /**
   * The rows `owner` owns. With `sync`, first waits until every update the server had
   * sent before an `echo` round trip has been applied (used after a lost race).
   */
  async ownedRows(owner: string, sync = false): Promise<ActualRows> {
    if (sync) await this.client.echo()
    const out = Object.fromEntries(TOPOLOGY_TABLES.map((t) => [t, [] as ActualRow[]])) as Record<
      TopologyTable,
      ActualRow[]
    >
    for (const uuid of this.byOwner.get(owner) ?? []) {
      const entry = this.rows.get(uuid)
      if (entry) out[entry.table].push(entry.row)
    }
    return out
  }

  async close(): Promise<void> {
    await this.monitor?.cancel()
  }

  private apply(updates: TableUpdates, reset: boolean): void {
    if (reset) {
      this.rows.clear()
      this.byOwner.clear()
    }
    for (const table of TOPOLOGY_TABLES) {
      for (const [uuid, change] of Object.entries(updates[table] ?? {})) {
        this.remove(uuid)
        if (!change.new) continue
        const row = { ...nb.decodeRow(table, change.new), _uuid: uuid } as unknown as ActualRow
        this.rows.set(uuid, { table, row })
        const owner = (row.external_ids as Record<string, string> | undefined)?.[OWNER_KEY]
        if (owner !== undefined) {
          const set = this.byOwner.get(owner) ?? new Set<string>()
          set.add(uuid)
          this.byOwner.set(owner, set)
        }
      }
    }
  }

  private remove(uuid: string): void {
    const entry = this.rows.get(uuid)
    if (!entry) return
    this.rows.delete(uuid)
    const owner = (entry.row.external_ids as Record<string, string> | undefined)?.[OWNER_KEY]
    if (owner !== undefined) this.byOwner.get(owner)?.delete(uuid)
  }
}
