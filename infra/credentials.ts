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
import { type Producer, producerRedisAclRules, producerRedisUser } from '../lib/jobs/producers.ts'
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

/**
 * Makes the producers' Redis users exactly the configured producers: each one's user set
 * to its queue's keys, its commands and its password's SHA-256 (`producerRedisAclRules`),
 * and any other `producer-*` user deleted with its connections (a producer taken out of
 * the file can write nothing more). Returns the ids of the producers it removed.
 */
export async function syncProducerUsers(
  redis: RedisClient,
  producers: readonly Producer[],
  queuePrefix?: string,
): Promise<string[]> {
  const wanted = new Set(producers.map((p) => producerRedisUser(p.id)))
  const removed = new Set<string>()
  await onEveryNode(
    redis,
    async (node) => {
      for (const producer of producers) {
        const user = producerRedisUser(producer.id)
        const before = await passwordsOf(node, user)
        await node.call('ACL', 'SETUSER', user, ...producerRedisAclRules(producer, queuePrefix))
        // A new password: connections opened with the old one end too.
        if (before && !before.includes(producer.passwordSha256)) {
          await node.call('CLIENT', 'KILL', 'USER', user).catch(() => {})
        }
      }
      const users = (await node.call('ACL', 'USERS')) as string[]
      for (const user of users) {
        if (!user.startsWith('producer-') || wanted.has(user)) continue
        await node.call('ACL', 'DELUSER', user)
        await node.call('CLIENT', 'KILL', 'USER', user).catch(() => {})
        removed.add(user.slice('producer-'.length))
      }
      await node.call('ACL', 'SAVE').catch(() => {})
    },
    'all',
  )
  return [...removed].sort()
}

/**
 * Deletes a producer's Redis user and closes its connections (it held more than its bound
 * in the agents' Redis), on every node that has it. Returns whether any had: false when it
 * was revoked already or never made. The producers file still names it, so the
 * controller's next start makes it again (`syncProducerUsers`).
 */
export async function revokeProducerUser(redis: RedisClient, producer: string): Promise<boolean> {
  const user = producerRedisUser(producer)
  const had = await onEveryNode(
    redis,
    async (node) => {
      if ((await node.call('ACL', 'GETUSER', user)) === null) return false
      await node.call('ACL', 'DELUSER', user)
      await node.call('CLIENT', 'KILL', 'USER', user).catch(() => {})
      await node.call('ACL', 'SAVE').catch(() => {})
      return true
    },
    'all',
  )
  return had.some(Boolean)
}

/** The SHA-256s of a user's passwords, or undefined when there is no such user. */
async function passwordsOf(node: RedisClient, user: string): Promise<string[] | undefined> {
  const reply = (await node.call('ACL', 'GETUSER', user)) as unknown[] | null
  if (reply === null) return undefined
  const at = reply.indexOf('passwords')
  const list = at >= 0 ? reply[at + 1] : []
  return Array.isArray(list) ? list.map(String) : []
}
