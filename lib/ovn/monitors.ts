/**
 * The OVSDB client's RFC 7047 monitors: starting and cancelling them, handing each
 * `update` to its handler, and starting them again on a new connection.
 */
import type { MonitorRequest, TableUpdates, TableUpdates2 } from './protocol.ts'

/**
 * Receives monitor updates. `reset` is true for the initial contents, including the
 * contents re-sent after a reconnect: a cache must then drop what it held.
 */
export type MonitorHandler = (updates: TableUpdates, reset: boolean) => void

/**
 * Receives `monitor_cond` updates (`update2`): a modified row carries only what changed,
 * so a large set column (a switch's ports) costs its change, not its size. `reset` as above.
 */
export type Monitor2Handler = (updates: TableUpdates2, reset: boolean) => void

/** A running monitor: `cancel` stops it. */
export interface MonitorHandle {
  cancel(): Promise<void>
}

export interface Monitor extends MonitorHandle {
  /** The rows present when the monitor started (also delivered to the handler). */
  readonly initial: TableUpdates
}

type ActiveMonitor =
  | {
      readonly method: 'monitor'
      readonly db: string
      readonly requests: Readonly<Record<string, MonitorRequest>>
      readonly handler: MonitorHandler
    }
  | {
      readonly method: 'monitor_cond'
      readonly db: string
      readonly requests: Readonly<Record<string, MonitorRequest>>
      readonly handler: Monitor2Handler
    }

export class Monitors {
  private readonly active = new Map<string, ActiveMonitor>()
  private nextId = 1

  /**
   * `request` sends a JSON-RPC request on the client; `onError` hears what a handler
   * threw while handling an update.
   */
  constructor(
    private readonly request: (method: string, params: readonly unknown[]) => Promise<unknown>,
    private readonly onError: (error: unknown) => void,
  ) {}

  async start(
    db: string,
    requests: Readonly<Record<string, MonitorRequest>>,
    handler: MonitorHandler,
  ): Promise<Monitor> {
    const id = `m${this.nextId++}`
    const initial = (await this.request('monitor', [db, id, requests])) as TableUpdates
    this.active.set(id, { method: 'monitor', db, requests, handler })
    handler(initial, true)
    return { initial, cancel: this.canceller(id) }
  }

  /** Starts a `monitor_cond` (no condition: every row); its updates are `update2`s. */
  async startCond(
    db: string,
    requests: Readonly<Record<string, MonitorRequest>>,
    handler: Monitor2Handler,
  ): Promise<MonitorHandle> {
    const id = `m${this.nextId++}`
    const initial = (await this.request('monitor_cond', [db, id, requests])) as TableUpdates2
    this.active.set(id, { method: 'monitor_cond', db, requests, handler })
    handler(initial, true)
    return { cancel: this.canceller(id) }
  }

  private canceller(id: string): () => Promise<void> {
    return async () => {
      if (!this.active.delete(id)) return
      await this.request('monitor_cancel', [id])
    }
  }

  /** Handles the server's `update` notification (its `params`). */
  update(params: readonly unknown[]): void {
    const [monitorId, updates] = params as [string, TableUpdates]
    const monitor = this.active.get(monitorId)
    if (monitor?.method === 'monitor') this.deliver(monitor.handler, updates, false)
  }

  /** Handles the server's `update2` notification (its `params`). */
  update2(params: readonly unknown[]): void {
    const [monitorId, updates] = params as [string, TableUpdates2]
    const monitor = this.active.get(monitorId)
    if (monitor?.method === 'monitor_cond') this.deliver(monitor.handler, updates, false)
  }

  /** Starts every monitor again on a new connection; handlers get the full contents. */
  resubscribe(): void {
    for (const [id, m] of this.active) {
      this.request(m.method, [m.db, id, m.requests]).then(
        (initial) => {
          if (this.active.get(id) !== m) return
          if (m.method === 'monitor') this.deliver(m.handler, initial as TableUpdates, true)
          else this.deliver(m.handler, initial as TableUpdates2, true)
        },
        () => {
          // The connection dropped again; the next reconnect retries.
        },
      )
    }
  }

  /**
   * Runs a monitor handler. It runs inside the socket's data event, where a throw would
   * take the whole process down: an error is reported through `onError` instead.
   */
  private deliver<U>(handler: (updates: U, reset: boolean) => void, updates: U, reset: boolean) {
    try {
      handler(updates, reset)
    } catch (error) {
      this.onError(error)
    }
  }
}
