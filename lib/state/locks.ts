/**
 * Per-object locks: the steps that change one object's world (attach's and detach's
 * converge) run one at a time for that object, so an attach cannot configure a host after
 * its detach isolated it, nor allocate an address after the detach released them. A lock
 * is a lease held by a job: the job resumed after its worker died takes it again at once;
 * any other waits until the lease runs out (`leaseMs`) if the holder never comes back.
 */
import type { RedisClient } from '../redis/connection.ts'
import { LuaScript } from '../redis/lua-script.ts'
import type { Kind } from './store-keys.ts'

const lockScript = new LuaScript(new URL('./lua/lock.lua', import.meta.url))
const unlockScript = new LuaScript(new URL('./lua/unlock.lua', import.meta.url))

/** How long a lock is held at most when its holder never releases it (it died). */
export const LOCK_LEASE_MS = 60_000

export class ObjectLocks {
  readonly #redis: RedisClient
  readonly #prefix: string

  constructor(redis: RedisClient, prefix: string) {
    this.#redis = redis
    this.#prefix = prefix
  }

  #key(kind: Kind, name: string): string {
    return `${this.#prefix}lock:${kind}:${name}`
  }

  /**
   * Takes the object's lock for `holder` (a job id: the same job resumed after its worker
   * died takes its own lock again) in run `run` (the worker's lock token of this run of the
   * job); resolves with the function that releases it, or undefined when another holder
   * has it. The release frees the lock only while this run holds it: a job that parked
   * (moved itself to delayed) and was woken and run again before this run ended has taken
   * it again, and keeps it.
   *
   * @example
   * const release = await locks.acquire('mr', 'host-1', job.id, token)
   * if (!release) … // try again later
   * try { … } finally { await release() }
   */
  async acquire(
    kind: Kind,
    name: string,
    holder: string,
    run = '',
    leaseMs = LOCK_LEASE_MS,
  ): Promise<(() => Promise<void>) | undefined> {
    const key = this.#key(kind, name)
    const taken = await lockScript.run(this.#redis, [key], [holder, leaseMs, run])
    if (Number(taken) !== 1) return undefined
    return async () => {
      await unlockScript.run(this.#redis, [key], [holder, run])
    }
  }
}
