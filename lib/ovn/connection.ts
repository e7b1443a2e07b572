/**
 * The OVSDB client's transport: one JSON-RPC connection to a server that it keeps up —
 * connecting with retries, answering the server's `echo`, probing a silent server with
 * its own, and reconnecting with exponential backoff when the connection drops.
 */
import { readFile } from 'node:fs/promises'
import { createConnection, type Socket } from 'node:net'
import { connect as tlsConnect } from 'node:tls'
import { OvsdbConnectionError } from './errors.ts'
import { JsonStreamSplitter } from './json-stream.ts'
import { parseRemote, type Remote } from './remote.ts'

/** One JSON-RPC message from the server: a request, a notification or a reply. */
export interface RpcMessage {
  readonly id?: unknown
  readonly method?: unknown
  readonly params?: unknown
  readonly result?: unknown
  readonly error?: unknown
}

export type ConnectionEvent =
  | { readonly type: 'connected'; readonly remote: string }
  | { readonly type: 'disconnected'; readonly remote: string; readonly reason: string }
  | { readonly type: 'reconnect-scheduled'; readonly remote: string; readonly delayMs: number }

/**
 * What an `ssl:` remote needs, as OVS's `--ca-cert`, `--certificate` and `--private-key`:
 * each is either PEM text (it contains `-----BEGIN`) or the path of a PEM file. Paths are
 * read again on every (re)connect, so replaced files are picked up without a restart.
 * OVSDB servers ask every client for a certificate, so `cert` and `key` are required.
 *
 * @example { ca: '/etc/hydrazine/pki/ca.crt', cert: '/etc/hydrazine/dpu-a.crt', key: '/etc/hydrazine/dpu-a.key' }
 */
export interface OvsdbTlsOptions {
  /** The CA the server's certificate must chain to. */
  readonly ca: string
  /** This client's certificate (its CN is the identity OVN RBAC sees, e.g. the chassis). */
  readonly cert: string
  readonly key: string
  /**
   * Check that the server's certificate names the host connected to (DNS or IP SAN), as
   * HTTPS does (default true). OVS itself checks only the CA: turn this off for servers
   * whose certificates carry no SANs (e.g. made by `ovs-pki`).
   */
  readonly verifyHostname?: boolean
}

export interface ConnectionOptions {
  /** Certificates for `ssl:` remotes; required for them, ignored for others. */
  readonly tls?: OvsdbTlsOptions
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
  /** Connection events, for logs. */
  readonly onEvent?: (event: ConnectionEvent) => void
}

/** What the connection tells the client it carries. */
export interface ConnectionHooks {
  /** Every message from the server except its `echo` requests, which are answered here. */
  readonly message: (msg: RpcMessage) => void
  /**
   * The connection is gone (`reason`; `cause`: the socket's error, e.g. a TLS alert): what
   * was in flight on it is lost.
   */
  readonly lost: (reason: string, cause?: Error) => void
  /** A new connection replaced a lost one. */
  readonly restored: () => void
  /** Sends an `echo` request to a server that has been silent. */
  readonly keepalive: () => Promise<unknown>
}

export class Connection {
  private socket: Socket | undefined
  private readonly splitter = new JsonStreamSplitter()
  private isClosed = false
  private lastHeard = Date.now()
  private echoTimer: NodeJS.Timeout | undefined
  private reconnectTimer: NodeJS.Timeout | undefined
  private attempt = 0
  private waiters: { resolve: () => void; reject: (err: Error) => void }[] = []

  constructor(
    readonly remote: string,
    private readonly opts: ConnectionOptions,
    private readonly hooks: ConnectionHooks,
  ) {}

  get connected(): boolean {
    return this.socket !== undefined
  }

  /** Closed for good: by `close`, a failed first connect, or a drop with `reconnect` off. */
  get closed(): boolean {
    return this.isClosed
  }

  /**
   * Connects, retrying until `connectTimeoutMs`; then starts the keepalive. A `close()`
   * meanwhile ends the retries at once (rejecting: client closed), and a connection made
   * after it is dropped, not kept.
   */
  async open(): Promise<void> {
    const deadline = Date.now() + (this.opts.connectTimeoutMs ?? 10_000)
    const closedMeanwhile = () => new OvsdbConnectionError(this.remote, 'client closed')
    for (;;) {
      if (this.isClosed) throw closedMeanwhile()
      try {
        await this.connectOnce()
        break
      } catch (err) {
        if (this.isClosed) throw closedMeanwhile()
        if (Date.now() >= deadline) {
          this.isClosed = true
          throw new OvsdbConnectionError(this.remote, 'could not connect', err)
        }
        await sleep(this.backoffDelay())
      }
    }
    this.attempt = 0
    this.startEcho()
  }

  /** Writes one message on the current connection (none: dropped). */
  send(msg: unknown): void {
    this.socket?.write(JSON.stringify(msg))
  }

