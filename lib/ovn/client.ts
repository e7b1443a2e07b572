/**
 * `OvsdbClient`, the OVSDB (RFC 7047) client the controller and the agent use: its
 * options and the requests it offers (`transact`, `monitor`, …). The connection it keeps
 * up, the requests in flight and the monitors are in `connection.ts`,
 * `pending-requests.ts` and `monitors.ts`.
 */
import { Connection, type ConnectionEvent, type ConnectionOptions } from './connection.ts'
import { OvsdbConnectionError, transactError } from './errors.ts'
import {
  type Monitor,
  type Monitor2Handler,
  type MonitorHandle,
  type MonitorHandler,
  Monitors,
} from './monitors.ts'
import { PendingRequests, type RequestOptions } from './pending-requests.ts'
import type { MonitorRequest, Operation, OperationResult } from './protocol.ts'
import { parseRemote } from './remote.ts'

export interface OvsdbClientOptions extends Omit<ConnectionOptions, 'onEvent'> {
  /** Fail a request that got no reply in this long. 0 disables. Default 30 s. */
  readonly requestTimeoutMs?: number
  /** Connection events, for logs. */
  readonly onEvent?: (event: ClientEvent) => void
  /**
   * Called once each `transact` has its answer (or failed), with how long it took: a
   * caller's metrics hook (the controller's NB transaction latency per central). It must
   * not throw.
   */
  readonly onTransaction?: (transaction: TransactionTiming) => void
}

/** One `transact` as `onTransaction` reports it. */
export interface TransactionTiming {
  readonly remote: string
  readonly db: string
  /** From sending the request to its answer, including a wait for the connection. */
  readonly seconds: number
  /** False when the request or one of its operations failed. */
  readonly ok: boolean
}

export type ClientEvent =
  | ConnectionEvent
  | { readonly type: 'monitor-error'; readonly remote: string; readonly error: unknown }

/**
 * An OVSDB (RFC 7047) JSON-RPC client on one long-lived connection.
 *
 * Requests are pipelined; the client answers the server's `echo`, sends its own as a
 * keepalive, and reconnects with backoff (re-establishing monitors) when the
 * connection drops. Requests in flight when it drops fail with the retryable
 * `OvsdbConnectionError`; requests made while reconnecting wait for the connection.
 * It knows nothing about any particular schema: see `Database` for typed builders.
 *
 * @example
 * const client = await OvsdbClient.connect('unix:/run/ovn/ovnnb_db.sock')
 * await client.transact('OVN_Northbound', [nb.insert('Logical_Switch', { name: 'ls0' })])
 * await client.close()
 */
export class OvsdbClient {
  private readonly connection: Connection
  private readonly requests: PendingRequests
  private readonly monitors: Monitors
  private readonly requestTimeoutMs: number
  private readonly onTransaction: ((transaction: TransactionTiming) => void) | undefined

  private constructor(
    readonly remote: string,
    opts: OvsdbClientOptions,
  ) {
    this.requestTimeoutMs = opts.requestTimeoutMs ?? 30_000
    this.onTransaction = opts.onTransaction
    this.connection = new Connection(remote, opts, {
      message: (msg) => {
        if (typeof msg.method !== 'string') this.requests.settle(msg)
        else if (msg.method === 'update' && Array.isArray(msg.params)) {
          this.monitors.update(msg.params)
        } else if (msg.method === 'update2' && Array.isArray(msg.params)) {
          this.monitors.update2(msg.params)
        }
      },
      lost: (reason, cause) => this.requests.failAll(reason, cause),
      restored: () => this.monitors.resubscribe(),
      keepalive: () => this.echo(),
    })
    this.requests = new PendingRequests(
      remote,
      (msg) => this.connection.send(msg),
      this.requestTimeoutMs,
    )
    this.monitors = new Monitors(
      (method, params) => this.request(method, params),
      (error) => opts.onEvent?.({ type: 'monitor-error', remote, error }),
      () => this.connection.connected,
    )
  }

