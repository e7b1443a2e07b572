import { OvsdbClient, type OvsdbClientOptions } from './client.ts'
import { NbTopologyCache } from './topology/cache.ts'

/**
 * One long-lived connection per OVSDB remote, opened on first use and shared by every
 * caller: a controller talks to one central per group (or one shared central), never
 * opening a second connection to the same database. A connection that failed to open is
 * forgotten, so the next caller tries again. Once closed, it opens none: a caller still at
 * work then gets `PoolClosed`, not a connection nobody would ever close.
 */
export class RemotePool<T> {
  readonly #connections = new Map<string, Promise<T>>()
  readonly #open: (remote: string) => Promise<T>
  readonly #shut: (connection: T) => Promise<void>
  #closed = false

  constructor(open: (remote: string) => Promise<T>, shut: (connection: T) => Promise<void>) {
    this.#open = open
    this.#shut = shut
  }

  get(remote: string): Promise<T> {
    if (this.#closed) return Promise.reject(new PoolClosed(remote))
    let connection = this.#connections.get(remote)
    if (!connection) {
      connection = this.#open(remote)
      connection.catch(() => this.#connections.delete(remote))
      this.#connections.set(remote, connection)
    }
    return connection
  }

  /** Closes the connection to `remote` (e.g. its central is gone). */
  async drop(remote: string): Promise<void> {
    const connection = this.#connections.get(remote)
    this.#connections.delete(remote)
    await connection?.then((c) => this.#shut(c)).catch(() => {})
  }

  async close(): Promise<void> {
    this.#closed = true
    await Promise.all([...this.#connections.keys()].map((remote) => this.drop(remote)))
  }
}

/** A `RemotePool` asked for a connection after it was closed. */
export class PoolClosed extends Error {
  constructor(readonly remote: string) {
    super(`no connection to ${remote}: the pool is closed`)
    this.name = 'PoolClosed'
  }
}

/** A long-lived connection to one NB database and the monitor-fed cache of its rows. */
export interface NbConnection {
  readonly client: OvsdbClient
  readonly cache: NbTopologyCache
}

/**
 * NB connections, one per remote, each with its monitor-fed cache. `prepare` runs once on
 * each new connection before anyone gets it (e.g. `setGeneveIpsec`); a connection it
 * fails is closed, and the next `get` opens another.
 *
 * @example
 * const pool = new NbPool({}, (client) => setGeneveIpsec(client, true))
 * const { client, cache } = await pool.get('unix:/run/ovn/nb.sock')
 */
export class NbPool extends RemotePool<NbConnection> {
  constructor(
    options: OvsdbClientOptions = {},
    prepare?: (client: OvsdbClient) => Promise<unknown>,
  ) {
    super(
      (remote) =>
        OvsdbClient.connect(remote, options).then(async (client) => {
          try {
            await prepare?.(client)
            return { client, cache: await NbTopologyCache.start(client) }
          } catch (error) {
            await client.close()
            throw error
          }
        }),
      (connection) => connection.client.close(),
    )
  }
}
