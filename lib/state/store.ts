/**
 * The desired-state store: ResourceGroups, ManagedResources and DPU records in Redis
 * (the same server as the queues). A spec write bumps `specVersion` only when the spec
 * changed; handlers write status with `observedVersion`. All keys share one hash tag so
 * the store lives in one Redis Cluster slot and its Lua scripts may touch any of them.
 *
 * `StateStore` is the one door; behind it each part has its module: the key layout
 * (`store-keys.ts`), object hashes and compare-and-set (`object-records.ts`) with the change
 * log watchers follow (`changes.ts`), spec writes
 * with their claims, guards and quotas (`spec-writes.ts`), the DPU inventory
 * (`dpu-inventory.ts`), deletion (`deletion.ts`), the host sets kept decoded between reads
 * (`kept-hosts.ts`) and a group's relay id and member settings (`group-fields.ts`).
 */
import { randomUUID } from 'node:crypto'
import type {
  Dpu,
  DpuSpec,
  ManagedResource,
  ManagedResourceSpec,
  ManagedResourceStatus,
  ResourceGroup,
  ResourceGroupSpec,
  ResourceGroupStatus,
  StoredObject,
} from '../model/objects.ts'
import type { RedisClient } from '../redis/connection.ts'
import type { ChangeLog } from './changes.ts'
import { ObjectDeletion } from './deletion.ts'
import { DpuHealthRecords } from './dpu-health.ts'
import { DpuInventory, type StaleBinding } from './dpu-inventory.ts'
import { EventLog, isObserved, transitionEvents } from './events.ts'
import { EventGenerations } from './generations.ts'
import { GroupFields } from './group-fields.ts'
import { KeptHostSets } from './kept-hosts.ts'
import { Leases } from './leases.ts'
import { ObjectLocks } from './locks.ts'
import { ObjectRecords } from './object-records.ts'
import { ObjectPages } from './pages.ts'
import { countHosts, type QuotaLimits, type TenantQuota } from './quotas.ts'
import { type PutResult, SpecWrites } from './spec-writes.ts'
import { type Kind, StoreKeys } from './store-keys.ts'

export type { StaleBinding } from './dpu-inventory.ts'
export { type PutResult, StoreConflict } from './spec-writes.ts'
export type { Kind } from './store-keys.ts'

export class StateStore {
  readonly #redis: RedisClient
  readonly #keys: StoreKeys
  readonly #records: ObjectRecords
  readonly #specs: SpecWrites
  readonly #dpus: DpuInventory
  readonly #deletion: ObjectDeletion
  /** Per group and DPU, its hosts kept decoded (`groupHosts`, `dpuHosts`). */
  readonly #keptHosts: KeptHostSets
  readonly #groupFields: GroupFields
  /** Each object's recent history; status writes record their transitions here. */
  readonly events: EventLog
  /** One step at a time per object (attach's and detach's converge). */
  readonly locks: ObjectLocks
  /** What one controller process runs at a time (the FRR consumer, a reconcile run). */
  readonly leases: Leases
  /** What `dpu.health` last found of each DPU (its state, repairs in flight). */
  readonly dpuHealth: DpuHealthRecords
  /** The newest webhook event applied per object (stale events are refused). */
  readonly generations: EventGenerations
  /** Pages of groups and hosts, reading only each page's objects. */
  readonly pages: ObjectPages

  /** @param prefix prepended to every key; must contain a `{hash tag}`. Default `hz:{store}:`. */
  constructor(redis: RedisClient, prefix = 'hz:{store}:') {
    const keys = new StoreKeys(prefix)
    const records = new ObjectRecords(redis, keys)
    this.#redis = redis
    this.#keys = keys
    this.#records = records
    this.events = new EventLog(redis, prefix)
    this.locks = new ObjectLocks(redis, prefix)
    this.leases = new Leases(redis, prefix)
    this.dpuHealth = new DpuHealthRecords(redis, prefix)
    this.generations = new EventGenerations(redis, prefix)
    this.#specs = new SpecWrites(redis, keys, records)
    this.#dpus = new DpuInventory(redis, keys, records)
    this.#deletion = new ObjectDeletion(redis, keys, records, this.events)
    this.#keptHosts = new KeptHostSets(records)
    this.#groupFields = new GroupFields(redis, keys)
    this.pages = new ObjectPages(
      redis,
      {
        index: (kind) => keys.index(kind),
        members: (group) => keys.members(group),
        tenant: (tenant) => keys.tenantGroups(tenant),
      },
      (kind, names) => records.getMany(kind, names),
    )
  }

