import type { Redis } from 'ioredis'
import type { Kind } from './store.ts'

/** One stored object changed (its spec, status or deletion mark) or was removed. */
export interface Change {
  readonly kind: Kind
  readonly name: string
}

export type ChangeListener = (change: Change) => void

/**
 * The store's change announcements, read through ONE Redis subscriber connection and
 * fanned out in process to any number of listeners (each gRPC Watch stream is one): a
 * thousand watchers cost one connection, not a thousand. The connection is opened when
 * the first listener arrives and closed when the last one leaves.
 *
 * @example
 * const feed = new ChangeFeed(() => redis.duplicate(), store.changesChannel)
 * const stop = await feed.subscribe((c) => console.log(c.kind, c.name))
 */
export class ChangeFeed {
  readonly #connect: () => Redis
  readonly #channel: string
  readonly #listeners = new Set<ChangeListener>()
  #subscriber: Promise<Redis> | undefined
  #onError: ((error: Error) => void) | undefined

  constructor(connect: () => Redis, channel: string) {
    this.#connect = connect
    this.#channel = channel
  }

  /** How many listeners are attached. */
  get size(): number {
    return this.#listeners.size
  }

  /**
   * Adds a listener; resolves once the subscription is live (a change announced after
   * that reaches it). Returns the function that removes it.
   */
  async subscribe(listener: ChangeListener): Promise<() => void> {
    this.#listeners.add(listener)
    try {
      await this.#open()
    } catch (error) {
      this.#listeners.delete(listener)
      throw error
    }
    return () => {
      this.#listeners.delete(listener)
      if (this.#listeners.size === 0) this.#close()
    }
  }

  /** Where subscriber connection errors go (default: dropped; ioredis reconnects). */
  onError(handler: (error: Error) => void): void {
    this.#onError = handler
  }

  /** Closes the subscriber connection; listeners stay attached but hear nothing more. */
  close(): void {
    this.#close()
  }

  #open(): Promise<Redis> {
    if (!this.#subscriber) {
      const redis = this.#connect()
      redis.on('error', (error: Error) => this.#onError?.(error))
      redis.on('message', (_channel: string, message: string) => this.#dispatch(message))
      const opened = redis.subscribe(this.#channel).then(() => redis)
      opened.catch(() => {
        if (this.#subscriber === opened) this.#subscriber = undefined
        redis.disconnect()
      })
      this.#subscriber = opened
    }
    return this.#subscriber
  }

  #close(): void {
    const subscriber = this.#subscriber
    this.#subscriber = undefined
    void subscriber?.then((redis) => redis.disconnect()).catch(() => {})
  }

  #dispatch(message: string): void {
    let change: unknown
    try {
      change = JSON.parse(message)
    } catch {
      return
    }
    const { kind, name } = (change ?? {}) as { kind?: unknown; name?: unknown }
    if ((kind !== 'rg' && kind !== 'mr' && kind !== 'dpu') || typeof name !== 'string') return
    for (const listener of [...this.#listeners]) listener({ kind, name })
  }
}
