/**
 * Each object's recent history (`GET /v1/{kind}/{name}/events`, like `kubectl describe`):
 * phase transitions, condition changes, retries and reconcile's repairs, newest first,
 * kept bounded in Redis (one capped list per object).
 */

import type { EventKind, StoredDpuEvent } from '../model/events.ts'
import type { RedisClient } from '../redis/connection.ts'

/** Events as written together with the status change that made them (`EventLog.batch`). */
export interface EventBatch {
  /** The object's event list. */
  readonly key: string
  /** The events, JSON, oldest first (pushed in turn: the newest ends up first). */
  readonly entries: readonly string[]
  /** How many events the list keeps. */
  readonly kept: number
}

/** Events kept per object by default: older ones are dropped. */
export const DEFAULT_EVENTS_KEPT = 50

/**
 * A bounded event list per object. `record` never fails the caller's work: history is
 * best effort, the status is the truth.
 *
 * @example
 * await events.record('mr', 'host-1', { type: 'Warning', reason: 'Repaired', message: '…' })
 * const latest = await events.list('mr', 'host-1') // newest first
 */
export class EventLog {
  readonly #redis: Pick<RedisClient, 'multi' | 'lrange' | 'del'>
  readonly #prefix: string
  readonly #kept: number

  constructor(
    redis: Pick<RedisClient, 'multi' | 'lrange' | 'del'>,
    prefix: string,
    kept = DEFAULT_EVENTS_KEPT,
  ) {
    this.#redis = redis
    this.#prefix = prefix
    this.#kept = kept
  }

  #key(kind: EventKind, name: string): string {
    return `${this.#prefix}events:${kind}:${name}`
  }

  async record(
    kind: EventKind,
    name: string,
    ...events: readonly Omit<StoredDpuEvent, 'at'>[]
  ): Promise<void> {
    const batch = this.batch(kind, name, events)
    if (!batch) return
    // One round trip for all of them.
    await this.#redis
      .multi()
      .lpush(batch.key, ...batch.entries)
      .ltrim(batch.key, 0, batch.kept - 1)
      .exec()
  }

  /**
   * The events as a batch for a script to write with the change that made them (the
   * status: `ObjectWrites.updateStatus`); undefined when there are none.
   */
  batch(
    kind: EventKind,
    name: string,
    events: readonly Omit<StoredDpuEvent, 'at'>[],
  ): EventBatch | undefined {
    if (events.length === 0) return undefined
    const at = new Date().toISOString()
    return {
      key: this.#key(kind, name),
      entries: events.map((event) => JSON.stringify({ at, ...event } satisfies StoredDpuEvent)),
      kept: this.#kept,
    }
  }

  /** A stored spec change is the object's first event (`Created`) or a `SpecChanged` one. */
  async specStored(kind: EventKind, name: string, version: number): Promise<void> {
    await this.record(
      kind,
      name,
      version === 1
        ? { type: 'Normal', reason: 'Created', message: 'spec version 1 stored' }
        : { type: 'Normal', reason: 'SpecChanged', message: `spec version ${version} stored` },
    )
  }

  /**
   * The object's events, newest first (at most `limit`); a DPU's with whose each is
   * (`StoredDpuEvent.tenant`), which the API does not show.
   */
  async list(kind: EventKind, name: string, limit = this.#kept): Promise<StoredDpuEvent[]> {
    const raw = await this.#redis.lrange(this.#key(kind, name), 0, Math.max(0, limit - 1))
    return raw.flatMap((line) => {
      try {
        return [JSON.parse(line) as StoredDpuEvent]
      } catch {
        return []
      }
    })
  }

  /** Forgets an object's history (it was purged). */
  async remove(kind: EventKind, name: string): Promise<void> {
    await this.#redis.del(this.#key(kind, name))
  }
}
