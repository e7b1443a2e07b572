/**
 * Issuing DPU credentials: a Redis user confined by ACL to the DPU's own queue and
 * heartbeat (`dpuRedisAclRules`), with a fresh random password each time, and — when a
 * PKI is given — a client certificate whose CN is the DPU id.
 */
import { randomBytes } from 'node:crypto'
import {
  DPU_REDIS_COMMANDS,
  type DpuCredentialIssuer,
  type DpuCredentials,
  dpuRedisAclRules,
  dpuRedisKeyPatterns,
  dpuRedisUser,
} from '../lib/agent-protocol/credentials.ts'
import type { RedisClient } from '../lib/redis/connection.ts'
import { onEveryNode } from '../lib/redis/slots.ts'

export interface CredentialIssuerOptions {
  /** An admin connection to the Redis the agents use. */
  readonly redis: RedisClient
  /** BullMQ key prefix of the agent queues (default `bull`). */
  readonly queuePrefix?: string
  /** Issues the DPU's certificate, when Hydrazine runs a PKI. */
  readonly certificates?: (dpuId: string) => Promise<NonNullable<DpuCredentials['tls']>>
}

export function createCredentialIssuer(options: CredentialIssuerOptions): DpuCredentialIssuer {
  const { redis } = options
  /** Writes the ACL file, so users survive a Redis restart; false when Redis keeps none. */
  const save = async () =>
    (
      await onEveryNode(
        redis,
        (node) =>
          node.call('ACL', 'SAVE').then(
            () => true,
            () => false,
          ),
        'all',
      )
    ).every(Boolean)
  return {
    async issue(dpuId) {
      const password = randomBytes(32).toString('hex')
      const username = dpuRedisUser(dpuId)
      const rules = dpuRedisAclRules(dpuId, password, options.queuePrefix)
      // A Redis Cluster keeps users per node, and neither replicates nor fails them over:
      // every node, replicas too, gets the user.
      await onEveryNode(redis, (node) => node.call('ACL', 'SETUSER', username, ...rules), 'all')
      // Connections already open with the old password keep working until they close;
      // the agent that held it is the one being replaced, so close them now.
      await onEveryNode(
        redis,
        (node) => node.call('CLIENT', 'KILL', 'USER', username).catch(() => {}),
        'all',
      )
      const persisted = await save()
      const tls = options.certificates ? await options.certificates(dpuId) : undefined
      return { dpuId, redis: { username, password, persisted }, ...(tls ? { tls } : {}) }
    },
    async revoke(dpuId) {
      const username = dpuRedisUser(dpuId)
      await onEveryNode(redis, (node) => node.call('ACL', 'DELUSER', username), 'all')
      await onEveryNode(
        redis,
        (node) => node.call('CLIENT', 'KILL', 'USER', username).catch(() => {}),
        'all',
      )
      await save()
    },
    async refreshKeys(dpuIds) {
      const refreshed = new Set<string>()
      for (const dpuId of dpuIds) {
        const username = dpuRedisUser(dpuId)
        const patterns = dpuRedisKeyPatterns(dpuId, options.queuePrefix)
        await onEveryNode(
          redis,
          async (node) => {
            if ((await node.call('ACL', 'GETUSER', username)) === null) return
            // This version's keys and commands: a user issued with the older deny-list
            // (every command but the dangerous ones) now has the allow-list.
            const commands = ['-@all', ...DPU_REDIS_COMMANDS.map((c) => `+${c}`)]
            await node.call('ACL', 'SETUSER', username, 'resetkeys', ...patterns, ...commands)
            refreshed.add(dpuId)
          },
          'all',
        )
      }
      if (refreshed.size > 0) await save()
      return [...refreshed].sort()
    },
  }
}

/**
 * Deletes the users of these DPUs from `redis` and closes their connections, where any
 * is left: an older version issued them on the store's Redis, which DPUs no longer reach
 * now that their queues live on the agents' Redis. Returns the DPUs whose user it deleted.
 */
export async function removeDpuUsers(
  redis: RedisClient,
  dpuIds: readonly string[],
): Promise<string[]> {
  const removed = new Set<string>()
  for (const dpuId of dpuIds) {
    const username = dpuRedisUser(dpuId)
    await onEveryNode(
      redis,
      async (node) => {
        if ((await node.call('ACL', 'GETUSER', username)) === null) return
        await node.call('ACL', 'DELUSER', username)
        await node.call('CLIENT', 'KILL', 'USER', username).catch(() => {})
        removed.add(dpuId)
      },
      'all',
    )
  }
  if (removed.size > 0) {
    await onEveryNode(redis, (node) => node.call('ACL', 'SAVE').catch(() => {}), 'all')
  }
  return [...removed].sort()
}
