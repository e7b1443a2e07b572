/**
 * The store's change log: every change of a stored object (its spec, status or deletion
 * mark, or its removal) is one entry of a Redis stream, `{kind, name, tenant?}`, whose id
 * is the change's resource version. The stream keeps about the last `keep` entries
 * (`XADD MAXLEN ~`), so a watcher that lost its connection can read every change after
 * the last version it saw (`ChangeLog.since`) — or learn that the log no longer reaches
 * back that far (`ResourceVersionTooOld`) and list again. `ChangeFeed` follows the log
 * live for any number of listeners through one blocking connection.
 *
 * Every change is appended by the script that writes it (`put-spec.lua` for a spec,
 * `cas-field.lua` for a status or deletion mark, `purge.lua` for a removal): a change is
 * never stored unannounced, nor announced unstored. Readers that keep objects decoded rely
 * on that (`HostRepository.inGroup` reads again only the members the log names).
 */

import { HydrazineError } from '../errors.ts'
import type { RedisClient } from '../redis/connection.ts'
import { LuaScript } from '../redis/lua-script.ts'
import type { Kind } from './store-keys.ts'

const changesSinceScript = new LuaScript(new URL('./lua/changes-since.lua', import.meta.url))

/** One stored object changed (its spec, status or deletion mark) or was removed. */
export interface Change {
  readonly kind: Kind
  readonly name: string
  /**
   * Set when the object was removed for good, with the tenant whose object it was (groups:
   * theirs; hosts: their group's, when it still existed): who may learn that it is gone
   * once it cannot be read.
   */
  readonly removed?: { readonly tenant?: string }
  /** The change's resource version (its stream id, `ms-seq`): rises with each change. */
  readonly version: string
}

export type ChangeListener = (change: Change) => void

/** The version before any change: what a log with no entry yet is at. */
export const VERSION_ZERO = '0-0'

/** Entries the log keeps, about (trimming is approximate, never below it). */
export const CHANGES_KEPT = 100_000

/** A resource version (a stream id): `ms-seq`, both whole numbers. */
export function isResourceVersion(s: string): boolean {
  return /^\d{1,20}-\d{1,20}$/.test(s)
}

/** Orders two resource versions: negative when `a` is older, 0 when equal. */
export function compareVersions(a: string, b: string): number {
  const [am = 0n, as = 0n] = a.split('-').map(BigInt)
  const [bm = 0n, bs = 0n] = b.split('-').map(BigInt)
  if (am !== bm) return am < bm ? -1 : 1
  return as === bs ? 0 : as < bs ? -1 : 1
}

/** The log no longer holds every change after the version asked for: list again. */
export class ResourceVersionTooOld extends HydrazineError {
  constructor(readonly version: string) {
    super(
      'RESOURCE_VERSION_TOO_OLD',
      `resource version ${version} is older than the change log keeps; list again and watch from there`,
    )
  }
}

/** The store's change log (one Redis stream, `key`). */
/** A change as the log's stream entry holds it. */
function changeFields(kind: Kind, name: string, removed?: { tenant?: string }): string[] {
  const fields = ['kind', kind, 'name', name]
  if (removed) fields.push('removed', '1', ...(removed.tenant ? ['tenant', removed.tenant] : []))
  return fields
}

export class ChangeLog {
  readonly #redis: RedisClient
  readonly key: string
  readonly #keep: number

  constructor(redis: RedisClient, key: string, keep = CHANGES_KEPT) {
    this.#redis = redis
    this.key = key
    this.#keep = keep
  }

  /** Records a change (`removed`: the object is gone for good); resolves to its version. */
  async append(kind: Kind, name: string, removed?: { tenant?: string }): Promise<string> {
    const fields = changeFields(kind, name, removed)
    const id = await this.#redis.xadd(this.key, 'MAXLEN', '~', this.#keep, '*', ...fields)
    return id ?? VERSION_ZERO
  }

