/**
 * The stored ManagedResources (hosts): their specs with the claims, guards and quotas a
 * write checks (`spec-writes.ts`), reads, status and purge; and the host sets kept decoded
 * between reads (a group's members, a DPU's hosts): each host is read again only once it
 * changed (a group's: once the store's change log names it), and only the most recently
 * read sets are kept.
 */
import type {
  ManagedResource,
  ManagedResourceSpec,
  ManagedResourceStatus,
  StoredObject,
} from '../model/objects.ts'
import type { TenantQuota } from '../model/quotas.ts'
import type { RedisClient } from '../redis/connection.ts'
import { LuaScript } from '../redis/lua-script.ts'
import type { ObjectDeletion } from './deletion.ts'
import type { EventLog } from './events.ts'
import type { KeptObject, ObjectRecords } from './object-records.ts'
import type { ObjectWrites } from './object-writes.ts'
import type { StoreParts } from './parts.ts'
import type { PutResult, SpecWrites } from './spec-writes.ts'
import type { StoreKeys } from './store-keys.ts'

/** Groups and DPUs whose hosts are kept decoded at most (the most recently read). */
const KEPT_SETS = 4096

const membersChangedScript = new LuaScript(new URL('./lua/members-changed.lua', import.meta.url))

/**
 * A group's kept hosts are compared whole (every member's revision) at least this often,
 * beside what the change log names: a change made by hand in Redis, outside the store's
 * scripts, is picked up within this time.
 */
const WHOLE_READ_MS = 60_000

/**
 * The most change log entries an incremental read of a group looks at; a group read less
 * often than that many changes is read whole (every member's revision), as the first time.
 */
const CHANGES_PER_READ = 5000

/** A group's hosts kept decoded, as fresh as the change log's `version`. */
interface KeptGroup {
  version: string
  readonly hosts: Map<string, KeptObject<ManagedResource>>
  /** The hosts sorted by name; undefined once they changed (sorted again on the next read). */
  sorted: ManagedResource[] | undefined
  /** When every member's revision was last compared (`performance.now()`). */
  readonly wholeAt: number
}

export class HostRepository {
  readonly #redis: RedisClient
  readonly #keys: StoreKeys
  readonly #records: ObjectRecords
  readonly #specs: SpecWrites
  readonly #events: EventLog
  readonly #writes: ObjectWrites
  readonly #deletion: ObjectDeletion
  /** Per DPU (`dpu:<id>`), its hosts kept decoded. */
  readonly #keptSets = new Map<string, Map<string, KeptObject<ManagedResource>>>()
  /** Per group, its hosts kept decoded (`inGroup`). */
  readonly #keptGroups = new Map<string, KeptGroup>()
  /** Per group, the read of its hosts under way: reads of one group take turns. */
  readonly #groupReads = new Map<string, Promise<unknown>>()

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
   * The hosts of a group, sorted by name, as fresh as `list({ resourceGroup })` reads them,
   * for a caller that reads the same group over and over (every apply of its topology):
   * they are kept decoded, and a read asks the store's change log which of the group's
   * hosts changed since the last one (`members-changed.lua`) and reads only those. A read
   * of a 1,000-host group where 5 hosts changed is two round trips with small replies, not
   * 1,000 revisions. The first read, one after the log was trimmed past the last, or
   * after `WHOLE_READ_MS`, compares every member's revision instead. Read-only objects.
   */
  inGroup(group: string): Promise<ManagedResource[]> {
    const reads = this.#groupReads
    const read = (reads.get(group) ?? Promise.resolve())
      .catch(() => undefined)
      .then(() => this.#readGroup(group))
    reads.set(group, read)
    const forget = () => {
      if (reads.get(group) === read) reads.delete(group)
    }
    read.then(forget, forget)
    return read
  }

  async #readGroup(group: string): Promise<ManagedResource[]> {
    const kept = this.#keptGroups.get(group)
    const fresh = kept && performance.now() - kept.wholeAt < WHOLE_READ_MS
    const changed = fresh ? await this.#changedInGroup(group, kept.version) : undefined
    if (!kept || !changed) return this.#readGroupWhole(group, kept)
    if (changed.names.length > 0) {
      const read = await this.#records.readKept<ManagedResource>('mr', changed.names)
      for (const name of changed.names) {
        const host = read.get(name)
        if (host?.object.spec.resourceGroup === group) kept.hosts.set(name, host)
        else kept.hosts.delete(name)
      }
      kept.sorted = undefined
    }
    kept.version = changed.version
    this.#keepGroup(group, kept)
    kept.sorted ??= [...kept.hosts.keys()].sort().flatMap((n) => kept.hosts.get(n)?.object ?? [])
    return [...kept.sorted]
  }

  /** Every member's revision compared; the log's version taken first, so nothing is missed. */
  async #readGroupWhole(group: string, kept: KeptGroup | undefined): Promise<ManagedResource[]> {
    const version = await this.#records.log.latest()
    const names = await this.#redis.smembers(this.#keys.members(group))
    const { objects, keep } = await this.#records.getManyKept<ManagedResource>(
      'mr',
      names,
      kept?.hosts ?? new Map(),
    )
    this.#keepGroup(group, { version, hosts: keep, sorted: objects, wholeAt: performance.now() })
    return [...objects]
  }

  /** What `members-changed.lua` names since `version`; undefined: read the group whole. */
  async #changedInGroup(
    group: string,
    version: string,
  ): Promise<{ version: string; names: string[] } | undefined> {
    const reply = (await membersChangedScript.run(
      this.#redis,
      [this.#records.log.key, this.#keys.members(group)],
      [version, 'mr', CHANGES_PER_READ],
    )) as string[]
    const [answer, now, ...names] = reply
    return answer === 'ok' && now !== undefined ? { version: now, names } : undefined
  }

  /** Keeps a group's hosts, the most recently read group last, within `KEPT_SETS`. */
  #keepGroup(group: string, kept: KeptGroup): void {
    const groups = this.#keptGroups
    groups.delete(group)
    groups.set(group, kept)
    for (const old of groups.keys()) {
      if (groups.size <= KEPT_SETS) break
      groups.delete(old)
    }
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
