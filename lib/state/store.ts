/**
 * The desired-state store: ResourceGroups, ManagedResources and DPU records in Redis
 * (the same server as the queues). A spec write bumps `specVersion` only when the spec
 * changed; handlers write status with `observedVersion`. All keys share one hash tag so
 * the store lives in one Redis Cluster slot and its Lua scripts may touch any of them.
 */
import { randomUUID } from 'node:crypto'
import type { Redis } from 'ioredis'
import { HydrazineError } from '../errors.ts'
import { LuaScript } from '../redis/lua-script.ts'
import { DpuHealthRecords } from './dpu-health.ts'
import { EventLog, transitionEvents } from './events.ts'
import { EventGenerations } from './generations.ts'
import { ObjectLocks } from './locks.ts'
import type {
  Dpu,
  DpuSpec,
  DpuStatus,
  ManagedResource,
  ManagedResourceSpec,
  ManagedResourceStatus,
  ResourceGroup,
  ResourceGroupSpec,
  ResourceGroupStatus,
  StoredObject,
} from './objects.ts'
import { ObjectPages } from './pages.ts'
import {
  checkQuotas,
  hostQuotaSets,
  hostQuotaWrite,
  type QuotaGuard,
  type QuotaLimits,
  quotaFailure,
  quotaGuards,
  quotaKeys,
  type TenantQuota,
  uncountHosts,
} from './quotas.ts'

const putSpecScript = new LuaScript(new URL('./lua/put-spec.lua', import.meta.url))
const purgeScript = new LuaScript(new URL('./lua/purge.lua', import.meta.url))
const casFieldScript = new LuaScript(new URL('./lua/cas-field.lua', import.meta.url))
const relayIdScript = new LuaScript(new URL('./lua/relay-id.lua', import.meta.url))

/** The request conflicts with stored state (HTTP 409). */
export class StoreConflict extends HydrazineError {
  constructor(
    message: string,
    readonly reason: 'Terminating' | 'Immutable' | 'Claimed' | 'InUse' | 'Changed',
  ) {
    super('CONFLICT', message)
  }
}

export interface PutResult<T> {
  /** False when the spec was already stored as given: nothing to do. */
  readonly changed: boolean
  readonly object: T
}

export type Kind = 'rg' | 'mr' | 'dpu'

/** A host binding a DPU may still hold after a forced detach. */
export interface StaleBinding {
  readonly group: string
  readonly host: string
  readonly logicalPort: string
  readonly hostPort?: string
  readonly specVersion: number
}

export class StateStore {
  readonly #redis: Redis
  readonly #prefix: string
  /** Each object's recent history; status writes record their transitions here. */
  readonly events: EventLog
  /** One step at a time per object (attach's and detach's converge). */
  readonly locks: ObjectLocks
  /** What `dpu.health` last found of each DPU (its state, repairs in flight). */
  readonly dpuHealth: DpuHealthRecords
  /** The newest webhook event applied per object (stale events are refused). */
  readonly generations: EventGenerations
  /** Pages of groups and hosts, reading only each page's objects. */
  readonly pages: ObjectPages

  /** @param prefix prepended to every key; must contain a `{hash tag}`. Default `hz:{store}:`. */
  constructor(redis: Redis, prefix = 'hz:{store}:') {
    this.#redis = redis
    this.#prefix = prefix
    this.events = new EventLog(redis, prefix)
    this.locks = new ObjectLocks(redis, prefix)
    this.dpuHealth = new DpuHealthRecords(redis, prefix)
    this.generations = new EventGenerations(redis, prefix)
    this.pages = new ObjectPages(
      redis,
      {
        index: (kind) => this.#index(kind),
        members: (group) => this.#members(group),
        tenant: (tenant) => this.#tenant(tenant),
      },
      (kind, names) => this.#getMany(kind, names),
    )
  }

