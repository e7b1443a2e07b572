/**
 * The addresses Fabric hosts leak at the fabric's border (FabricAccess, PublicAccess):
 * each leaked address must be unique in the fabric, since the border puts every leaked
 * /32 (/128) of every group into one table, and groups' CIDRs may overlap. A claim is
 * owner-keyed (the host's name), all or nothing, atomic in one script; the owner's
 * addresses are given back on detach, once its DPU withdrew them.
 *
 * @example
 * await leaks.claim('h1', ['10.10.0.11'])   // { ok: true }
 * await leaks.claim('h2', ['10.10.0.11'])   // { ok: false, address: '10.10.0.11', holder: 'h1' }
 * await leaks.release('h1')
 */
import type { RedisClient } from '../redis/connection.ts'
import { LuaScript } from '../redis/lua-script.ts'

const claimScript = new LuaScript(new URL('./lua/leak-claim.lua', import.meta.url))
const transferScript = new LuaScript(new URL('./lua/leak-transfer.lua', import.meta.url))

export type LeakClaim =
  | { readonly ok: true }
  | { readonly ok: false; readonly address: string; readonly holder: string }

export class FabricLeaks {
  readonly #redis: RedisClient
  readonly #byAddress: string
  readonly #byOwner: string

  /** @param prefix the store's key prefix (`hz:{store}:`). */
  constructor(redis: RedisClient, prefix: string) {
    this.#redis = redis
    this.#byAddress = `${prefix}fabric-leaks`
    this.#byOwner = `${prefix}fabric-leaks:owners`
  }

  /** Makes `owner` hold exactly `addresses` (none: it holds nothing), or says who holds one. */
  async claim(owner: string, addresses: readonly string[]): Promise<LeakClaim> {
    const answer = await claimScript.run(
      this.#redis,
      [this.#byAddress, this.#byOwner],
      [owner, ...addresses],
    )
    const [status, address, holder] = Array.isArray(answer) ? answer.map(String) : []
    if (status === 'ok') return { ok: true }
    return { ok: false, address: address ?? '', holder: holder ?? '' }
  }

  /** Gives back every address `owner` holds. */
  async release(owner: string): Promise<void> {
    await this.claim(owner, [])
  }

  /**
   * Hands every address `from` holds to `to` at once (no other owner can claim one in
   * between), added to what `to` holds; returns what `to` holds now. Idempotent.
   */
  async transfer(from: string, to: string): Promise<string[]> {
    const answer = await transferScript.run(
      this.#redis,
      [this.#byAddress, this.#byOwner],
      [from, to],
    )
    return Array.isArray(answer) ? answer.map(String) : []
  }

  /** Who holds `address`, or undefined. */
  async holderOf(address: string): Promise<string | undefined> {
    return (await this.#redis.hget(this.#byAddress, address)) ?? undefined
  }

  /** The addresses `owner` holds. */
  async heldBy(owner: string): Promise<string[]> {
    const held = await this.#redis.hget(this.#byOwner, owner)
    return held ? held.split(' ') : []
  }
}
