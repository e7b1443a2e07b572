/**
 * The quota counts kept beside the objects: per tenant, the sets of its groups, hosts and
 * public IPs that spec writes and purges keep up to date (`quotas.ts`).
 */
import type { RedisClient } from '../redis/connection.ts'
import type { GroupRepository } from './groups.ts'
import type { HostRepository } from './hosts.ts'
import { countHosts } from './quotas.ts'
import type { StoreKeys } from './store-keys.ts'

export class QuotaCounts {
  readonly #redis: RedisClient
  readonly #keys: StoreKeys
  readonly #groups: Pick<GroupRepository, 'list'>
  readonly #hosts: Pick<HostRepository, 'list'>

  constructor(
    redis: RedisClient,
    keys: StoreKeys,
    groups: Pick<GroupRepository, 'list'>,
    hosts: Pick<HostRepository, 'list'>,
  ) {
    this.#redis = redis
    this.#keys = keys
    this.#groups = groups
    this.#hosts = hosts
  }

  /**
   * Counts the hosts stored before quotas were kept (once per store; idempotent): each
   * live host joins its tenant's `hosts` set, and its `publicIps` set when PublicAccess.
   * Called at start-up, before this controller takes work.
   */
  async countStoredHosts(): Promise<void> {
    if ((await this.#redis.set(this.#keys.hostsCountedForQuotas, '1', 'NX')) !== 'OK') return
    for (const group of await this.#groups.list()) {
      const hosts = await this.#hosts.list({ resourceGroup: group.name })
      await countHosts(this.#redis, this.#keys.prefix, group.spec.tenantId, hosts)
    }
  }
}