  /**
   * Resolves once connected; rejects when the connection is closed for good instead, or
   * (retryably) when it is not back within `timeoutMs` (0: no bound) or `signal` aborts.
   */
  waitConnected(timeoutMs = 0, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      let timer: NodeJS.Timeout | undefined
      const done = () => {
        clearTimeout(timer)
        signal?.removeEventListener('abort', aborted)
        this.waiters = this.waiters.filter((w) => w !== waiter)
      }
      const waiter = {
        resolve: () => {
          done()
          resolve()
        },
        reject: (err: Error) => {
          done()
          reject(err)
        },
      }
      const aborted = () => waiter.reject(signal?.reason ?? new Error('aborted'))
      if (timeoutMs > 0) {
        timer = setTimeout(
          () =>
            waiter.reject(
              new OvsdbConnectionError(this.remote, `not connected again within ${timeoutMs} ms`),
            ),
          timeoutMs,
        )
      }
      signal?.addEventListener('abort', aborted, { once: true })
      this.waiters.push(waiter)
    })
  }

  /** Closes the connection for good; what is in flight is lost. */
  async close(): Promise<void> {
    this.isClosed = true
    clearInterval(this.echoTimer)
    clearTimeout(this.reconnectTimer)
    const socket = this.socket
    this.socket = undefined
    this.hooks.lost('client closed')
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

  private async connectOnce(): Promise<void> {
    const target = parseRemote(this.remote)
    const material = target.kind === 'ssl' ? await tlsMaterial(this.remote, this.opts.tls) : {}
    return new Promise<void>((resolve, reject) => {
      const [socket, ready] = openSocket(target, material, this.opts.tls?.verifyHostname)
      socket.setNoDelay(true)
      const onError = (err: Error) => {
        socket.destroy()
        reject(err)
      }
      socket.once('error', onError)
      socket.once(ready, () => {
        socket.off('error', onError)
        // Closed while this attempt was under way: the connection is not wanted any more.
        if (this.isClosed) {
          socket.destroy()
          reject(new OvsdbConnectionError(this.remote, 'client closed'))
          return
        }
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
      for (const msg of messages) this.receive(msg as RpcMessage)
    })
    // 'close' follows an error and handles it, saying what the error was.
    let failed: Error | undefined
    socket.on('error', (error) => {
      failed = error
    })
    socket.on('close', () => this.onClose(socket, failed))
    this.opts.onEvent?.({ type: 'connected', remote: this.remote })
    for (const w of this.waiters.splice(0)) w.resolve()
  }

  private receive(msg: RpcMessage): void {
    if (msg.method === 'echo' && msg.id !== undefined && msg.id !== null) {
      this.send({ id: msg.id, result: msg.params ?? [], error: null })
    } else {
      this.hooks.message(msg)
    }
  }

  private onClose(socket: Socket, cause: Error | undefined): void {
    if (this.socket !== socket) return
    this.socket = undefined
    this.hooks.lost('connection lost', cause)
    this.opts.onEvent?.({ type: 'disconnected', remote: this.remote, reason: 'connection lost' })
    if (this.isClosed) return
    if (this.opts.reconnect === false) {
      this.isClosed = true
      for (const w of this.waiters.splice(0)) {
        w.reject(new OvsdbConnectionError(this.remote, 'connection lost', cause))
      }
      return
    }
    this.scheduleReconnect()
  }

  private scheduleReconnect(): void {
    const delayMs = this.backoffDelay()
    this.opts.onEvent?.({ type: 'reconnect-scheduled', remote: this.remote, delayMs })
    this.reconnectTimer = setTimeout(() => {
      this.connectOnce().then(
        () => {
          this.attempt = 0
          this.hooks.restored()
        },
        () => {
          if (!this.isClosed) this.scheduleReconnect()
        },
      )
    }, delayMs)
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
          this.hooks.keepalive().catch(() => {
            // Failure shows up as a dropped connection.
          })
        }
      },
      Math.max(10, Math.floor(interval / 2)),
    )
    this.echoTimer.unref()
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

type TlsMaterial = { ca?: string; cert?: string; key?: string }

/** A socket to `target` and the event that says it is ready for JSON-RPC. */
function openSocket(
  target: Remote,
  material: TlsMaterial,
  verifyHostname = true,
): [Socket, 'connect' | 'secureConnect'] {
  if (target.kind === 'unix') return [createConnection({ path: target.path }), 'connect']
  if (target.kind === 'tcp') {
    return [createConnection({ host: target.host, port: target.port }), 'connect']
  }
  const socket = tlsConnect({
    host: target.host,
    port: target.port,
    ...material,
    ...(verifyHostname ? {} : { checkServerIdentity: () => undefined }),
  })
  return [socket, 'secureConnect']
}

/** Reads the PEM text of `tls` (inline or from files); the error names a missing piece. */
async function tlsMaterial(remote: string, tls: OvsdbTlsOptions | undefined): Promise<TlsMaterial> {
  if (!tls?.ca || !tls.cert || !tls.key) {
    throw new OvsdbConnectionError(remote, 'an ssl: remote needs tls: { ca, cert, key }')
  }
  const pem = async (what: string, value: string) => {
    if (value.includes('-----BEGIN')) return value
    return readFile(value, 'utf8').catch((error: Error) => {
      throw new OvsdbConnectionError(remote, `cannot read the TLS ${what} ${value}`, error)
    })
  }
  return {
    ca: await pem('CA certificate', tls.ca),
    cert: await pem('certificate', tls.cert),
    key: await pem('private key', tls.key),
  }
}
