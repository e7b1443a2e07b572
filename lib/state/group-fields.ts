/**
 * What the store keeps in a group's hash beside its spec and status: its DHCP relay id
 * and what its members were last sent of its spec.
 */
import type { RedisClient } from '../redis/connection.ts'
import { LuaScript } from '../redis/lua-script.ts'
import type { StoreKeys } from './store-keys.ts'

const relayIdScript = new LuaScript(new URL('./lua/relay-id.lua', import.meta.url))
const setFieldScript = new LuaScript(new URL('./lua/set-field.lua', import.meta.url))

/** The group hash's field holding what its members were last sent of its spec. */
const MEMBER_SETTINGS = 'memberSettings'

export class GroupFields {
  readonly #redis: RedisClient
  readonly #keys: StoreKeys

  constructor(redis: RedisClient, keys: StoreKeys) {
    this.#redis = redis
    this.#keys = keys
  }

  /**
   * The group's DHCP relay id: allocated on first use from a counter that never repeats,
   * so two groups never share a relay port name (circuit id). Undefined for no group.
   */
  async relayIdOf(group: string): Promise<number | undefined> {
    const id = await relayIdScript.run(
      this.#redis,
      [this.#keys.object('rg', group), this.#keys.relayIds],
      [],
    )
    return typeof id === 'number' ? id : undefined
  }

  /**
   * What the group's members were last sent of its spec (`settings`, opaque to the store):
   * a new spec that changes none of it needs no member reconfigured. Undefined before the
   * first was remembered, or for no group.
   */
  async memberSettingsOf(group: string): Promise<string | undefined> {
    return (await this.#redis.hget(this.#keys.object('rg', group), MEMBER_SETTINGS)) ?? undefined
  }

  /** Remembers `settings` as what the group's members were sent; nothing for no group. */
  async rememberMemberSettings(group: string, settings: string): Promise<void> {
    await setFieldScript.run(
      this.#redis,
      [this.#keys.object('rg', group)],
      [MEMBER_SETTINGS, settings],
    )
  }
}