  /**
   * Connects to `unix:/path`, `tcp:host:port` or `ssl:host:port`, retrying until
   * `connectTimeoutMs`. An `ssl:` remote needs `tls` (see `OvsdbTlsOptions`).
   *
   * @example
   * await OvsdbClient.connect('ssl:172.18.0.1:6642', { tls: { ca: 'ca.crt', cert: 'dpu-a.crt', key: 'dpu-a.key' } })
   */
  static async connect(remote: string, opts: OvsdbClientOptions = {}): Promise<OvsdbClient> {
    if (parseRemote(remote).kind === 'ssl' && !(opts.tls?.ca && opts.tls.cert && opts.tls.key)) {
      throw new OvsdbConnectionError(remote, 'an ssl: remote needs tls: { ca, cert, key }')
    }
    const client = new OvsdbClient(remote, opts)
    await client.connection.open()
    return client
  }

  get connected(): boolean {
    return this.connection.connected
  }

  /** Runs the operations as one atomic transaction; throws the typed error of the first failure. */
  async transact(
    db: string,
    ops: readonly Operation[],
    options: RequestOptions = {},
  ): Promise<OperationResult[]> {
    const started = performance.now()
    let ok = false
    try {
      const results = (await this.request('transact', [db, ...ops], options)) as (
        | (OperationResult & { error?: string; details?: string })
        | null
      )[]
      for (const [index, result] of results.entries()) {
        if (result?.error !== undefined) {
          throw transactError(result.error, result.details, index, ops[index]?.op ?? 'commit')
        }
      }
      ok = true
      return results.map((r) => r ?? {})
    } finally {
      const seconds = (performance.now() - started) / 1000
      this.onTransaction?.({ remote: this.remote, db, seconds, ok })
    }
  }

  /**
   * Starts an RFC 7047 `monitor`; the handler gets the initial rows then every change.
   * The monitor survives reconnects (the handler gets the full contents again with
   * `reset` = true).
   */
  monitor(
    db: string,
    requests: Readonly<Record<string, MonitorRequest>>,
    handler: MonitorHandler,
  ): Promise<Monitor> {
    return this.monitors.start(db, requests, handler)
  }

  /**
   * Starts a `monitor_cond` of every row (ovsdb-server(5)): like `monitor`, but a modified
   * row arrives as only what changed (`update2`), which keeps rows with large set columns
   * cheap to follow for the server and for us. Survives reconnects like `monitor`.
   */
  monitorCond(
    db: string,
    requests: Readonly<Record<string, MonitorRequest>>,
    handler: Monitor2Handler,
  ): Promise<MonitorHandle> {
    return this.monitors.startCond(db, requests, handler)
  }

  listDbs(): Promise<string[]> {
    return this.request('list_dbs', []) as Promise<string[]>
  }

  getSchema(db: string): Promise<unknown> {
    return this.request('get_schema', [db])
  }

  echo(): Promise<unknown> {
    return this.request('echo', ['hydrazine'])
  }

  /** Closes the connection for good; requests in flight fail. */
  close(): Promise<void> {
    return this.connection.close()
  }

  /**
   * Sends one JSON-RPC request and resolves with its `result`. While the connection is
   * down it waits for it to come back, but no longer than the request's timeout: then it
   * fails with a retryable `OvsdbConnectionError`, so no caller hangs on a lost central.
   */
  async request(method: string, params: readonly unknown[], options: RequestOptions = {}) {
    if (this.connection.closed) throw new OvsdbConnectionError(this.remote, 'client closed')
    options.signal?.throwIfAborted()
    if (!this.connection.connected) {
      await this.connection.waitConnected(
        options.timeoutMs ?? this.requestTimeoutMs,
        options.signal,
      )
    }
    if (!this.connection.connected) throw new OvsdbConnectionError(this.remote, 'not connected')
    return this.requests.start(method, params, options)
  }
}
