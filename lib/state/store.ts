/**
 * The desired-state store: ResourceGroups, ManagedResources and DPU records in Redis
 * (the same server as the queues). A spec write bumps `specVersion` only when the spec
 * changed; handlers write status with `observedVersion`. All keys share one hash tag so
 * the store lives in one Redis Cluster slot and its Lua scripts may touch any of them.
 *
 * `StateStore` builds, on one Redis and key prefix, the small repositories callers use:
 * `groups` (`groups.ts`), `hosts` (`hosts.ts`), `dpus` (`dpus.ts`), `quotas`
 * (`quota-counts.ts`), `deliveries` (`deliveries.ts`) and `objects`, the writes every kind
 * takes alike (`object-writes.ts`); beside them each object's events, locks, leases, what
 * `dpu.health` found, webhook generations, pages and the change log. Behind the
 * repositories: the key layout (`store-keys.ts`), object hashes and compare-and-set
 * (`object-records.ts`), spec writes with their claims, guards and quotas
 * (`spec-writes.ts`) and deletion (`deletion.ts`).
 *
 * @example
 * const store = new StateStore(redis)
 * const host = await store.hosts.get('host-1')
 * const members = await store.groups.memberNames('group-1')
 */
import { randomUUID } from 'node:crypto'
import type { RedisClient } from '../redis/connection.ts'
import { CentralSlots } from './centrals.ts'
import type { ChangeLog } from './changes.ts'
import { ObjectDeletion } from './deletion.ts'
import { DeliveryRepository } from './deliveries.ts'
import { DpuHealthRecords } from './dpu-health.ts'
import { DpuRepository } from './dpus.ts'
import { EventLog } from './events.ts'
import { FabricLeaks } from './fabric-leaks.ts'
import { EventGenerations } from './generations.ts'
import { GroupRepository } from './groups.ts'
import { HostRepository } from './hosts.ts'
import { Leases } from './leases.ts'
import { ObjectLocks } from './locks.ts'
import { ObjectRecords } from './object-records.ts'
import { ObjectWrites } from './object-writes.ts'
import { ObjectPages } from './pages.ts'
import type { StoreParts } from './parts.ts'
import { QuotaCounts } from './quota-counts.ts'
import { SpecWrites } from './spec-writes.ts'
import { StoreKeys } from './store-keys.ts'

export type { CentralRelease } from './centrals.ts'
export type { PendingIsolation, StaleBinding } from './dpus.ts'
export type { LeakClaim } from './fabric-leaks.ts'
export { type PutResult, StoreConflict } from './spec-writes.ts'
export type { Kind } from './store-keys.ts'

export class StateStore {
  readonly #redis: RedisClient
  readonly #keys: StoreKeys
  readonly #records: ObjectRecords
  /** ResourceGroups: specs, reads, status, purge, relay id and member settings. */
  readonly groups: GroupRepository
  /** ManagedResources: specs with their checks, reads (kept decoded per group/DPU), status. */
  readonly hosts: HostRepository
  /** The DPU inventory and what the store keeps per DPU (central, identity, isolation). */
  readonly dpus: DpuRepository
  /** The quota counts kept beside the objects. */
  readonly quotas: QuotaCounts
  /** The groups holding an OVN central slot, when centrals run on demand. */
  readonly centrals: CentralSlots
  /** Webhook deliveries already applied (redeliveries are ignored). */
  readonly deliveries: DeliveryRepository
  /** Status and deletion requests, for any kind of object. */
  readonly objects: ObjectWrites
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
  /** The addresses Fabric hosts leak at the fabric's border, each held by one host. */
  readonly fabricLeaks: FabricLeaks
  /** Pages of groups and hosts, reading only each page's objects. */
  readonly pages: ObjectPages

  /** @param prefix prepended to every key; must contain a `{hash tag}`. Default `hz:{store}:`. */
  constructor(redis: RedisClient, prefix = 'hz:{store}:') {
    const keys = new StoreKeys(prefix)
    const records = new ObjectRecords(redis, keys)
    const events = new EventLog(redis, prefix)
    const deletion = new ObjectDeletion(redis, keys, records, events)
    const writes = new ObjectWrites(records, events, deletion)
    const specs = new SpecWrites(redis, keys, records)
    const parts: StoreParts = { redis, keys, records, specs, events, writes, deletion }
    this.#redis = redis
    this.#keys = keys
    this.#records = records
    this.events = events
    this.objects = writes
    this.groups = new GroupRepository(parts)
    this.hosts = new HostRepository(parts)
    this.dpus = new DpuRepository(parts)
    this.quotas = new QuotaCounts(redis, keys, this.groups, this.hosts)
    this.deliveries = new DeliveryRepository(redis, keys)
    this.centrals = new CentralSlots(redis, keys)
    this.locks = new ObjectLocks(redis, prefix)
    this.leases = new Leases(redis, prefix)
    this.dpuHealth = new DpuHealthRecords(redis, prefix)
    this.generations = new EventGenerations(redis, prefix)
    this.fabricLeaks = new FabricLeaks(redis, prefix)
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

  /**
   * This store's epoch: made once, when the store is first used, and kept with its data.
   * A store that lost its data has a new one (each NB records its store's epoch, and
   * reconcile deletes no orphan rows from an NB that records another).
   */
  async epoch(): Promise<string> {
    await this.#redis.set(this.#keys.epoch, randomUUID(), 'NX')
    return (await this.#redis.get(this.#keys.epoch)) ?? ''
  }
}
