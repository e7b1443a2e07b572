/**
 * The DPUs as the store keeps them: the operator's inventory (read, listed, deleted; its
 * writes are spec writes, `spec-writes.ts`), the hosts each one serves, the group whose
 * own central its chassis follows, and the hosts a forced detach left it to isolate.
 */

import type { Dpu } from '../model/objects.ts'
import type { RedisClient } from '../redis/connection.ts'
import { LuaScript } from '../redis/lua-script.ts'
import type { ObjectRecords } from './object-records.ts'
import { StoreConflict } from './spec-writes.ts'
import type { StoreKeys } from './store-keys.ts'

const purgeScript = new LuaScript(new URL('./lua/purge.lua', import.meta.url))

/** A host binding a DPU may still hold after a forced detach. */
export interface StaleBinding {
  readonly group: string
  readonly host: string
  readonly logicalPort: string
  readonly hostPort?: string
  readonly specVersion: number
}

export class DpuInventory {
  readonly #redis: RedisClient
  readonly #keys: StoreKeys
  readonly #records: ObjectRecords

  constructor(redis: RedisClient, keys: StoreKeys, records: ObjectRecords) {
    this.#redis = redis
    this.#keys = keys
    this.#records = records
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

  /** Removes a DPU from the inventory; refused (InUse) while it serves a host. */
  async delete(id: string): Promise<boolean> {
    const keys = this.#keys
    const dpu = await this.get(id)
    const reply = await purgeScript.run(
      this.#redis,
      [keys.object('dpu', id), keys.index('dpu'), keys.dpuHosts(id)],
      [id, 1],
    )
    if (Array.isArray(reply)) {
      throw new StoreConflict(`DPU ${id} serves hosts; delete them first`, 'InUse')
    }
    if (dpu?.spec.tenantId) await this.#redis.srem(keys.tenantDpus(dpu.spec.tenantId), id)
    await this.#redis.del(keys.dpuCentral(id), keys.dpuIdentity(id))
    await this.#records.changed('dpu', id, dpu?.spec.tenantId ? { tenant: dpu.spec.tenantId } : {})
    return Number(reply) === 1
  }

  /** Records a host the DPU must isolate before it serves anyone else. */
  async markNeedsIsolation(dpuId: string, stale: StaleBinding): Promise<void> {
    await this.#redis.hset(this.#keys.needsIsolation(dpuId), stale.host, JSON.stringify(stale))
  }
  async needsIsolation(dpuId: string): Promise<StaleBinding[]> {
    const entries = await this.#redis.hvals(this.#keys.needsIsolation(dpuId))
    return entries.map((e) => JSON.parse(e) as StaleBinding)
  }
  async clearNeedsIsolation(dpuId: string, host: string): Promise<void> {
    await this.#redis.hdel(this.#keys.needsIsolation(dpuId), host)
  }

  /** The group whose own central the DPU's chassis follows (null: none recorded). */
  central(dpuId: string): Promise<string | null> {
    return this.#redis.get(this.#keys.dpuCentral(dpuId))
  }
  async setCentral(dpuId: string, group: string): Promise<void> {
    await this.#redis.set(this.#keys.dpuCentral(dpuId), group)
  }
  /** The DPU's certificate from Hydrazine's CA (PEM), as last issued; null: none. */
  identity(dpuId: string): Promise<string | null> {
    return this.#redis.get(this.#keys.dpuIdentity(dpuId))
  }
  async setIdentity(dpuId: string, certificate: string): Promise<void> {
    await this.#redis.set(this.#keys.dpuIdentity(dpuId), certificate)
  }
}
