/**
 * The store's objects as Redis hashes: reading one or many, changing one field (status,
 * deletion) with compare-and-set against its revision, and recording each change in the
 * store's change log (`changes.ts`).
 */

import type { StoredObject } from '../model/objects.ts'
import type { RedisClient } from '../redis/connection.ts'
import { LuaScript } from '../redis/lua-script.ts'
import { ChangeLog } from './changes.ts'
import type { EventBatch } from './events.ts'
import type { Kind, StoreKeys } from './store-keys.ts'

const casFieldScript = new LuaScript(new URL('./lua/cas-field.lua', import.meta.url))
const revisionsScript = new LuaScript(new URL('./lua/revisions.lua', import.meta.url))

/** An object kept decoded, with the revision it was read at (`revisions.lua`). */
export interface KeptObject<T> {
  readonly revision: string
  readonly object: T
}

export class ObjectRecords {
  readonly #redis: RedisClient
  readonly #keys: StoreKeys
  /** Every change of an object, in order, for watchers to follow and resume. */
  readonly log: ChangeLog

  constructor(redis: RedisClient, keys: StoreKeys) {
    this.#redis = redis
    this.#keys = keys
    this.log = new ChangeLog(redis, keys.changes)
  }

  async get<T>(kind: Kind, name: string): Promise<T | undefined> {
    return decode<T>(name, await this.#redis.hgetall(this.#keys.object(kind, name)))
  }

  /**
   * The object with the revision it was read at: a write that starts from it
   * (`casField`'s `known`) need not read it again while it has not changed.
   */
  async getKept<T>(kind: Kind, name: string): Promise<KeptObject<T> | undefined> {
    const hash = await this.#redis.hgetall(this.#keys.object(kind, name))
    const object = decode<T>(name, hash)
    return object === undefined ? undefined : { object, revision: revisionOf(hash) }
  }

  /** The object just written: it must be there. */
  async mustGet<T>(kind: Kind, name: string): Promise<T> {
    const object = await this.get<T>(kind, name)
    if (!object) throw new Error(`${kind} ${name} vanished while being written`)
    return object
  }

  /** Many objects in one round trip (a pipeline of HGETALLs), sorted by name. */
  async getMany<T extends StoredObject<unknown, unknown>>(kind: Kind, names: string[]) {
    const objects: T[] = []
    for (const [name, hash] of await this.#hashes(kind, [...names].sort())) {
      const object = decode<T>(name, hash)
      if (object) objects.push(object)
    }
    return objects
  }

  /** The objects' hashes, in the order of `names`, in one round trip. */
  async #hashes(kind: Kind, names: string[]): Promise<[string, Record<string, string>][]> {
    const pipeline = this.#redis.pipeline()
    for (const name of names) pipeline.hgetall(this.#keys.object(kind, name))
    const replies = (await pipeline.exec()) ?? []
    return replies.map(([error, hash], i) => {
      if (error) throw error
      return [names[i] ?? '', hash as Record<string, string>]
    })
  }

  /**
   * Many objects as fresh as `getMany` reads them, reading again only those whose revision
   * moved on since `kept` holds them: one round trip for every object's revision, then one
   * for the changed ones (none when nothing changed). Returns the objects (sorted by name) and what to keep for next
   * time (exactly these objects). Objects are shared with the cache: read-only.
   */
  async getManyKept<T extends StoredObject<unknown, unknown>>(
    kind: Kind,
    names: string[],
    kept: ReadonlyMap<string, KeptObject<T>>,
  ): Promise<{ objects: T[]; keep: Map<string, KeptObject<T>> }> {
    const sorted = [...names].sort()
    const keep = new Map<string, KeptObject<T>>()
    if (sorted.length === 0) return { objects: [], keep }
    const keys = sorted.map((name) => this.#keys.object(kind, name))
    const revisions = (await revisionsScript.run(this.#redis, keys, [])) as string[]
    const stale: string[] = []
    for (const [i, name] of sorted.entries()) {
      const revision = revisions[i] ?? ''
      if (revision === '') continue
      const held = kept.get(name)
      if (held?.revision === revision) keep.set(name, held)
      else stale.push(name)
    }
    if (stale.length > 0) {
      for (const [name, hash] of await this.#hashes(kind, stale)) {
        const object = decode<T>(name, hash)
        // The revision of what was read, which may be newer than the one compared.
        if (object) keep.set(name, { revision: revisionOf(hash), object })
      }
    }
    const objects: T[] = []
    for (const name of sorted) {
      const held = keep.get(name)
      if (held) objects.push(held.object)
    }
    return { objects, keep }
  }

  /**
   * The objects of these names that exist, each with the revision it was read at, in one
   * round trip (fresh reads, for a reader that knows which of its kept objects changed).
   */
  async readKept<T extends StoredObject<unknown, unknown>>(
    kind: Kind,
    names: readonly string[],
  ): Promise<Map<string, KeptObject<T>>> {
    const read = new Map<string, KeptObject<T>>()
    for (const [name, hash] of await this.#hashes(kind, [...names])) {
      const object = decode<T>(name, hash)
      if (object) read.set(name, { revision: revisionOf(hash), object })
    }
    return read
  }

  /**
   * Read-modify-write of one field, retried while another writer changed it in between.
   * `update` gets the current object and returns the field's new value, or undefined to
   * leave it; so does a missing object, or one the script refuses to change.
   *
   * The write is guarded by the object's whole revision: the value is written only if the
   * object is still exactly what `update` was given. `known` (optional): the object as the
   * caller read it (`getKept`), which the first try starts from instead of reading it
   * again; if it changed since, the write reads it and tries again as usual.
   *
   * The change log's entry for the change, and the events it makes (`eventsOf`, optional:
   * `EventLog.batch`), are written in the same script as the value, never one without the
   * other.
   */
  async casField<S, V>(
    kind: Kind,
    name: string,
    field: 'status' | 'deletion',
    update: (current: StoredObject<unknown, S>) => V | undefined,
    eventsOf?: (current: StoredObject<unknown, S>, next: V) => EventBatch | undefined,
    known?: KeptObject<StoredObject<unknown, S>>,
  ): Promise<V | undefined> {
    const key = this.#keys.object(kind, name)
    let start = known
    for (;;) {
      // One read: the revision and the object it guards come from the same hash.
      const read = start ?? (await this.getKept<StoredObject<unknown, S>>(kind, name))
      start = undefined
      if (read === undefined) return undefined
      const { object: current, revision } = read
      const next = update(current)
      if (next === undefined) return undefined
      const events = eventsOf?.(current, next)
      const log = this.log.change(kind, name)
      const written = Number(
        await casFieldScript.run(
          this.#redis,
          events ? [key, log.key, events.key] : [key, log.key],
          [
            field,
            revision,
            JSON.stringify(next),
            log.keep,
            log.fields.length,
            ...log.fields,
            ...(events ? [String(events.kept), ...events.entries] : []),
          ],
        ),
      )
      if (written === 1) return next
      if (written === -1) return undefined
    }
  }
}

/** What `revisions.lua` answers for this hash. */
function revisionOf(h: Record<string, string>): string {
  return [
    h.specVersion,
    h.updatedAt ?? '',
    h.createdAt ?? '',
    h.statusRev ?? '0',
    h.deletionRev ?? '0',
  ].join('|')
}

function decode<T>(name: string, h: Record<string, string>): T | undefined {
  if (!h.spec) return undefined
  return {
    name,
    spec: JSON.parse(h.spec),
    specVersion: Number(h.specVersion),
    status: JSON.parse(h.status ?? '{}'),
    ...(h.deletion ? { deletion: JSON.parse(h.deletion) } : {}),
    createdAt: h.createdAt ?? '',
    updatedAt: h.updatedAt ?? '',
  } as T
}
