import { createConnection, type Socket } from 'node:net'
import {
  OvsdbCanceled,
  OvsdbConnectionError,
  OvsdbRequestTimeout,
  OvsdbRpcError,
  transactError,
} from './errors.ts'
import { JsonStreamSplitter } from './json-stream.ts'
import type { MonitorRequest, Operation, OperationResult, TableUpdates } from './protocol.ts'

export interface OvsdbClientOptions {
  /** Reconnect with exponential backoff when the connection drops. Default true. */
  readonly reconnect?: boolean
  /** First and largest reconnect delay. Defaults 100 ms and 5 s. */
  readonly backoff?: { readonly initialMs?: number; readonly maxMs?: number }
  /** How long `connect` keeps trying before giving up. Default 10 s. */
  readonly connectTimeoutMs?: number
  /**
   * Send an `echo` after this long without hearing from the server, and drop the
   * connection after twice as long. 0 disables. Default 5 s.
   */
  readonly echoIntervalMs?: number
  /** Fail a request that got no reply in this long. 0 disables. Default 30 s. */
  readonly requestTimeoutMs?: number
  /** Connection events, for logs. */
  readonly onEvent?: (event: ClientEvent) => void
}

export type ClientEvent =
  | { readonly type: 'connected'; readonly remote: string }
  | { readonly type: 'disconnected'; readonly remote: string; readonly reason: string }
  | { readonly type: 'reconnect-scheduled'; readonly remote: string; readonly delayMs: number }
  | { readonly type: 'monitor-error'; readonly remote: string; readonly error: unknown }

export interface RequestOptions {
  /** Aborting sends RFC 7047 `cancel` for the request and rejects it with `OvsdbCanceled`. */
  readonly signal?: AbortSignal
  readonly timeoutMs?: number
}

/**
 * Receives monitor updates. `reset` is true for the initial contents, including the
 * contents re-sent after a reconnect: a cache must then drop what it held.
 */
export type MonitorHandler = (updates: TableUpdates, reset: boolean) => void

export interface Monitor {
  /** The rows present when the monitor started (also delivered to the handler). */
  readonly initial: TableUpdates
  cancel(): Promise<void>
}

interface Pending {
  readonly method: string
  readonly resolve: (result: unknown) => void
  readonly reject: (err: Error) => void
  timer: NodeJS.Timeout | undefined
}

interface ActiveMonitor {
  readonly db: string
  readonly requests: Readonly<Record<string, MonitorRequest>>
  readonly handler: MonitorHandler
}