  #key(kind: Kind, name: string): string {
    return `${this.#prefix}${kind}:${name}`
  }
  #index(kind: Kind): string {
    return `${this.#prefix}${kind}:index`
  }
  #members(group: string): string {
    return `${this.#prefix}rg:${group}:members`
  }
  #tenant(tenant: string): string {
    return quotaKeys(this.#prefix, tenant).groups
  }
  #dpuHosts(dpuId: string): string {
    return `${this.#prefix}dpu:${dpuId}:hosts`
  }
  #dpuCentral(dpuId: string): string {
    return `${this.#prefix}dpu:${dpuId}:central`
  }
  #tenantDpus(tenant: string): string {
    return `${this.#prefix}tenant:${tenant}:dpus`
  }
  #claim(what: string): string {
    return `${this.#prefix}claim:${what}`
  }

  /** Redis pub/sub channel announcing every change: `{kind, name}` JSON. */
  get changesChannel(): string {
    return `${this.#prefix}changes`
  }

  async #changed(kind: Kind, name: string): Promise<void> {
    await this.#redis.publish(this.changesChannel, JSON.stringify({ kind, name }))
  }

  /**
   * Stores a group's spec. A new group counts against its tenant's `groups` quota
   * (QuotaExceeded, nothing written, when it is full); without `limits`, no limit.
   */
  async putGroup(
    name: string,
    spec: ResourceGroupSpec,
    limits?: QuotaLimits,
  ): Promise<PutResult<ResourceGroup>> {
    const initial: ResourceGroupStatus = {
      phase: 'Provisioning',
      conditions: [],
      snatIPs: [],
      managedResourceCount: 0,
      observedVersion: 0,
      configsSynced: false,
    }
    const immutable = JSON.stringify([spec.tenantId, spec.network, spec.implementation ?? null])
    const changed = await this.#putSpec({
      kind: 'rg',
      name,
      spec,
      initialStatus: initial,
      immutable,
      indexes: [this.#index('rg'), this.#tenant(spec.tenantId)],
      claims: [],
      guards: limits
        ? quotaGuards(this.#prefix, { tenant: spec.tenantId, limits }, ['groups'])
        : [],
      immutableMessage: `the network, tenant and implementation of resource group ${name} cannot change`,
    })
    return { changed, object: await this.#mustGet('rg', name) }
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
    const initial: ManagedResourceStatus = {
      phase: 'Attaching',
      conditions: [],
      observedVersion: 0,
      configsSynced: false,
    }
    const natIp = spec.hostAccess !== 'None' ? spec.dpu.ips[1] : undefined
    const counted = hostQuotaWrite(this.#prefix, spec, quota)
    const changed = await this.#putSpec({
      kind: 'mr',
      name,
      spec,
      initialStatus: initial,
      immutable: JSON.stringify([spec.resourceGroup, spec.dpu.id, spec.identifier ?? null]),
      indexes: [
        this.#index('mr'),
        this.#members(spec.resourceGroup),
        this.#dpuHosts(spec.dpu.id),
        ...counted.guards.map((g) => g.key),
      ],
      leaves: counted.leaves,
      claims: [
        ...(natIp ? [this.#claim(`natip:${natIp}`)] : []),
        ...(spec.identifier ? [this.#claim(`dpuport:${spec.dpu.id}/${spec.identifier}`)] : []),
      ],
      guards: [
        { key: this.#key('dpu', spec.dpu.id), field: 'specVersion', equals: String(dpuVersion) },
        ...counted.guards,
      ],
      immutableMessage: `managed resource ${name} cannot move to another resource group, DPU or host port; delete it first`,
    })
    return { changed, object: await this.#mustGet('mr', name) }
  }

  /**
   * Stores a DPU's inventory entry. Its fabric IPs and tenant may change only while it
   * serves no host, and a host port may be removed only while no host uses it; a DPU's
   * fabric IPs are its own (no other DPU may list them).
   */
  async putDpu(id: string, spec: DpuSpec): Promise<PutResult<Dpu>> {
    const current = await this.getDpu(id)
    const removedPorts = (current?.spec.hostPorts ?? []).filter((p) => !spec.hostPorts.includes(p))
    const placementChanged =
      current !== undefined &&
      (JSON.stringify(current.spec.fabricIps) !== JSON.stringify(spec.fabricIps) ||
        current.spec.tenantId !== spec.tenantId)
    const changed = await this.#putSpec({
      kind: 'dpu',
      name: id,
      spec,
      initialStatus: { hosts: [] } satisfies DpuStatus,
      immutable: '[]',
      indexes: [this.#index('dpu')],
      claims: spec.fabricIps.map((ip) => this.#claim(`fabricip:${ip}`)),
      guards: [
        ...(placementChanged ? [{ key: this.#dpuHosts(id), absent: true as const }] : []),
        ...removedPorts.map((p) => ({
          key: this.#claim(`dpuport:${id}/${p}`),
          absent: true as const,
        })),
      ],
      immutableMessage: '',
      inUseMessage: `DPU ${id} serves hosts: its fabric IPs, tenant and used host ports cannot change until they are deleted`,
    })
    if (current?.spec.tenantId !== spec.tenantId) {
      if (current?.spec.tenantId)
        await this.#redis.srem(this.#tenantDpus(current.spec.tenantId), id)
      if (spec.tenantId) await this.#redis.sadd(this.#tenantDpus(spec.tenantId), id)
    }
    return { changed, object: await this.#mustGet('dpu', id) }
  }

  /** Refuses (QuotaExceeded) what `putHost` would refuse for a quota, writing nothing. */
  checkHostQuotas(name: string, spec: ManagedResourceSpec, quota: TenantQuota): Promise<void> {
    return checkQuotas(this.#redis, name, hostQuotaWrite(this.#prefix, spec, quota).guards)
  }

  getDpu(id: string): Promise<Dpu | undefined> {
    return this.#get('dpu', id)
  }

  async listDpus(filter: { tenant?: string } = {}): Promise<Dpu[]> {
    const ids = await this.#redis.smembers(
      filter.tenant ? this.#tenantDpus(filter.tenant) : this.#index('dpu'),
    )
    const dpus = await this.#getMany<Dpu>('dpu', ids)
    return filter.tenant ? dpus.filter((d) => d.spec.tenantId === filter.tenant) : dpus
  }

  /** The live hosts a DPU serves. */
  dpuHostNames(id: string): Promise<string[]> {
    return this.#redis.smembers(this.#dpuHosts(id))
  }

  /** Removes a DPU from the inventory; refused (InUse) while it serves a host. */
  async deleteDpu(id: string): Promise<boolean> {
    const dpu = await this.getDpu(id)
    const reply = await purgeScript.run(
      this.#redis,
      [this.#key('dpu', id), this.#index('dpu'), this.#dpuHosts(id)],
      [id, 1],
    )
    if (Array.isArray(reply)) {
      throw new StoreConflict(`DPU ${id} serves hosts; delete them first`, 'InUse')
    }
    if (dpu?.spec.tenantId) await this.#redis.srem(this.#tenantDpus(dpu.spec.tenantId), id)
    await this.#redis.del(this.#dpuCentral(id))
    await this.#changed('dpu', id)
    return Number(reply) === 1
  }

  async #putSpec(put: {
    kind: Kind
    name: string
    spec: unknown
    initialStatus: unknown
    immutable: string
    indexes: string[]
    claims: string[]
    guards?: (
      | { key: string; absent: true }
      | { key: string; field: string; equals: string }
      | QuotaGuard
    )[]
    /** Sets the name leaves when the spec changes. */
    leaves?: string[]
    immutableMessage: string
    inUseMessage?: string
  }): Promise<boolean> {
    const guards = put.guards ?? []
    const leaves = put.leaves ?? []
    const reply = (await putSpecScript.run(
      this.#redis,
      [
        this.#key(put.kind, put.name),
        `${this.#prefix}version:${put.kind}:${put.name}`,
        ...put.indexes,
        ...put.claims,
        ...guards.map((g) => g.key),
        ...leaves,
      ],
      [
        put.name,
        JSON.stringify(put.spec),
        new Date().toISOString(),
        JSON.stringify(put.initialStatus),
        put.immutable,
        put.indexes.length,
        this.#claim(''),
        put.claims.length,
        JSON.stringify(guards.map(({ key: _key, ...guard }) => guard)),
        leaves.length,
      ],
    )) as [string, ...(string | number)[]]
    switch (reply[0]) {
      case 'ok':
        if (Number(reply[1]) === 1) await this.#changed(put.kind, put.name)
        return Number(reply[1]) === 1
      case 'terminating':
        throw new StoreConflict(`${put.name} is being deleted; it cannot change`, 'Terminating')
      case 'immutable':
        throw new StoreConflict(put.immutableMessage, 'Immutable')
      case 'claimed': {
        // The holder is not named: it may be another tenant's object.
        const [what, value] = String(reply[1]).slice(this.#claim('').length).split(/:(.*)/s)
        throw new StoreConflict(
          `${CLAIM_WHAT[what ?? ''] ?? what} ${value} is already in use`,
          'Claimed',
        )
      }
      case 'quota':
        throw quotaFailure(guards, String(reply[1]))
      case 'guard': {
        const key = String(reply[1])
        if (key.startsWith(this.#key('dpu', ''))) {
          throw new StoreConflict(
            'the DPU changed while the request was checked against it; send it again',
            'Changed',
          )
        }
        throw new StoreConflict(put.inUseMessage ?? `${put.name} is in use`, 'InUse')
      }
      default:
        throw new Error(`unexpected put-spec reply ${JSON.stringify(reply)}`)
    }
  }

  getGroup(name: string): Promise<ResourceGroup | undefined> {
    return this.#get('rg', name)
  }
  getHost(name: string): Promise<ManagedResource | undefined> {
    return this.#get('mr', name)
  }

  async listGroups(filter: { tenant?: string } = {}): Promise<ResourceGroup[]> {
    const names = await this.#redis.smembers(
      filter.tenant ? this.#tenant(filter.tenant) : this.#index('rg'),
    )
    return this.#getMany('rg', names)
  }

  async listHosts(filter: { resourceGroup?: string } = {}): Promise<ManagedResource[]> {
    const names = await this.#redis.smembers(
      filter.resourceGroup ? this.#members(filter.resourceGroup) : this.#index('mr'),
    )
    return this.#getMany('mr', names)
  }

  /** Many objects in one round trip (a pipeline of HGETALLs), sorted by name. */
  async #getMany<T extends StoredObject<unknown, unknown>>(kind: Kind, names: string[]) {
    const sorted = [...names].sort()
    const pipeline = this.#redis.pipeline()
    for (const name of sorted) pipeline.hgetall(this.#key(kind, name))
    const replies = (await pipeline.exec()) ?? []
    const objects: T[] = []
    for (const [i, [error, hash]] of replies.entries()) {
      if (error) throw error
      const object = decode<T>(sorted[i] ?? '', hash as Record<string, string>)
      if (object) objects.push(object)
    }
    return objects
  }

  async #get<T>(kind: Kind, name: string): Promise<T | undefined> {
    return decode<T>(name, await this.#redis.hgetall(this.#key(kind, name)))
  }

  async #mustGet<T>(kind: Kind, name: string): Promise<T> {
    const object = await this.#get<T>(kind, name)
    if (!object) throw new Error(`${kind} ${name} vanished while being written`)
    return object
  }

  /**
   * Marks an object for deletion (idempotent; `force` can be raised, never lowered).
   * Returns the object, or undefined when there is none.
   */
  async requestDeletion(
    kind: Kind,
    name: string,
    force: boolean,
  ): Promise<StoredObject<unknown, unknown> | undefined> {
    let result: StoredObject<unknown, unknown> | undefined
    await this.#casField(kind, name, 'deletion', (current) => {
      const deletion = {
        requestedAt: current.deletion?.requestedAt ?? new Date().toISOString(),
        force: force || (current.deletion?.force ?? false),
      }
      result = { ...current, deletion }
      return deletion
    })
    return result
  }

  /**
   * Read-modify-write of an object's status, retried on concurrent writes. `update`
   * gets the current object and returns the new status, or undefined to leave it.
   */
  async updateStatus<S>(
    kind: Kind,
    name: string,
    update: (current: StoredObject<unknown, S>) => S | undefined,
  ): Promise<S | undefined> {
    let before: S | undefined
    const next = await this.#casField<S, S>(kind, name, 'status', (current) => {
      before = current.status
      return update(current)
    })
    if (next !== undefined && isObserved(next)) {
      const events = transitionEvents(isObserved(before) ? before : undefined, next)
      await this.events.record(kind, name, ...events)
    }
    return next
  }

  async #casField<S, V>(
    kind: Kind,
    name: string,
    field: 'status' | 'deletion',
    update: (current: StoredObject<unknown, S>) => V | undefined,
  ): Promise<V | undefined> {
    const key = this.#key(kind, name)
    for (;;) {
      const rev = (await this.#redis.hget(key, `${field}Rev`)) ?? '0'
      const current = await this.#get<StoredObject<unknown, S>>(kind, name)
      const next = current ? update(current) : undefined
      if (next === undefined) return undefined
      const written = Number(
        await casFieldScript.run(this.#redis, [key], [field, rev, JSON.stringify(next)]),
      )
      if (written === 1) {
        await this.#changed(kind, name)
        return next
      }
      if (written === -1) return undefined
    }
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

  /** Removes a host for good (after it was isolated), releasing its claims and quota. */
  async purgeHost(name: string, group: string, dpuId: string): Promise<boolean> {
    // Its group outlives it; had the group gone first, purgeGroup uncounted the host.
    const tenant = (await this.getGroup(group))?.spec.tenantId
    const counted = tenant === undefined ? [] : hostQuotaSets(this.#prefix, tenant)
    const reply = await purgeScript.run(
      this.#redis,
      [
        this.#key('mr', name),
        this.#index('mr'),
        this.#members(group),
        this.#dpuHosts(dpuId),
        ...counted,
      ],
      [name, 3 + counted.length],
    )
    await this.events.remove('mr', name)
    await this.#retireVersion('mr', name)
    await this.#changed('mr', name)
    return Number(reply) === 1
  }

  /**
   * A purged object's version counter is kept while jobs named after its versions may
   * still be in the queue (failed ones are kept 7 days), then it expires: the store does
   * not grow with every name ever used.
   */
  async #retireVersion(kind: Kind, name: string): Promise<void> {
    await this.#redis.pexpire(`${this.#prefix}version:${kind}:${name}`, VERSION_KEPT_MS)
  }

  /** Removes a group for good (after every host was isolated). */
  async purgeGroup(name: string, tenant: string): Promise<boolean> {
    const reply = await purgeScript.run(
      this.#redis,
      [this.#key('rg', name), this.#index('rg'), this.#tenant(tenant)],
      [name, 2],
    )
    await uncountHosts(this.#redis, this.#prefix, tenant, await this.memberNames(name))
    await this.#redis.del(this.#members(name))
    await this.events.remove('rg', name)
    await this.#retireVersion('rg', name)
    await this.#changed('rg', name)
    return Number(reply) === 1
  }

  /**
   * This store's epoch: made once, when the store is first used, and kept with its data.
   * A store that lost its data has a new one (each NB records its store's epoch, and
   * reconcile deletes no orphan rows from an NB that records another).
   */
  async epoch(): Promise<string> {
    await this.#redis.set(`${this.#prefix}epoch`, randomUUID(), 'NX')
    return (await this.#redis.get(`${this.#prefix}epoch`)) ?? ''
  }

  /**
   * Counts the hosts stored before quotas were kept (once per store; idempotent): each
   * live host joins its tenant's `hosts` set, and its `publicIps` set when PublicAccess.
   * Called at start-up, before this controller takes work.
   */
  async countHostsForQuotas(): Promise<void> {
    if ((await this.#redis.set(`${this.#prefix}quota-sets-v1`, '1', 'NX')) !== 'OK') return
    for (const group of await this.listGroups()) {
      const hosts = await this.listHosts({ resourceGroup: group.name })
      if (hosts.length === 0) continue
      const keys = quotaKeys(this.#prefix, group.spec.tenantId)
      const publicAccess = hosts.filter((h) => h.spec.hostAccess === 'PublicAccess')
      const pipeline = this.#redis.pipeline().sadd(keys.hosts, ...hosts.map((h) => h.name))
      if (publicAccess.length > 0) pipeline.sadd(keys.publicIps, ...publicAccess.map((h) => h.name))
      await pipeline.exec()
    }
  }

  /** Names of the hosts that belong to a group. */
  memberNames(group: string): Promise<string[]> {
    return this.#redis.smembers(this.#members(group))
  }

  /**
   * A host was force-detached while its DPU's agent did not answer: the DPU may still
   * forward its port, so it must isolate that host before it serves anyone else.
   */
  async markDpuNeedsIsolation(dpuId: string, stale: StaleBinding): Promise<void> {
    await this.#redis.hset(this.#needsIsolation(dpuId), stale.host, JSON.stringify(stale))
  }
  async dpuNeedsIsolation(dpuId: string): Promise<StaleBinding[]> {
    const entries = await this.#redis.hvals(this.#needsIsolation(dpuId))
    return entries.map((e) => JSON.parse(e) as StaleBinding)
  }
  async clearDpuNeedsIsolation(dpuId: string, host: string): Promise<void> {
    await this.#redis.hdel(this.#needsIsolation(dpuId), host)
  }
  /** The group whose own central the DPU's chassis follows (null: none recorded). */
  dpuCentral(dpuId: string): Promise<string | null> {
    return this.#redis.get(this.#dpuCentral(dpuId))
  }
  /** Records that the DPU's chassis now follows `group`'s own central. */
  async setDpuCentral(dpuId: string, group: string): Promise<void> {
    await this.#redis.set(this.#dpuCentral(dpuId), group)
  }

  /**
   * The group's DHCP relay id: allocated on first use from a counter that never repeats,
   * so two groups never share a relay port name (circuit id). Undefined for no group.
   */
  async relayIdOf(group: string): Promise<number | undefined> {
    const id = await relayIdScript.run(
      this.#redis,
      [this.#key('rg', group), `${this.#prefix}relay-ids`],
      [],
    )
    return typeof id === 'number' ? id : undefined
  }

  /**
   * Remembers a webhook delivery id for `ttlS` seconds; false when it was already
   * remembered (a redelivery, to be ignored).
   */
  async rememberDelivery(id: string, ttlS: number): Promise<boolean> {
    return (await this.#redis.set(this.#delivery(id), '1', 'EX', ttlS, 'NX')) === 'OK'
  }
  /** Forgets a delivery id, so that a corrected or retried delivery is processed. */
  async forgetDelivery(id: string): Promise<void> {
    await this.#redis.del(this.#delivery(id))
  }
  #delivery(id: string): string {
    return `${this.#prefix}delivery:${id}`
  }

  #needsIsolation(dpuId: string): string {
    return `${this.#prefix}dpu:${dpuId}:needs-isolation`
  }
}

/** How long a purged object's version counter outlives it: longer than any of its jobs. */
const VERSION_KEPT_MS = 8 * 24 * 3600 * 1000

/** How a claim's kind reads in a conflict message. */
const CLAIM_WHAT: Readonly<Record<string, string>> = {
  natip: 'NAT IP',
  fabricip: 'fabric IP',
  dpuport: 'DPU host port',
}

/** A status with a phase and conditions (groups' and hosts'), whose changes are events. */
function isObserved(status: unknown): status is Parameters<typeof transitionEvents>[1] {
  return (
    typeof status === 'object' &&
    status !== null &&
    typeof (status as { phase?: unknown }).phase === 'string' &&
    Array.isArray((status as { conditions?: unknown }).conditions)
  )
}

function decode<T>(name: string, h: Record<string, string>): T | undefined {
  if (!h.spec) return undefined
  return {
    name,
    spec: JSON.parse(h.spec),
    specVersion: Number(h.specVersion),
    status: JSON.parse(h.status ?? '{}'),
    ...(h.deletion ? { deletion: JSON.parse(h.deletion) } : {}),
    createdAt: h.createdAt ?? '',
    updatedAt: h.updatedAt ?? '',
  } as T
}
