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

type ActiveMonitor = (
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
) & {
  /**
   * Updates that arrived before the initial contents were handed over, in order: the
   * server may send one right behind its reply, and it is read before the reply's
   * awaiter runs. Undefined once the initial contents were delivered.
   */
  held?: unknown[] | undefined
}

export class Monitors {
  private readonly active = new Map<string, ActiveMonitor>()
  private nextId = 1

  /**
   * `request` sends a JSON-RPC request on the client; `onError` hears what a handler
   * threw while handling an update; `connected` says whether the client is connected now.
   */
  constructor(
    private readonly request: (method: string, params: readonly unknown[]) => Promise<unknown>,
    private readonly onError: (error: unknown) => void,
    private readonly connected: () => boolean = () => true,
  ) {}

  async start(
    db: string,
    requests: Readonly<Record<string, MonitorRequest>>,
    handler: MonitorHandler,
  ): Promise<Monitor> {
    const id = `m${this.nextId++}`
    const monitor: ActiveMonitor = { method: 'monitor', db, requests, handler, held: [] }
    const initial = (await this.open(id, monitor)) as TableUpdates
    return { initial, cancel: this.canceller(id) }
  }

  /** Starts a `monitor_cond` (no condition: every row); its updates are `update2`s. */
  async startCond(
    db: string,
    requests: Readonly<Record<string, MonitorRequest>>,
    handler: Monitor2Handler,
  ): Promise<MonitorHandle> {
    const id = `m${this.nextId++}`
    await this.open(id, { method: 'monitor_cond', db, requests, handler, held: [] })
    return { cancel: this.canceller(id) }
  }

  /**
   * Sends the monitor request with the monitor already registered, so that no update the
   * server sends behind its reply is lost: such updates are held, and handed over after
   * the initial contents. Resolves with the initial contents.
   */
  private async open(id: string, monitor: ActiveMonitor): Promise<unknown> {
    this.active.set(id, monitor)
    try {
      const initial = await this.request(monitor.method, [monitor.db, id, monitor.requests])
      this.handOver(monitor, initial)
      return initial
    } catch (error) {
      if (this.active.get(id) === monitor) this.active.delete(id)
      throw error
    }
  }

  /** Delivers the initial contents (a reset), then the updates held meanwhile. */
  private handOver(monitor: ActiveMonitor, initial: unknown): void {
    const held = monitor.held ?? []
    monitor.held = undefined
    this.deliverTo(monitor, initial, true)
    for (const updates of held) this.deliverTo(monitor, updates, false)
  }

  private canceller(id: string): () => Promise<void> {
    return async () => {
      if (!this.active.delete(id)) return
      // A monitor lives on its connection: with none, there is nothing to cancel on the
      // server (and asking would wait for a reconnect that may never come — its central
      // gone); a new connection does not start it again, it is no longer active.
      if (!this.connected()) return
      await this.request('monitor_cancel', [id])
    }
  }

  /** Handles the server's `update` notification (its `params`). */
  update(params: readonly unknown[]): void {
    this.received('monitor', params)
  }

  /** Handles the server's `update2` notification (its `params`). */
  update2(params: readonly unknown[]): void {
    this.received('monitor_cond', params)
  }

  /** Starts every monitor again on a new connection; handlers get the full contents. */
  resubscribe(): void {
    for (const [id, m] of this.active) {
      // What arrives before the new initial contents is newer than them: held until then.
      m.held = []
      this.request(m.method, [m.db, id, m.requests]).then(
        (initial) => {
          if (this.active.get(id) === m) this.handOver(m, initial)
        },
        () => {
          // The connection dropped again; the next reconnect retries.
        },
      )
    }
  }

  private received(method: ActiveMonitor['method'], params: readonly unknown[]): void {
    const [monitorId, updates] = params as [string, unknown]
    const monitor = this.active.get(monitorId)
    if (monitor?.method !== method) return
    if (monitor.held) monitor.held.push(updates)
    else this.deliverTo(monitor, updates, false)
  }

  private deliverTo(monitor: ActiveMonitor, updates: unknown, reset: boolean): void {
    if (monitor.method === 'monitor') this.deliver(monitor.handler, updates as TableUpdates, reset)
    else this.deliver(monitor.handler, updates as TableUpdates2, reset)
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