  /** Every change of a stored object, for watchers to follow live and resume (`changes.ts`). */
  get changeLog(): ChangeLog {
    return this.#records.log
  }

  // ── specs ──────────────────────────────────────────────────────────────────

  /**
   * Stores a group's spec. A new group counts against its tenant's `groups` quota
   * (QuotaExceeded, nothing written, when it is full); without `limits`, no limit.
   */
  async putGroup(
    name: string,
    spec: ResourceGroupSpec,
    limits?: QuotaLimits,
  ): Promise<PutResult<ResourceGroup>> {
    return this.#specAccepted('rg', await this.#specs.group(name, spec, limits))
  }

  /**
   * Stores a host's resolved spec. `dpuVersion` is the inventory version of its DPU the
   * spec was resolved against: if the DPU changed since, nothing is written ('Changed').
   * The host claims its DPU port and, when its access uses it, the DPU's NAT IP. A new host
   * counts against its group's tenant's `hosts` quota, a PublicAccess one against
   * `publicIps` too (QuotaExceeded, nothing written, when it would not fit).
   */
  async putHost(
    name: string,
    spec: ManagedResourceSpec,
    dpuVersion: number,
    quota: TenantQuota,
  ): Promise<PutResult<ManagedResource>> {
    return this.#specAccepted('mr', await this.#specs.host(name, spec, dpuVersion, quota))
  }