  /**
   * What a script that removes an object passes to append its removal in the same step:
   * the log's key, its length bound and the change's fields.
   */
  removal(kind: Kind, name: string, tenant: string | undefined) {
    const removed = tenant === undefined ? {} : { tenant }
    return { key: this.key, keep: this.#keep, fields: changeFields(kind, name, removed) }
  }

  /** The same for a script that changes an object (`cas-field.lua`): its change's entry. */
  change(kind: Kind, name: string) {
    return { key: this.key, keep: this.#keep, fields: changeFields(kind, name) }
  }

  /** The version of the newest change (`VERSION_ZERO` when there is none). */
  async latest(): Promise<string> {
    const [newest] = await this.#redis.xrevrange(this.key, '+', '-', 'COUNT', 1)
    return newest?.[0] ?? VERSION_ZERO
  }

  /**
   * At most `count` changes after `version`, oldest first (none: nothing changed since);
   * ResourceVersionTooOld when some of them were trimmed away.
   */
  async since(version: string, count: number): Promise<Change[]> {
    const reply = (await changesSinceScript.run(this.#redis, [this.key], [version, count])) as [
      string,
      [string, string[]][]?,
    ]
    if (reply[0] !== 'ok') throw new ResourceVersionTooOld(version)
    return (reply[1] ?? []).flatMap(([id, fields]) => changeOf(id, fields) ?? [])
  }
}

/** An entry of the log as a Change; undefined for one that is not (skipped). */
function changeOf(id: string, fields: readonly string[]): Change | undefined {
  const entry = new Map<string, string>()
  for (let i = 0; i + 1 < fields.length; i += 2) entry.set(fields[i] ?? '', fields[i + 1] ?? '')
  const kind = entry.get('kind')
  const name = entry.get('name')
  const tenant = entry.get('tenant')
  if ((kind !== 'rg' && kind !== 'mr' && kind !== 'dpu') || !name) return undefined
  if (!entry.has('removed')) return { kind, name, version: id }
  return { kind, name, version: id, removed: tenant === undefined ? {} : { tenant } }
}

/** A listener's place in the feed: the version it starts after, and how to leave. */
export interface Subscription {
  /** The listener hears every change after this version, and none before. */
  readonly position: string
  readonly stop: () => void
}

/**
 * The change log followed live, through ONE blocking Redis connection fanned out in
 * process to any number of listeners (each gRPC Watch stream is one): a thousand watchers
 * cost one connection, not a thousand. The connection is opened when the first listener
 * arrives and closed when the last one leaves.
 *
 * @example
 * const feed = new ChangeFeed(() => redis.duplicate(), store.changeLog)
 * const { position, stop } = await feed.subscribe((c) => console.log(c.version, c.kind, c.name))
 */
export class ChangeFeed {
  readonly #connect: () => RedisClient
  readonly #log: ChangeLog
  readonly #listeners = new Set<ChangeListener>()
  #reader: Promise<RedisClient> | undefined
  /** The version of the last change dispatched (or the log's newest when opened). */
  #position = VERSION_ZERO
  #onError: ((error: Error) => void) | undefined

  constructor(connect: () => RedisClient, log: ChangeLog) {
    this.#connect = connect
    this.#log = log
  }

  /** How many listeners are attached. */
  get size(): number {
    return this.#listeners.size
  }

  /** At most `count` changes after `version` (see `ChangeLog.since`). */
  since(version: string, count: number): Promise<Change[]> {
    return this.#log.since(version, count)
  }

  /**
   * Adds a listener once the feed follows the log; it hears every change after the
   * subscription's `position`, in order.
   */
  async subscribe(listener: ChangeListener): Promise<Subscription> {
    // The reader may have been closed meanwhile (its last listener left): open another.
    for (let reader = this.#open(); ; reader = this.#open()) {
      await reader
      if (this.#reader === reader) break
    }
    this.#listeners.add(listener)
    return {
      position: this.#position,
      stop: () => {
        this.#listeners.delete(listener)
        if (this.#listeners.size === 0) this.#close()
      },
    }
  }

  /** Where reader connection errors go (default: dropped; ioredis reconnects). */
  onError(handler: (error: Error) => void): void {
    this.#onError = handler
  }

  /** Closes the reader connection; listeners stay attached but hear nothing more. */
  close(): void {
    this.#close()
  }

  #open(): Promise<RedisClient> {
    if (!this.#reader) {
      const redis = this.#connect()
      redis.on('error', (error: Error) => this.#onError?.(error))
      const opened = this.#log.latest().then((position) => {
        this.#position = position
        void this.#follow(redis, opened)
        return redis
      })
      opened.catch(() => {
        if (this.#reader === opened) this.#reader = undefined
        redis.disconnect()
      })
      this.#reader = opened
    }
    return this.#reader
  }

  /** Reads the log from the position on, until this reader is closed. */
  async #follow(redis: RedisClient, reader: Promise<RedisClient>): Promise<void> {
    while (this.#reader === reader) {
      try {
        const reply = await redis.xread(
          'COUNT',
          1000,
          'BLOCK',
          0,
          'STREAMS',
          this.#log.key,
          this.#position,
        )
        if (this.#reader !== reader) return
        for (const [, entries] of reply ?? []) {
          for (const [id, fields] of entries) {
            this.#position = id
            const change = changeOf(id, fields)
            if (change) for (const listener of [...this.#listeners]) listener(change)
          }
        }
      } catch (error) {
        if (this.#reader !== reader) return
        this.#onError?.(error instanceof Error ? error : new Error(String(error)))
        await new Promise((r) => setTimeout(r, 500))
      }
    }
  }

  #close(): void {
    const reader = this.#reader
    this.#reader = undefined
    void reader?.then((redis) => redis.disconnect()).catch(() => {})
  }
}
