/**
 * The OVSDB client's requests in flight: JSON-RPC ids, each reply matched to its request,
 * per-request timeouts, RFC 7047 `cancel` when the caller aborts, and failing every one
 * of them when the connection they were sent on is gone.
 */
import type { RpcMessage } from './connection.ts'
import {
  OvsdbCanceled,
  OvsdbConnectionError,
  OvsdbRequestTimeout,
  OvsdbRpcError,
} from './errors.ts'

export interface RequestOptions {
  /** Aborting sends RFC 7047 `cancel` for the request and rejects it with `OvsdbCanceled`. */
  readonly signal?: AbortSignal
  readonly timeoutMs?: number
}

interface Pending {
  readonly method: string
  readonly resolve: (result: unknown) => void
  readonly reject: (err: Error) => void
  timer: NodeJS.Timeout | undefined
}

export class PendingRequests {
  private readonly pending = new Map<number, Pending>()
  private nextId = 1

  /**
   * `send` writes one message on the current connection; `timeoutMs` applies to requests
   * that do not set their own (0: none).
   */
  constructor(
    private readonly remote: string,
    private readonly send: (msg: unknown) => void,
    private readonly timeoutMs: number,
  ) {}

  /** Sends the request (the connection must be up) and resolves with its `result`. */
  start(method: string, params: readonly unknown[], options: RequestOptions): Promise<unknown> {
    const id = this.nextId++
    return new Promise<unknown>((resolve, reject) => {
      const timeoutMs = options.timeoutMs ?? this.timeoutMs
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
      this.send({ method, params, id })
    })
  }

  /** Settles the request a reply answers; anything else is ignored. */
  settle(msg: RpcMessage): void {
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

  /** Fails every request in flight with the retryable `OvsdbConnectionError`. */
  failAll(reason: string, cause?: Error): void {
    const pending = [...this.pending.values()]
    this.pending.clear()
    const why = cause ? ` (${(cause as { code?: unknown }).code ?? cause.message})` : ''
    for (const p of pending) {
      clearTimeout(p.timer)
      p.reject(new OvsdbConnectionError(this.remote, `${reason}${why} during ${p.method}`, cause))
    }
  }
}
