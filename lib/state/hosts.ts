/**
 * The stored ManagedResources (hosts): their specs with the claims, guards and quotas a
 * write checks (`spec-writes.ts`), reads, status and purge; and the host sets kept decoded
 * between reads (a group's members, a DPU's hosts): each host is read again only once its
 * revision changed, and only the most recently read sets are kept.
 */
import type {
  ManagedResource,
  ManagedResourceSpec,
  ManagedResourceStatus,
  StoredObject,
} from '../model/objects.ts'
import type { TenantQuota } from '../model/quotas.ts'
import type { RedisClient } from '../redis/connection.ts'
import type { ObjectDeletion } from './deletion.ts'
import type { EventLog } from './events.ts'
import type { KeptObject, ObjectRecords } from './object-records.ts'
import type { ObjectWrites } from './object-writes.ts'
import type { StoreParts } from './parts.ts'
import type { PutResult, SpecWrites } from './spec-writes.ts'
import type { StoreKeys } from './store-keys.ts'

/** Groups and DPUs whose hosts are kept decoded at most (the most recently read). */
const KEPT_SETS = 4096

export class HostRepository {
  readonly #redis: RedisClient
  readonly #keys: StoreKeys
  readonly #records: ObjectRecords
  readonly #specs: SpecWrites
  readonly #events: EventLog
  readonly #writes: ObjectWrites
  readonly #deletion: ObjectDeletion
  /** Per group (`rg:<name>`) and DPU (`dpu:<id>`), its hosts kept decoded. */
  readonly #keptSets = new Map<string, Map<string, KeptObject<ManagedResource>>>()

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
   * Stores a host's resolved spec. `dpuVersion` is the inventory version of its DPU the
   * spec was resolved against: if the DPU changed since, nothing is written ('Changed').
   * The host claims its DPU port and, when its access uses it, the DPU's NAT IP. A new host
   * counts against its group's tenant's `hosts` quota, a PublicAccess one against
   * `publicIps` too (QuotaExceeded, nothing written, when it would not fit). `adminPort`:
   * a port of the admin network, which claims no DPU port (`SpecWrites.host`). `fabric`: a
   * Fabric group's host, which claims no NAT IP.
   * `maxCentrals` (centrals run on demand): the host's group takes an OVN central slot
   * unless it holds one (CentralsExhausted, nothing written, when none is free).
   */
  async put(
    name: string,
    spec: ManagedResourceSpec,
    dpuVersion: number,
    quota: TenantQuota,
    options: {
      readonly adminPort?: boolean
      readonly maxCentrals?: number
      readonly fabric?: boolean
    } = {},
  ): Promise<PutResult<ManagedResource>> {
    const put = await this.#specs.host(name, spec, dpuVersion, quota, options)
    if (put.changed) await this.#events.specStored('mr', put.object.name, put.object.specVersion)
    return put
  }

  /**
   * Refuses what `put` would refuse for deletion, immutable parts or claims; writes
   * nothing. `known`: the host as the caller read it already (not read again).
   */
  check(
    name: string,
    spec: ManagedResourceSpec,
    known?: { readonly existing: ManagedResource | undefined; readonly fabric?: boolean },
  ): Promise<void> {
    return this.#specs.checkHost(name, spec, known)
  }

  /** Refuses (QuotaExceeded) what `put` would refuse for a quota, writing nothing. */
  checkQuotas(name: string, spec: ManagedResourceSpec, quota: TenantQuota): Promise<void> {
    return this.#specs.checkHostQuotas(name, spec, quota)
  }

  /** Refuses (QuotaExceeded) hosts that would not fit the tenant's quotas together. */
  checkQuotasTogether(
    hosts: readonly { readonly name: string; readonly spec: ManagedResourceSpec }[],
    quota: TenantQuota,
  ): Promise<void> {
    return this.#specs.checkHostsQuotas(hosts, quota)
  }

  get(name: string): Promise<ManagedResource | undefined> {
    return this.#records.get('mr', name)
  }

  /** The host with the revision it was read at, for a status write to start from (`updateStatus`). */
  getKept(name: string): Promise<KeptObject<ManagedResource> | undefined> {
    return this.#records.getKept('mr', name)
  }

  /** The hosts of these names that exist, sorted by name, in one round trip. */
  getMany(names: readonly string[]): Promise<ManagedResource[]> {
    return this.#records.getMany('mr', [...names])
  }

  async list(filter: { resourceGroup?: string } = {}): Promise<ManagedResource[]> {
    const names = await this.#redis.smembers(
      filter.resourceGroup ? this.#keys.members(filter.resourceGroup) : this.#keys.index('mr'),
    )
    return this.#records.getMany('mr', names)
  }

  /**
   * The hosts of a group, as fresh as `list({ resourceGroup })` reads them, for a caller
   * that reads the same group over and over (every apply of its topology): each is kept
   * decoded and read again only once it changed, so a read of a 1,000-host group is three
   * round trips (names, revisions, what changed) and small replies rather than 1,000
   * objects. Read-only objects.
   */
  async inGroup(group: string): Promise<ManagedResource[]> {
    return this.#readKept(`rg:${group}`, await this.#redis.smembers(this.#keys.members(group)))
  }

  /**
   * The hosts a DPU serves, its admin network ports included, kept and read again as
   * `inGroup` does (read-only objects).
   */
  async onDpu(id: string): Promise<ManagedResource[]> {
    const keys = this.#keys
    const names = await this.#redis.sunion(keys.dpuHosts(id), keys.dpuAdminPorts(id))
    return this.#readKept(`dpu:${id}`, names)
  }

  /**
   * The hosts a DPU serves, its admin network ports included, that are not members of
   * `group` (fresh reads). The names come from the store's sets in one round trip, and
   * only those hosts are read: usually none, where `onDpu` would check every host of the DPU.
   */
  async onDpuOutside(id: string, group: string): Promise<ManagedResource[]> {
    const keys = this.#keys
    const replies =
      (await this.#redis
        .pipeline()
        .sdiff(keys.dpuHosts(id), keys.members(group))
        .sdiff(keys.dpuAdminPorts(id), keys.members(group))
        .exec()) ?? []
    const names = replies.flatMap(([error, found]) => {
      if (error) throw error
      return found as string[]
    })
    return names.length > 0 ? this.#records.getMany('mr', names) : []
  }

  /**
   * `ObjectWrites.updateStatus` of a host; `known`: the host as the caller read it
   * (`getKept`), read again only if it changed since.
   */
  updateStatus(
    name: string,
    update: (h: StoredObject<unknown, ManagedResourceStatus>) => ManagedResourceStatus | undefined,
    known?: KeptObject<ManagedResource>,
  ): Promise<ManagedResourceStatus | undefined> {
    return this.#writes.updateStatus('mr', name, update, known)
  }

  /** Removes a host for good (after it was isolated), releasing its claims and quota. */
  purge(name: string, group: string, dpuId: string): Promise<boolean> {
    return this.#deletion.purgeHost(name, group, dpuId)
  }

  /** Hosts `names`, read through the set of them kept under `set` (read-only objects). */
  async #readKept(set: string, names: string[]): Promise<ManagedResource[]> {
    const sets = this.#keptSets
    const kept = sets.get(set) ?? new Map()
    const { objects, keep } = await this.#records.getManyKept<ManagedResource>('mr', names, kept)
    // Most recently read last; the least recently read set goes first when there are many.
    sets.delete(set)
    if (keep.size > 0) sets.set(set, keep)
    for (const old of sets.keys()) {
      if (sets.size <= KEPT_SETS) break
      sets.delete(old)
    }
    return objects
  }
}
