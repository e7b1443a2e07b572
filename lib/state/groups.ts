/**
 * The stored ResourceGroups: their specs (a new group counts against its tenant's `groups`
 * quota), reads, status, purge, and what the store keeps in a group's hash beside its spec
 * and status: its DHCP relay id and what its members were last sent of its spec.
 */
import type {
  ResourceGroup,
  ResourceGroupSpec,
  ResourceGroupStatus,
  StoredObject,
} from '../model/objects.ts'
import type { QuotaLimits } from '../model/quotas.ts'
import type { RedisClient } from '../redis/connection.ts'
import { LuaScript } from '../redis/lua-script.ts'
import type { ObjectDeletion } from './deletion.ts'
import type { EventLog } from './events.ts'
import type { ObjectRecords } from './object-records.ts'
import type { ObjectWrites } from './object-writes.ts'
import type { StoreParts } from './parts.ts'
import type { PutResult, SpecWrites } from './spec-writes.ts'
import type { StoreKeys } from './store-keys.ts'

const relayIdScript = new LuaScript(new URL('./lua/relay-id.lua', import.meta.url))
const setFieldScript = new LuaScript(new URL('./lua/set-field.lua', import.meta.url))

/** The group hash's field holding what its members were last sent of its spec. */
const MEMBER_SETTINGS = 'memberSettings'

export class GroupRepository {
  readonly #redis: RedisClient
  readonly #keys: StoreKeys
  readonly #records: ObjectRecords
  readonly #specs: SpecWrites
  readonly #events: EventLog
  readonly #writes: ObjectWrites
  readonly #deletion: ObjectDeletion

  constructor(parts: StoreParts) {
    this.#redis = parts.redis
    this.#keys = parts.keys
    this.#records = parts.records
    this.#specs = parts.specs
    this.#events = parts.events
    this.#writes = parts.writes
    this.#deletion = parts.deletion
  }

  /**
   * Stores a group's spec. A new group counts against its tenant's `groups` quota
   * (QuotaExceeded, nothing written, when it is full; without `limits`, no limit). It takes
   * no OVN central slot: its first host does (`HostRepository.put`'s `maxCentrals`).
   */
  async put(
    name: string,
    spec: ResourceGroupSpec,
    limits?: QuotaLimits,
  ): Promise<PutResult<ResourceGroup>> {
    const put = await this.#specs.group(name, spec, limits)
    if (put.changed) await this.#events.specStored('rg', put.object.name, put.object.specVersion)
    return put
  }

  get(name: string): Promise<ResourceGroup | undefined> {
    return this.#records.get('rg', name)
  }

  /** The groups of these names that exist, sorted by name, in one round trip. */
  getMany(names: readonly string[]): Promise<ResourceGroup[]> {
    return this.#records.getMany('rg', [...names])
  }

  async list(filter: { tenant?: string } = {}): Promise<ResourceGroup[]> {
    const names = await this.#redis.smembers(
      filter.tenant ? this.#keys.tenantGroups(filter.tenant) : this.#keys.index('rg'),
    )
    return this.#records.getMany('rg', names)
  }

  /** Names of the hosts that belong to a group. */
  memberNames(group: string): Promise<string[]> {
    return this.#redis.smembers(this.#keys.members(group))
  }

  /** How many hosts belong to a group (without reading their names). */
  memberCount(group: string): Promise<number> {
    return this.#redis.scard(this.#keys.members(group))
  }

  /** `ObjectWrites.updateStatus` of a group. */
  updateStatus(
    name: string,
    update: (g: StoredObject<unknown, ResourceGroupStatus>) => ResourceGroupStatus | undefined,
  ): Promise<ResourceGroupStatus | undefined> {
    return this.#writes.updateStatus('rg', name, update)
  }

  /** Removes a group for good (after every host was isolated). */
  purge(name: string, tenant: string): Promise<boolean> {
    return this.#deletion.purgeGroup(name, tenant, () => this.memberNames(name))
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
