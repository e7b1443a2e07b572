import { OvsdbClient, type OvsdbClientOptions } from './client.ts'
import { NbTopologyCache } from './topology/cache.ts'

/** A long-lived connection to one NB database and the monitor-fed cache of its rows. */
export interface NbConnection {
  readonly client: OvsdbClient
  readonly cache: NbTopologyCache
}

/**
 * NB connections, one per remote, opened on first use and shared by every caller: a
 * controller talks to one central per group (or one shared central), never opening a
 * second connection to the same database. A connection that failed to open is forgotten,
 * so the next caller tries again.
 *
 * @example
 * const pool = new NbPool()
 * const { client, cache } = await pool.get('unix:/run/ovn/nb.sock')
 */
export class NbPool {
  readonly #connections = new Map<string, Promise<NbConnection>>()
  readonly #options: OvsdbClientOptions

  constructor(options: OvsdbClientOptions = {}) {
    this.#options = options
  }

  get(remote: string): Promise<NbConnection> {
    let connection = this.#connections.get(remote)
    if (!connection) {
      connection = OvsdbClient.connect(remote, this.#options).then(async (client) => ({
        client,
        cache: await NbTopologyCache.start(client),
      }))
      connection.catch(() => this.#connections.delete(remote))
      this.#connections.set(remote, connection)
    }
    return connection
  }

  /** Closes the connection to `remote` (e.g. its central is gone). */
  async drop(remote: string): Promise<void> {
    const connection = this.#connections.get(remote)
    this.#connections.delete(remote)
    await connection?.then((c) => c.client.close()).catch(() => {})
  }

  async close(): Promise<void> {
    await Promise.all([...this.#connections.keys()].map((remote) => this.drop(remote)))
  }
}