  /** A stored spec change is the object's first event (`Created`) or a `SpecChanged` one. */
  async #specAccepted<T extends StoredObject<unknown, unknown>>(
    kind: 'rg' | 'mr',
    put: PutResult<T>,
  ): Promise<PutResult<T>> {
    if (!put.changed) return put
    const version = put.object.specVersion
    await this.events.record(
      kind,
      put.object.name,
      version === 1
        ? { type: 'Normal', reason: 'Created', message: 'spec version 1 stored' }
        : { type: 'Normal', reason: 'SpecChanged', message: `spec version ${version} stored` },
    )
    return put
  }

  /**
   * Stores a DPU's inventory entry. Its fabric IPs and tenant may change only while it
   * serves no host, and a host port may be removed only while no host uses it; a DPU's
   * fabric IPs are its own (no other DPU may list them). A DPU handed to another tenant
   * (or to none) starts a new history: its events name the hosts and groups it served.
   */
  async putDpu(id: string, spec: DpuSpec): Promise<PutResult<Dpu>> {
    const before = await this.getDpu(id)
    const put = await this.#specs.dpu(id, spec)
    if (before && before.spec.tenantId !== spec.tenantId) await this.events.remove('dpu', id)
    return put
  }

  /** Refuses (QuotaExceeded) what `putHost` would refuse for a quota, writing nothing. */
  checkHostQuotas(name: string, spec: ManagedResourceSpec, quota: TenantQuota): Promise<void> {
    return this.#specs.checkHostQuotas(name, spec, quota)
  }

  /** Refuses (QuotaExceeded) hosts that would not fit the tenant's quotas together. */
  checkHostsQuotas(
    hosts: readonly { readonly name: string; readonly spec: ManagedResourceSpec }[],
    quota: TenantQuota,
  ): Promise<void> {
    return this.#specs.checkHostsQuotas(hosts, quota)
  }

  /**
   * Refuses what `putHost` would refuse for deletion, immutable parts or claims; writes
   * nothing. `known`: the host as the caller read it already (not read again).
   */
  checkHost(
    name: string,
    spec: ManagedResourceSpec,
    known?: { readonly existing: ManagedResource | undefined },
  ): Promise<void> {
    return this.#specs.checkHost(name, spec, known)
  }

  // ── reads ──────────────────────────────────────────────────────────────────

  getGroup(name: string): Promise<ResourceGroup | undefined> {
    return this.#records.get('rg', name)
  }
  getHost(name: string): Promise<ManagedResource | undefined> {
    return this.#records.get('mr', name)
  }
  /** The groups of these names that exist, sorted by name, in one round trip. */
  getGroups(names: readonly string[]): Promise<ResourceGroup[]> {
    return this.#records.getMany('rg', [...names])
  }
  /** The hosts of these names that exist, sorted by name, in one round trip. */
  getHosts(names: readonly string[]): Promise<ManagedResource[]> {
    return this.#records.getMany('mr', [...names])
  }

  async listGroups(filter: { tenant?: string } = {}): Promise<ResourceGroup[]> {
    const names = await this.#redis.smembers(
      filter.tenant ? this.#keys.tenantGroups(filter.tenant) : this.#keys.index('rg'),
    )
    return this.#records.getMany('rg', names)
  }

  async listHosts(filter: { resourceGroup?: string } = {}): Promise<ManagedResource[]> {
    const names = await this.#redis.smembers(
      filter.resourceGroup ? this.#keys.members(filter.resourceGroup) : this.#keys.index('mr'),
    )
    return this.#records.getMany('mr', names)
  }

  /**
   * The hosts of a group, as fresh as `listHosts({ resourceGroup })` reads them, for a
   * caller that reads the same group over and over (every apply of its topology): each is
   * kept decoded and read again only once it changed, so a read of a 1,000-host group is
   * three round trips (names, revisions, what changed) and small replies rather than 1,000
   * objects. Read-only objects.
   */
  async groupHosts(group: string): Promise<ManagedResource[]> {
    return this.#keptHosts.read(`rg:${group}`, await this.memberNames(group))
  }

  /** The hosts a DPU serves, kept and read again as `groupHosts` does (read-only objects). */
  async dpuHosts(id: string): Promise<ManagedResource[]> {
    return this.#keptHosts.read(`dpu:${id}`, await this.dpuHostNames(id))
  }

  /** Names of the hosts that belong to a group. */
  memberNames(group: string): Promise<string[]> {
    return this.#redis.smembers(this.#keys.members(group))
  }

  // ── status ─────────────────────────────────────────────────────────────────

  /**
   * Read-modify-write of an object's status, retried on concurrent writes. `update`
   * gets the current object and returns the new status, or undefined to leave it.
   */
  async updateStatus<S>(
    kind: Kind,
    name: string,
    update: (current: StoredObject<unknown, S>) => S | undefined,
  ): Promise<S | undefined> {
    // The events a change makes are written with it: whoever sees the new status (or
    // hears of it in the change log) finds its events there too.
    return this.#records.casField<S, S>(kind, name, 'status', update, (current, next) =>
      isObserved(next)
        ? this.events.batch(
            kind,
            name,
            transitionEvents(isObserved(current.status) ? current.status : undefined, next),
          )
        : undefined,
    )
  }

  updateGroupStatus(
    name: string,
    update: (g: StoredObject<unknown, ResourceGroupStatus>) => ResourceGroupStatus | undefined,
  ) {
    return this.updateStatus('rg', name, update)
  }
  updateHostStatus(
    name: string,
    update: (h: StoredObject<unknown, ManagedResourceStatus>) => ManagedResourceStatus | undefined,
  ) {
    return this.updateStatus('mr', name, update)
  }

  // ── deletion ───────────────────────────────────────────────────────────────

  /**
   * Marks an object for deletion (idempotent; `force` can be raised, never lowered).
   * Returns the object, or undefined when there is none.
   */
  requestDeletion(
    kind: Kind,
    name: string,
    force: boolean,
  ): Promise<StoredObject<unknown, unknown> | undefined> {
    return this.#deletion.request(kind, name, force)
  }

  /** Removes a host for good (after it was isolated), releasing its claims and quota. */
  purgeHost(name: string, group: string, dpuId: string): Promise<boolean> {
    return this.#deletion.purgeHost(name, group, dpuId)
  }

  /** Removes a group for good (after every host was isolated). */
  purgeGroup(name: string, tenant: string): Promise<boolean> {
    return this.#deletion.purgeGroup(name, tenant, () => this.memberNames(name))
  }

  // ── DPUs ───────────────────────────────────────────────────────────────────

  getDpu(id: string): Promise<Dpu | undefined> {
    return this.#dpus.get(id)
  }

  listDpus(filter: { tenant?: string } = {}): Promise<Dpu[]> {
    return this.#dpus.list(filter)
  }

  /** The live hosts a DPU serves. */
  dpuHostNames(id: string): Promise<string[]> {
    return this.#dpus.hostNames(id)
  }

  /**
   * Removes a DPU from the inventory, and its history; refused (InUse) while it serves a
   * host.
   */
  async deleteDpu(id: string): Promise<boolean> {
    const deleted = await this.#dpus.delete(id)
    await this.events.remove('dpu', id)
    return deleted
  }

  /**
   * A host was force-detached while its DPU's agent did not answer: the DPU may still
   * forward its port, so it must isolate that host before it serves anyone else.
   */
  markDpuNeedsIsolation(dpuId: string, stale: StaleBinding): Promise<void> {
    return this.#dpus.markNeedsIsolation(dpuId, stale)
  }
  dpuNeedsIsolation(dpuId: string): Promise<StaleBinding[]> {
    return this.#dpus.needsIsolation(dpuId)
  }
  clearDpuNeedsIsolation(dpuId: string, host: string): Promise<void> {
    return this.#dpus.clearNeedsIsolation(dpuId, host)
  }
  /** The group whose own central the DPU's chassis follows (null: none recorded). */
  dpuCentral(dpuId: string): Promise<string | null> {
    return this.#dpus.central(dpuId)
  }
  /** Records that the DPU's chassis now follows `group`'s own central. */
  setDpuCentral(dpuId: string, group: string): Promise<void> {
    return this.#dpus.setCentral(dpuId, group)
  }
  /**
   * The DPU's certificate from Hydrazine's CA (PEM, public), as last issued with its
   * credentials; null when none was (no PKI, or issued before this was kept). A group's
   * own central certifies its key for the group's SB.
   */
  dpuIdentity(dpuId: string): Promise<string | null> {
    return this.#dpus.identity(dpuId)
  }
  setDpuIdentity(dpuId: string, certificate: string): Promise<void> {
    return this.#dpus.setIdentity(dpuId, certificate)
  }

  // ── the store as a whole ───────────────────────────────────────────────────

  /**
   * This store's epoch: made once, when the store is first used, and kept with its data.
   * A store that lost its data has a new one (each NB records its store's epoch, and
   * reconcile deletes no orphan rows from an NB that records another).
   */
  async epoch(): Promise<string> {
    await this.#redis.set(this.#keys.epoch, randomUUID(), 'NX')
    return (await this.#redis.get(this.#keys.epoch)) ?? ''
  }

  /**
   * Counts the hosts stored before quotas were kept (once per store; idempotent): each
   * live host joins its tenant's `hosts` set, and its `publicIps` set when PublicAccess.
   * Called at start-up, before this controller takes work.
   */
  async countHostsForQuotas(): Promise<void> {
    if ((await this.#redis.set(this.#keys.hostsCountedForQuotas, '1', 'NX')) !== 'OK') return
    for (const group of await this.listGroups()) {
      const hosts = await this.listHosts({ resourceGroup: group.name })
      await countHosts(this.#redis, this.#keys.prefix, group.spec.tenantId, hosts)
    }
  }

  /** The group's DHCP relay id, allocated on first use; undefined for no group. */
  relayIdOf(group: string): Promise<number | undefined> {
    return this.#groupFields.relayIdOf(group)
  }

  /** What the group's members were last sent of its spec (`group-fields.ts`). */
  memberSettingsOf(group: string): Promise<string | undefined> {
    return this.#groupFields.memberSettingsOf(group)
  }

  /** Remembers `settings` as what the group's members were sent; nothing for no group. */
  rememberMemberSettings(group: string, settings: string): Promise<void> {
    return this.#groupFields.rememberMemberSettings(group, settings)
  }

  /**
   * Remembers a webhook delivery id for `ttlS` seconds; false when it was already
   * remembered (a redelivery, to be ignored).
   */
  async rememberDelivery(id: string, ttlS: number): Promise<boolean> {
    return (await this.#redis.set(this.#keys.delivery(id), '1', 'EX', ttlS, 'NX')) === 'OK'
  }
  /** Forgets a delivery id, so that a corrected or retried delivery is processed. */
  async forgetDelivery(id: string): Promise<void> {
    await this.#redis.del(this.#keys.delivery(id))
  }
}