interface RpcMessage {
  readonly id?: unknown
  readonly method?: unknown
  readonly params?: unknown
  readonly result?: unknown
  readonly error?: unknown
}

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
  private socket: Socket | undefined
  private readonly splitter = new JsonStreamSplitter()
  private readonly pending = new Map<number, Pending>()
  private readonly monitors = new Map<string, ActiveMonitor>()
  private nextId = 1
  private nextMonitorId = 1
  private closed = false
  private lastHeard = Date.now()
  private echoTimer: NodeJS.Timeout | undefined
  private reconnectTimer: NodeJS.Timeout | undefined
  private attempt = 0
  private waiters: { resolve: () => void; reject: (err: Error) => void }[] = []

  private constructor(
    readonly remote: string,
    private readonly opts: OvsdbClientOptions,
  ) {}

  /** Connects to `unix:/path` or `tcp:host:port`, retrying until `connectTimeoutMs`. */
  static async connect(remote: string, opts: OvsdbClientOptions = {}): Promise<OvsdbClient> {
    parseRemote(remote)
    const client = new OvsdbClient(remote, opts)
    const deadline = Date.now() + (opts.connectTimeoutMs ?? 10_000)
    for (;;) {
      try {
        await client.open()
        break
      } catch (err) {
        if (Date.now() >= deadline) {
          client.closed = true
          throw new OvsdbConnectionError(remote, 'could not connect', err)
        }
        await sleep(client.backoffDelay())
      }
    }
    client.attempt = 0
    client.startEcho()
    return client
  }

  get connected(): boolean {
    return this.socket !== undefined
  }

  /** Runs the operations as one atomic transaction; throws the typed error of the first failure. */
  async transact(
    db: string,
    ops: readonly Operation[],
    options: RequestOptions = {},
  ): Promise<OperationResult[]> {
    const results = (await this.request('transact', [db, ...ops], options)) as (
      | (OperationResult & { error?: string; details?: string })
      | null
    )[]
    for (const [index, result] of results.entries()) {
      if (result?.error !== undefined) {
        throw transactError(result.error, result.details, index, ops[index]?.op ?? 'commit')
      }
    }
    return results.map((r) => r ?? {})
  }

  /**
   * Starts an RFC 7047 `monitor`; the handler gets the initial rows then every change.
   * The monitor survives reconnects (the handler gets the full contents again with
   * `reset` = true).
   */
  async monitor(
    db: string,
    requests: Readonly<Record<string, MonitorRequest>>,
    handler: MonitorHandler,
  ): Promise<Monitor> {
    const id = `m${this.nextMonitorId++}`
    const initial = (await this.request('monitor', [db, id, requests])) as TableUpdates
    this.monitors.set(id, { db, requests, handler })
    handler(initial, true)
    return {
      initial,
      cancel: async () => {
        if (!this.monitors.delete(id)) return
        await this.request('monitor_cancel', [id])
      },
    }
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
  async close(): Promise<void> {
    this.closed = true
    clearInterval(this.echoTimer)
    clearTimeout(this.reconnectTimer)
    const socket = this.socket
    this.socket = undefined
    this.failPending('client closed')
    for (const w of this.waiters.splice(0)) {
      w.reject(new OvsdbConnectionError(this.remote, 'client closed'))
    }
    if (socket) {
      await new Promise<void>((resolve) => {
        socket.once('close', () => resolve())
        socket.destroy()
      })
    }
  }

  /** Sends one JSON-RPC request and resolves with its `result`. */
  async request(method: string, params: readonly unknown[], options: RequestOptions = {}) {
    if (this.closed) throw new OvsdbConnectionError(this.remote, 'client closed')
    options.signal?.throwIfAborted()
    if (!this.socket) await this.waitConnected()
    const socket = this.socket
    if (!socket) throw new OvsdbConnectionError(this.remote, 'not connected')
    const id = this.nextId++
    return new Promise<unknown>((resolve, reject) => {
      const timeoutMs = options.timeoutMs ?? this.opts.requestTimeoutMs ?? 30_000
      const signal = options.signal
      const onAbort = () => {
        if (!this.pending.delete(id)) return
        clearTimeout(entry.timer)
        this.send({ method: 'cancel', params: [id], id: null })
        reject(new OvsdbCanceled(method))
      }
      const entry: Pending = {
        method,
        resolve: (result) => {
          signal?.removeEventListener('abort', onAbort)
          resolve(result)
        },
        reject: (err) => {
          signal?.removeEventListener('abort', onAbort)
          reject(err)
        },
        timer:
          timeoutMs > 0
            ? setTimeout(() => {
                if (this.pending.delete(id))
                  entry.reject(new OvsdbRequestTimeout(method, timeoutMs))
              }, timeoutMs)
            : undefined,
      }
      this.pending.set(id, entry)
      signal?.addEventListener('abort', onAbort, { once: true })
      socket.write(JSON.stringify({ method, params, id }))
    })
  }

  private send(msg: unknown): void {
    this.socket?.write(JSON.stringify(msg))
  }

  private open(): Promise<void> {
    const target = parseRemote(this.remote)
    return new Promise<void>((resolve, reject) => {
      const socket =
        target.kind === 'unix'
          ? createConnection({ path: target.path })
          : createConnection({ host: target.host, port: target.port })
      socket.setNoDelay(true)
      const onError = (err: Error) => {
        socket.destroy()
        reject(err)
      }
      socket.once('error', onError)
      socket.once('connect', () => {
        socket.off('error', onError)
        this.attach(socket)
        resolve()
      })
    })
  }

  private attach(socket: Socket): void {
    this.socket = socket
    this.splitter.reset()
    this.lastHeard = Date.now()
    socket.on('data', (chunk: Buffer) => {
      this.lastHeard = Date.now()
      let messages: unknown[]
      try {
        messages = this.splitter.push(chunk)
      } catch (err) {
        socket.destroy(err as Error)
        return
      }
      for (const msg of messages) this.dispatch(msg as RpcMessage)
    })
    socket.on('error', () => {
      // 'close' follows and handles it.
    })
    socket.on('close', () => this.onClose(socket))
    this.opts.onEvent?.({ type: 'connected', remote: this.remote })
    for (const w of this.waiters.splice(0)) w.resolve()
  }

  private dispatch(msg: RpcMessage): void {
    if (typeof msg.method === 'string') {
      if (msg.method === 'echo' && msg.id !== undefined && msg.id !== null) {
        this.send({ id: msg.id, result: msg.params ?? [], error: null })
      } else if (msg.method === 'update' && Array.isArray(msg.params)) {
        const [monitorId, updates] = msg.params as [string, TableUpdates]
        const monitor = this.monitors.get(monitorId)
        if (monitor) this.deliver(monitor.handler, updates, false)
      }
      return
    }
    if (typeof msg.id !== 'number') return
    const entry = this.pending.get(msg.id)
    if (!entry) return
    this.pending.delete(msg.id)
    clearTimeout(entry.timer)
    if (msg.error !== null && msg.error !== undefined) {
      entry.reject(
        msg.error === 'canceled'
          ? new OvsdbCanceled(entry.method)
          : new OvsdbRpcError(entry.method, msg.error),
      )
    } else {
      entry.resolve(msg.result)
    }
  }

  private onClose(socket: Socket): void {
    if (this.socket !== socket) return
    this.socket = undefined
    this.failPending('connection lost')
    this.opts.onEvent?.({ type: 'disconnected', remote: this.remote, reason: 'connection lost' })
    if (this.closed) return
    if (this.opts.reconnect === false) {
      this.closed = true
      for (const w of this.waiters.splice(0)) {
        w.reject(new OvsdbConnectionError(this.remote, 'connection lost'))
      }
      return
    }
    this.scheduleReconnect()
  }

  private scheduleReconnect(): void {
    const delayMs = this.backoffDelay()
    this.opts.onEvent?.({ type: 'reconnect-scheduled', remote: this.remote, delayMs })
    this.reconnectTimer = setTimeout(() => {
      this.open().then(
        () => {
          this.attempt = 0
          this.resubscribe()
        },
        () => {
          if (!this.closed) this.scheduleReconnect()
        },
      )
    }, delayMs)
  }

  /**
   * Runs a monitor handler. It runs inside the socket's data event, where a throw would
   * take the whole process down: an error is reported through `onEvent` instead.
   */
  private deliver(
    handler: (updates: TableUpdates, reset: boolean) => void,
    updates: TableUpdates,
    reset: boolean,
  ): void {
    try {
      handler(updates, reset)
    } catch (error) {
      this.opts.onEvent?.({ type: 'monitor-error', remote: this.remote, error })
    }
  }

  private resubscribe(): void {
    for (const [id, m] of this.monitors) {
      this.request('monitor', [m.db, id, m.requests]).then(
        (initial) => {
          if (this.monitors.get(id) === m) this.deliver(m.handler, initial as TableUpdates, true)
        },
        () => {
          // The connection dropped again; the next reconnect retries.
        },
      )
    }
  }

  private backoffDelay(): number {
    const initial = this.opts.backoff?.initialMs ?? 100
    const max = this.opts.backoff?.maxMs ?? 5_000
    const base = Math.min(max, initial * 2 ** this.attempt++)
    return Math.round(base / 2 + Math.random() * (base / 2))
  }

  private startEcho(): void {
    const interval = this.opts.echoIntervalMs ?? 5_000
    if (interval <= 0) return
    this.echoTimer = setInterval(
      () => {
        const socket = this.socket
        if (!socket) return
        const silent = Date.now() - this.lastHeard
        if (silent >= 2 * interval) {
          socket.destroy(new Error(`no reply from server for ${silent} ms`))
        } else if (silent >= interval) {
          this.echo().catch(() => {
            // Failure shows up as a dropped connection.
          })
        }
      },
      Math.max(10, Math.floor(interval / 2)),
    )
    this.echoTimer.unref()
  }

  private waitConnected(): Promise<void> {
    return new Promise((resolve, reject) => this.waiters.push({ resolve, reject }))
  }

  private failPending(reason: string): void {
    const pending = [...this.pending.values()]
    this.pending.clear()
    for (const p of pending) {
      clearTimeout(p.timer)
      p.reject(new OvsdbConnectionError(this.remote, `${reason} during ${p.method}`))
    }
  }
}

type Remote =
  | { readonly kind: 'unix'; readonly path: string }
  | { readonly kind: 'tcp'; readonly host: string; readonly port: number }

/** Parses `unix:/path` or `tcp:host:port` (`tcp:[v6addr]:port` too). */
export function parseRemote(remote: string): Remote {
  if (remote.startsWith('unix:') && remote.length > 5)
    return { kind: 'unix', path: remote.slice(5) }
  const tcp = /^tcp:(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(remote)
  if (tcp) {
    const host = tcp[1] ?? tcp[2] ?? ''
    const port = Number(tcp[3])
    if (port > 0 && port < 65536) return { kind: 'tcp', host, port }
  }
  throw new OvsdbConnectionError(remote, 'remote must be unix:/path or tcp:host:port')
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
