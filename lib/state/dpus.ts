/**
 * The DPUs as the store keeps them: the operator's inventory (stored through spec writes,
 * `spec-writes.ts`; read, listed, deleted with its history), the hosts each one serves, the
 * group whose own central its chassis follows, its certificate, and the hosts a forced
 * detach left it to isolate.
 */

import type { Dpu, DpuSpec } from '../model/objects.ts'
import type { RedisClient } from '../redis/connection.ts'
import { LuaScript } from '../redis/lua-script.ts'
import type { EventLog } from './events.ts'
import type { ObjectRecords } from './object-records.ts'
import type { StoreParts } from './parts.ts'
import { type PutResult, type SpecWrites, StoreConflict } from './spec-writes.ts'
import type { StoreKeys } from './store-keys.ts'

const purgeScript = new LuaScript(new URL('./lua/purge.lua', import.meta.url))
const holdScript = new LuaScript(new URL('./lua/isolation-hold.lua', import.meta.url))
const identityScript = new LuaScript(new URL('./lua/identity-replace.lua', import.meta.url))

/** A host binding a DPU may still hold after a forced detach. */
export interface StaleBinding {
  readonly group: string
  readonly host: string
  readonly logicalPort: string
  readonly hostPort?: string
  readonly specVersion: number
  /**
   * A Fabric group's host: its port may still be in the group's VRF (VNI `vni`) and its
   * addresses announced from there.
   */
  readonly fabric?: { readonly vni: number; readonly addresses: readonly string[] }
}

/** A DPU's pending isolation: a stale binding and the entry it is kept under. */
export interface PendingIsolation extends StaleBinding {
  /** The entry's name (`isolationMark`, or the host's name in an older store). */
  readonly mark: string
}

/**
 * The entry a stale binding is kept under: its host, spec version and group, as the
 * `isolate` that undoes it is named (a host's spec version never repeats while its jobs
 * are kept). A host name has no `:`, so no two bindings share one. Pure.
 *
 * @example isolationMark({ host: 'h1', group: 'tenant-a/net', specVersion: 4 }) // 'h1:v4:tenant-a/net'
 */
export function isolationMark(stale: Pick<StaleBinding, 'host' | 'group' | 'specVersion'>): string {
  return `${stale.host}:v${stale.specVersion}:${stale.group}`
}

export class DpuRepository {
  readonly #redis: RedisClient
  readonly #keys: StoreKeys
  readonly #records: ObjectRecords
  readonly #specs: SpecWrites
  readonly #events: EventLog

  constructor(parts: StoreParts) {
    this.#redis = parts.redis
    this.#keys = parts.keys
    this.#records = parts.records
    this.#specs = parts.specs
    this.#events = parts.events
  }

  /**
   * Stores a DPU's inventory entry. Its fabric IPs and tenant may change only while it
   * serves no host, and a host port may be removed only while no host uses it; a DPU's
   * fabric IPs are its own (no other DPU may list them). A DPU handed to another tenant
   * (or to none) starts a new history: its events name the hosts and groups it served.
   */
  async put(id: string, spec: DpuSpec): Promise<PutResult<Dpu>> {
    const before = await this.get(id)
    const put = await this.#specs.dpu(id, spec)
    if (before && before.spec.tenantId !== spec.tenantId) await this.#events.remove('dpu', id)
    return put
  }

  get(id: string): Promise<Dpu | undefined> {
    return this.#records.get('dpu', id)
  }

