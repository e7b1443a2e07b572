/**
 * Named leases in the store's slot: what must run in one controller process at a time
 * when several share one Redis (the FRR consumer, a reconcile run, embedded OVN centrals).
 * A lease is a key holding its holder's id with an expiry; the holder renews it well
 * before it expires, and a holder that died loses it when it runs out.
 */
import { hostname } from 'node:os'
import type { RedisClient } from '../redis/connection.ts'
import { LuaScript } from '../redis/lua-script.ts'

// Take-or-renew and release-if-mine are the object locks' own scripts.
const takeScript = new LuaScript(new URL('./lua/lock.lua', import.meta.url))
const releaseScript = new LuaScript(new URL('./lua/unlock.lua', import.meta.url))
const membersScript = new LuaScript(new URL('./lua/members.lua', import.meta.url))

/**
 * This controller's name as a lease holder: its host and data directory. The same after a
 * restart (a pod's container restarted, `npm start` again after a crash), so a holder that
 * comes back takes its lease again at once instead of waiting for it to run out; distinct
 * for replicas, which run on other hosts or from other data directories.
 */
export function controllerHolderId(dataDir: string): string {
  return `${hostname()}:${dataDir}`
}

export class Leases {
  readonly #redis: RedisClient
  readonly #prefix: string

  /** @param prefix the store's key prefix (`hz:{store}:`). */
  constructor(redis: RedisClient, prefix: string) {
    this.#redis = redis
    this.#prefix = prefix
  }

  /** The lease's key (its value: the holder). */
  key(name: string): string {
    return `${this.#prefix}lease:${name}`
  }

  /**
   * Takes the lease for `holder` for `ttlMs`, or renews it when `holder` has it already.
   * Resolves true when `holder` has it now.
   */
  async take(name: string, holder: string, ttlMs: number): Promise<boolean> {
    return Number(await takeScript.run(this.#redis, [this.key(name)], [holder, ttlMs])) === 1
  }

  /** Gives the lease up, if `holder` still has it. */
  async release(name: string, holder: string): Promise<void> {
    await releaseScript.run(this.#redis, [this.key(name)], [holder])
  }

  /**
   * Records `holder` as alive among those running lease `name` for `ttlMs`; resolves with
   * how many are (itself included).
   */
  async members(name: string, holder: string, ttlMs: number): Promise<number> {
    return Number(
      await membersScript.run(this.#redis, [`${this.key(name)}:members`], [holder, ttlMs]),
    )
  }

  /** Who holds the lease now, or undefined. */
  async holder(name: string): Promise<string | undefined> {
    return (await this.#redis.get(this.key(name))) ?? undefined
  }
}

export interface LeadershipOptions {
  readonly leases: Leases
  /** The lease's name, e.g. `frr-consumer`. */
  readonly name: string
  /** This process. */
  readonly holder: string
  /** How long the lease lasts unless renewed (default 10 s); renewed every third of it. */
  readonly ttlMs?: number
  /**
   * Starts the work when this process becomes the holder; returns how to stop it. The
   * lease is not renewed while it starts: it must be done well within `ttlMs`.
   */
  readonly lead: () => Promise<() => Promise<void>>
  /**
   * Runs when this process finds another holding the lease: at its first look, and after
   * it led (e.g. to keep its own BGP speaker silent while another's announces). Tried again
   * at the next renewal when it fails.
   */
  readonly follow?: () => Promise<void>
  readonly onError?: (error: unknown) => void
  /** Told when this process gains (true) or loses (false) the lease. */
  readonly onChange?: (leading: boolean) => void
}

/**
 * Runs `lead` in exactly one process among those that run this with the same lease, and
 * in another when that one stops or dies (within `ttlMs`). A holder that learns another
 * took the lease stops its work and runs `follow`. A holder that cannot renew (Redis does
 * not answer) while other processes run this lease stops its work and runs `follow` before
 * its lease would run out, so two never work at once and its speaker is silent by the time
 * another may lead; alone, it keeps working, as nobody can take over (and, Redis gone,
 * nothing it serves can change): losing Redis does not tear the data plane down.
 */
export class Leadership {
  readonly #options: LeadershipOptions
  readonly #ttlMs: number
  #stopWork: (() => Promise<void>) | undefined
  /** When this process's lease runs out unless renewed (ms since the epoch). */
  #expiresAt = 0
  /** True once `follow` ran since this process last led (or started). */
  #followed = false
  /** How many other processes ran this lease at the last answer from Redis. */
  #others = 0
  #running = true
  #timer: NodeJS.Timeout | undefined
  #tick: Promise<void> = Promise.resolve()

  constructor(options: LeadershipOptions) {
    this.#options = options
    this.#ttlMs = options.ttlMs ?? 10_000
    this.#schedule(0)
  }

  /** True while this process holds the lease and its work runs. */
  get leading(): boolean {
    return this.#stopWork !== undefined
  }

  /**
   * Stops the work (if this process leads) and gives the lease up for the next; with
   * other processes about, runs `follow` too (another is about to lead).
   */
  async stop(): Promise<void> {
    this.#running = false
    clearTimeout(this.#timer)
    await this.#tick
    const led = this.leading
    await this.#abdicate()
    if (led && this.#others > 0) await this.#follow(true)
    const { leases, name, holder } = this.#options
    await leases.release(name, holder).catch(() => {})
  }

  #schedule(ms: number): void {
    if (!this.#running) return
    this.#timer = setTimeout(() => {
      this.#tick = this.#step().finally(() => this.#schedule(this.#ttlMs / 3))
    }, ms)
  }

  async #step(): Promise<void> {
    const { leases, name, holder, lead, onError, onChange } = this.#options
    const asked = Date.now()
    let held: boolean
    try {
      const [taken, members] = await withTimeout(
        Promise.all([
          leases.take(name, holder, this.#ttlMs),
          leases.members(name, holder, this.#ttlMs * 3),
        ]),
        this.#ttlMs / 3,
      )
      held = taken
      this.#others = members - 1
    } catch (error) {
      onError?.(error)
      // Unknown: with others about, keep the work only while the lease surely still runs.
      if (this.#others > 0 && Date.now() >= this.#expiresAt - this.#ttlMs / 3) {
        await this.#abdicate()
        await this.#follow()
      }
      return
    }
    if (!held) {
      await this.#abdicate()
      await this.#follow()
      return
    }
    this.#expiresAt = asked + this.#ttlMs
    if (this.leading || !this.#running) return
    this.#followed = false
    try {
      this.#stopWork = await lead()
      onChange?.(true)
    } catch (error) {
      onError?.(error)
      await leases.release(name, holder).catch(() => {})
    }
  }

  /** Runs `follow` once since this process last led (again at each step until it works). */
  async #follow(stopping = false): Promise<void> {
    const { follow, onError } = this.#options
    if (this.#followed || (!this.#running && !stopping) || !follow) return
    try {
      await withTimeout(follow(), this.#ttlMs)
      this.#followed = true
    } catch (error) {
      onError?.(error)
    }
  }

  async #abdicate(): Promise<void> {
    const stop = this.#stopWork
    if (!stop) return
    this.#stopWork = undefined
    await stop().catch((error: unknown) => this.#options.onError?.(error))
    this.#options.onChange?.(false)
  }
}

/** `promise`, or a rejection once `ms` pass without an answer. */
function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms)
  })
  return Promise.race([promise, late]).finally(() => clearTimeout(timer))
}
