/**
 * Pages of a list in a stable order: a page is the first `limit` entries whose key sorts
 * after `after` (the last key of the previous page). Continuing from a key, rather than
 * an offset, stays correct while the list changes between pages: an entry removed
 * meanwhile shifts nothing (no entry is shown twice or skipped), and one added meanwhile
 * appears only if it sorts after the cursor. Keys are unique per list (names per kind).
 *
 * @example
 * pageOf(['c', 'a', 'b'], { limit: 2 })              // { items: ['a', 'b'], next: 'b' }
 * pageOf(['c', 'a', 'b'], { limit: 2, after: 'b' })  // { items: ['c'] }
 */

import type { ManagedResource, ResourceGroup, StoredObject } from '../model/objects.ts'
import type { RedisClient } from '../redis/connection.ts'
import type { Kind } from './store-keys.ts'

/** Which page to read. */
export interface PageRequest {
  /** At most this many entries (at least 1). */
  readonly limit: number
  /** Start after this key (absent: from the first). */
  readonly after?: string
}

/** One page, in key order. */
export interface Page<T> {
  readonly items: T[]
  /** The key to pass as `after` for the next page; absent when this page is the last. */
  readonly next?: string
}

/**
 * The page of `entries` (in any order) that `page` asks for, sorted by `keyOf` (keys
 * compare as strings, by UTF-16 code unit).
 */
export function pageOf<T>(
  entries: readonly T[],
  page: PageRequest,
  keyOf: (entry: T) => string = String,
): Page<T> {
  if (!Number.isInteger(page.limit) || page.limit < 1) {
    throw new RangeError(`a page limit must be a positive integer, not ${page.limit}`)
  }
  const keyed = entries.map((entry) => [keyOf(entry), entry] as const)
  const { after } = page
  const rest = (after === undefined ? keyed : keyed.filter(([key]) => key > after)).sort(
    ([a], [b]) => (a < b ? -1 : a > b ? 1 : 0),
  )
  const slice = rest.slice(0, page.limit)
  const last = slice.at(-1)
  return {
    items: slice.map(([, entry]) => entry),
    ...(rest.length > slice.length && last ? { next: last[0] } : {}),
  }
}

/** The store's sets that name its objects, as `ObjectPages` reads them. */
export interface PageSources {
  /** Every object of a kind. */
  index(kind: 'rg' | 'mr'): string
  /** The hosts of a group. */
  members(group: string): string
  /** The groups of a tenant. */
  tenant(tenant: string): string
}

/** Reads the named objects of a kind, sorted by name (a missing one left out). */
export type ReadObjects = <T extends StoredObject<unknown, unknown>>(
  kind: Kind,
  names: string[],
) => Promise<T[]>

/**
 * Pages of the store's groups and hosts: the names are read from their sets, sorted and
 * sliced, and only the page's objects are read (`store.pages`).
 */
export class ObjectPages {
  readonly #redis: RedisClient
  readonly #sets: PageSources
  readonly #read: ReadObjects

  constructor(redis: RedisClient, sets: PageSources, read: ReadObjects) {
    this.#redis = redis
    this.#sets = sets
    this.#read = read
  }

  /** One page of groups by name: all, or one tenant's. */
  async groups(filter: { tenant?: string }, page: PageRequest): Promise<Page<ResourceGroup>> {
    const names = await this.#redis.smembers(
      filter.tenant === undefined ? this.#sets.index('rg') : this.#sets.tenant(filter.tenant),
    )
    return this.#page('rg', names, page)
  }

  /**
   * One page of hosts by name: all, one group's, one tenant's (the hosts of its groups),
   * or one group's only when it is the tenant's.
   */
  async hosts(
    filter: { resourceGroup?: string; tenant?: string },
    page: PageRequest,
  ): Promise<Page<ManagedResource>> {
    const { resourceGroup: group, tenant } = filter
    const sets = this.#sets
    let names: string[] = []
    if (group !== undefined) {
      const own = tenant === undefined || (await this.#redis.sismember(sets.tenant(tenant), group))
      if (own) names = await this.#redis.smembers(sets.members(group))
    } else if (tenant !== undefined) {
      const groups = await this.#redis.smembers(sets.tenant(tenant))
      if (groups.length > 0) names = await this.#redis.sunion(...groups.map((g) => sets.members(g)))
    } else {
      names = await this.#redis.smembers(sets.index('mr'))
    }
    return this.#page('mr', names, page)
  }

  /** The page of `names` asked for, with its objects (one removed meanwhile is left out). */
  async #page<T extends StoredObject<unknown, unknown>>(
    kind: Kind,
    names: string[],
    page: PageRequest,
  ): Promise<Page<T>> {
    const { items, next } = pageOf(names, page)
    return { items: await this.#read<T>(kind, items), ...(next === undefined ? {} : { next }) }
  }
}
