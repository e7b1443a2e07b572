/**
 * Networks' layouts as this process last read them, shared by network changes and
 * allocations so that a change made here is used by the next allocation at once.
 *
 * A cached layout may be out of date: every script that relies on one is given the
 * version it was read at and answers `stale` when the stored version differs; the caller
 * then forgets its copy and reads again. Deleting a network keeps its version counter, so
 * a copy cached before a delete and re-create is stale as well.
 */
import type { RedisClient } from '../redis/connection.ts'
import { compile, type Layout, type NetworkDefinition } from './definition.ts'
import { NotFound } from './errors.ts'
import { type NetworkKeys, networkKeys } from './keys.ts'

/** How many times a change or an allocation is tried while other writers get there first. */
export const MAX_ATTEMPTS = 20

/** A network's definition version, and its layout while the network exists. */
export interface Snapshot {
  readonly version: string
  readonly layout?: Layout
}

export interface Current {
  readonly version: string
  readonly layout: Layout
}

export class LayoutCache {
  readonly #prefix: string
  readonly #cache = new Map<string, Current>()

  constructor(
    readonly redis: RedisClient,
    prefix: string,
  ) {
    this.#prefix = prefix
  }

  keys(network: string): NetworkKeys {
    return networkKeys(this.#prefix, network)
  }

  /** The cached snapshot, or the stored one when `fresh` or nothing is cached. */
  async read(network: string, fresh = false): Promise<Snapshot> {
    const cached = this.#cache.get(network)
    if (!fresh && cached !== undefined) return cached
    const [version = null, def = null] = await this.redis.hmget(
      this.keys(network).meta,
      'version',
      'def',
    )
    if (version === null || def === null) {
      this.#cache.delete(network)
      return { version: version ?? '0' }
    }
    const layout = compile(network, JSON.parse(def) as NetworkDefinition)
    this.#cache.set(network, { version, layout })
    return { version, layout }
  }

  /** Like `read`, for a network that must exist: NotFound otherwise. */
  async require(network: string): Promise<Current> {
    const { version, layout } = await this.read(network)
    if (layout === undefined) throw new NotFound('network', network)
    return { version, layout }
  }

  /** Records what a commit stored: the new version and layout, or `undefined` once deleted. */
  remember(network: string, version: string, layout: Layout | undefined): void {
    if (layout === undefined) this.#cache.delete(network)
    else this.#cache.set(network, { version, layout })
  }

  /** Drops a copy a script found stale. */
  forget(network: string): void {
    this.#cache.delete(network)
  }
}
