/**
 * Deleting groups and hosts in two stages: the deletion mark a request sets (the object
 * turns read-only and its jobs tear it down), then the purge once it is torn down, which
 * removes the object, its indexes, claims, quota counts and events. A purged object's
 * version counter is kept while jobs named after its versions may still be queued.
 */

import type { ResourceGroup, StoredObject } from '../model/objects.ts'
import type { RedisClient } from '../redis/connection.ts'
import { LuaScript } from '../redis/lua-script.ts'
import type { EventLog } from './events.ts'
import type { ObjectRecords } from './object-records.ts'
import { hostQuotaSets, uncountHosts } from './quotas.ts'
import type { Kind, StoreKeys } from './store-keys.ts'

const purgeScript = new LuaScript(new URL('./lua/purge.lua', import.meta.url))

/**
 * How long a purged object's version counter outlives it: longer than any of its jobs
 * (failed ones are kept 7 days).
 */
const VERSION_KEPT_MS = 8 * 24 * 3600 * 1000

export class ObjectDeletion {
  readonly #redis: RedisClient
  readonly #keys: StoreKeys
  readonly #records: ObjectRecords
  readonly #events: EventLog

  constructor(redis: RedisClient, keys: StoreKeys, records: ObjectRecords, events: EventLog) {
    this.#redis = redis
    this.#keys = keys
    this.#records = records
    this.#events = events
  }

  /** Marks an object for deletion (`force` can be raised, never lowered). */
  async request(
    kind: Kind,
    name: string,
    force: boolean,
  ): Promise<StoredObject<unknown, unknown> | undefined> {
    let result: StoredObject<unknown, unknown> | undefined
    await this.#records.casField(kind, name, 'deletion', (current) => {
      const deletion = {
        requestedAt: current.deletion?.requestedAt ?? new Date().toISOString(),
        force: force || (current.deletion?.force ?? false),
      }
      result = { ...current, deletion }
      return deletion
    })
    return result
  }

  /** Removes a host for good, releasing its claims and quota counts. */
  async purgeHost(name: string, group: string, dpuId: string): Promise<boolean> {
    const keys = this.#keys
    // Its group outlives it; had the group gone first, purgeGroup uncounted the host.
    const tenant = (await this.#records.get<ResourceGroup>('rg', group))?.spec.tenantId
    const counted = tenant === undefined ? [] : hostQuotaSets(keys.prefix, tenant)
    const log = this.#records.log.removal('mr', name, tenant)
    const reply = await purgeScript.run(
      this.#redis,
      [
        keys.object('mr', name),
        keys.index('mr'),
        keys.members(group),
        keys.dpuHosts(dpuId),
        keys.dpuAdminPorts(dpuId),
        ...counted,
        log.key,
      ],
      [name, 4 + counted.length, 'log', log.keep, ...log.fields],
    )
    await this.#events.remove('mr', name)
    await this.#retireVersion('mr', name)
    return Number(reply) === 1
  }

  /** Removes a group for good; `members` are its hosts, uncounted from its tenant. */
  async purgeGroup(name: string, tenant: string, members: () => Promise<string[]>) {
    const keys = this.#keys
    const log = this.#records.log.removal('rg', name, tenant)
    const reply = await purgeScript.run(
      this.#redis,
      [keys.object('rg', name), keys.index('rg'), keys.tenantGroups(tenant), log.key],
      [name, 2, 'log', log.keep, ...log.fields],
    )
    await uncountHosts(this.#redis, keys.prefix, tenant, await members())
    await this.#redis.del(keys.members(name))
    await this.#events.remove('rg', name)
    await this.#retireVersion('rg', name)
    return Number(reply) === 1
  }

  /** The version counter expires: the store does not grow with every name ever used. */
  async #retireVersion(kind: Kind, name: string): Promise<void> {
    await this.#redis.pexpire(this.#keys.version(kind, name), VERSION_KEPT_MS)
  }
}
