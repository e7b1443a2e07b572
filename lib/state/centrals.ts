/**
 * Which groups hold one of the site's OVN central slots (`HYDRAZINE_MAX_CENTRALS`) when
 * centrals run on demand: a group takes a slot with its first host (atomically with that
 * host's spec write, `SpecWrites.host`'s centrals guard) and gives it back once it has had
 * no host for the grace period (`releaseIfIdle`), when its central is stopped. An empty
 * group holds no slot. The slots counted are the centrals running, starting or in their
 * grace period, across every controller replica.
 *
 * @example
 * await store.centrals.hold('group-a')            // its attach is about to start it
 * await store.centrals.idleSince('group-a', Date.now())
 * await store.centrals.releaseIfIdle('group-a', Date.now(), 30_000) // 'released' → stop it
 */
import { CentralsExhausted } from '../model/quotas.ts'
import type { RedisClient } from '../redis/connection.ts'
import { LuaScript } from '../redis/lua-script.ts'
import type { StoreKeys } from './store-keys.ts'

const releaseScript = new LuaScript(new URL('./lua/central-release.lua', import.meta.url))

/** What `releaseIfIdle` found (see `lua/central-release.lua`). */
export type CentralRelease = 'released' | 'not-held' | 'busy' | 'recent'

export class CentralSlots {
  readonly #redis: RedisClient
  readonly #keys: StoreKeys

  constructor(redis: RedisClient, keys: StoreKeys) {
    this.#redis = redis
    this.#keys = keys
  }

  /** Whether the group holds a slot: its central runs, starts, or is in its grace period. */
  async holds(group: string): Promise<boolean> {
    return (await this.#redis.sismember(this.#keys.centrals, group)) === 1
  }

  /**
   * Refuses (`CentralsExhausted`) the first host of a group holding no slot when all
   * `max` are taken, writing nothing: checked before a request's other writes (its DPU's
   * inventory entry). The host's spec write checks again, atomically.
   */
  async check(group: string, max: number): Promise<void> {
    const [held, taken] = await Promise.all([
      this.#redis.sismember(this.#keys.centrals, group),
      this.#redis.scard(this.#keys.centrals),
    ])
    if (held === 0 && taken >= max) throw new CentralsExhausted(max)
  }

  /** The groups holding a slot, sorted. */
  async list(): Promise<string[]> {
    return (await this.#redis.smembers(this.#keys.centrals)).sort()
  }

  /**
   * The group holds a slot (its attach is about to start its central), whatever the cap:
   * the host's spec write checked it already. Clears its idle mark: the next host to leave
   * writes a fresh one. Idempotent.
   */
  async hold(group: string): Promise<void> {
    await this.#redis
      .multi()
      .sadd(this.#keys.centrals, group)
      .hdel(this.#keys.centralsIdle, group)
      .exec()
  }

  /** The group's last host left at `now` (ms): its grace period starts again. */
  async idleSince(group: string, now: number): Promise<void> {
    await this.#redis.hset(this.#keys.centralsIdle, group, String(now))
  }

  /**
   * Since when (ms) the group has had no host, marking it `now` unless a mark is there
   * (reconcile's look at a slot whose stop was never scheduled).
   */
  async markIdle(group: string, now: number): Promise<number> {
    await this.#redis.hsetnx(this.#keys.centralsIdle, group, String(now))
    return Number(await this.#redis.hget(this.#keys.centralsIdle, group)) || now
  }

  /** Gives the slot back when the group has had no host for `graceMs` (atomic). */
  async releaseIfIdle(group: string, now: number, graceMs: number): Promise<CentralRelease> {
    const keys = this.#keys
    return (await releaseScript.run(
      this.#redis,
      [keys.centrals, keys.centralsIdle, keys.members(group)],
      [group, now, graceMs],
    )) as CentralRelease
  }

  /** The group is gone: it holds no slot. */
  async forget(group: string): Promise<void> {
    await this.#redis
      .multi()
      .srem(this.#keys.centrals, group)
      .hdel(this.#keys.centralsIdle, group)
      .exec()
  }
}