  async list(filter: { tenant?: string } = {}): Promise<Dpu[]> {
    const ids = await this.#redis.smembers(
      filter.tenant ? this.#keys.tenantDpus(filter.tenant) : this.#keys.index('dpu'),
    )
    const dpus = await this.#records.getMany<Dpu>('dpu', ids)
    return filter.tenant ? dpus.filter((d) => d.spec.tenantId === filter.tenant) : dpus
  }

  /** The live hosts a DPU serves. */
  hostNames(id: string): Promise<string[]> {
    return this.#redis.smembers(this.#keys.dpuHosts(id))
  }

  /**
   * Removes a DPU from the inventory, and its history; refused (InUse) while it serves a
   * host.
   */
  async delete(id: string): Promise<boolean> {
    const keys = this.#keys
    const dpu = await this.get(id)
    const log = this.#records.log.removal('dpu', id, dpu?.spec.tenantId)
    const reply = await purgeScript.run(
      this.#redis,
      [keys.object('dpu', id), keys.index('dpu'), keys.dpuHosts(id), log.key],
      [id, 1, 'log', log.keep, ...log.fields],
    )
    if (Array.isArray(reply)) {
      throw new StoreConflict(`DPU ${id} serves hosts; delete them first`, 'InUse')
    }
    if (dpu?.spec.tenantId) await this.#redis.srem(keys.tenantDpus(dpu.spec.tenantId), id)
    await this.#redis.del(keys.dpuCentral(id), keys.dpuIdentity(id))
    await this.#events.remove('dpu', id)
    return Number(reply) === 1
  }

  /**
   * A host was force-detached while its DPU's agent did not answer: the DPU may still
   * forward its port, so it must isolate that host before it serves anyone else. Each
   * binding is its own entry (`isolationMark`): a host of the same name detached again, in
   * the same group or another, adds one and overwrites none.
   */
  async markNeedsIsolation(dpuId: string, stale: StaleBinding): Promise<void> {
    await this.#redis.hset(
      this.#keys.needsIsolation(dpuId),
      isolationMark(stale),
      JSON.stringify(stale),
    )
  }
  /**
   * The DPU's pending isolations, oldest spec version first. An entry kept under its host's
   * name (as stores before `isolationMark` kept them) is one entry too.
   */
  async needsIsolation(dpuId: string): Promise<PendingIsolation[]> {
    const entries = await this.#redis.hgetall(this.#keys.needsIsolation(dpuId))
    return Object.entries(entries)
      .map(([mark, kept]) => ({ ...(JSON.parse(kept) as StaleBinding), mark }))
      .sort((a, b) => a.specVersion - b.specVersion || a.mark.localeCompare(b.mark))
  }
  /** Drops one pending isolation: the entry `mark` names, no other of the same host. */
  async clearNeedsIsolation(dpuId: string, mark: string): Promise<void> {
    await this.#redis.hdel(this.#keys.needsIsolation(dpuId), mark)
  }

  /**
   * Records that `owner` (`isolationHoldOwner`) holds, for this DPU's pending isolation of
   * `host`, what the host leaked or was given (`isolation-holds.ts`).
   */
  async recordIsolationHold(dpuId: string, owner: string, host: string): Promise<void> {
    await this.#hold('record', dpuId, owner, host)
  }
  /** The holds this DPU's pending isolations keep: each owner with its host. */
  async isolationHolds(dpuId: string): Promise<{ owner: string; host: string }[]> {
    const holds = await this.#redis.hgetall(this.#keys.isolationHolds(dpuId))
    return Object.entries(holds).map(([owner, host]) => ({ owner, host }))
  }
  /** Whether the hold `owner` of this DPU is recorded (it is before anything moves to it). */
  async holdsIsolation(dpuId: string, owner: string): Promise<boolean> {
    return (await this.#redis.hexists(this.#keys.isolationHolds(dpuId), owner)) === 1
  }
  /** Drops the record of a hold; true when this call dropped it (not another run first). */
  async dropIsolationHold(dpuId: string, owner: string): Promise<boolean> {
    return (await this.#hold('drop', dpuId, owner, '')) === 1
  }
  /** The DPUs whose pending isolations keep any hold (one read). */
  dpusHolding(): Promise<string[]> {
    return this.#redis.smembers(this.#keys.dpusHolding)
  }
  async #hold(action: 'record' | 'drop', dpuId: string, owner: string, host: string) {
    return holdScript.run(
      this.#redis,
      [this.#keys.isolationHolds(dpuId), this.#keys.dpusHolding],
      [action, dpuId, owner, host],
    )
  }

  /** The group whose own central the DPU's chassis follows (null: none recorded). */
  central(dpuId: string): Promise<string | null> {
    return this.#redis.get(this.#keys.dpuCentral(dpuId))
  }
  async setCentral(dpuId: string, group: string): Promise<void> {
    await this.#redis.set(this.#keys.dpuCentral(dpuId), group)
  }
  /**
   * The DPU's certificate from Hydrazine's CA (PEM, public), as last issued with its
   * credentials; null when none was (no PKI, or issued before this was kept). A group's
   * own central certifies its key for the group's SB.
   */
  identity(dpuId: string): Promise<string | null> {
    return this.#redis.get(this.#keys.dpuIdentity(dpuId))
  }
  /** Records the certificate just issued with the DPU's credentials (the operator's word). */
  async setIdentity(dpuId: string, certificate: string): Promise<void> {
    await this.#redis.set(this.#keys.dpuIdentity(dpuId), certificate)
  }
  /**
   * Records `certificate` in place of `read` (null: none), the record the caller decided
   * from; false, recording nothing, when it changed since (another decision, or new
   * credentials, came first): the caller reads again and decides again.
   */
  async replaceIdentity(dpuId: string, read: string | null, certificate: string): Promise<boolean> {
    const replaced = await identityScript.run(
      this.#redis,
      [this.#keys.dpuIdentity(dpuId)],
      [read ?? '', certificate],
    )
    return replaced === 1
  }
}
