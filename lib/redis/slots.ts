/**
 * Hydrazine's keys in a Redis Cluster. Every key a Lua script or MULTI touches shares one
 * `{hash tag}` and so one slot. The tags:
 *
 * - `{store}`: the desired state, its change log, claims, quotas and locks (`lib/state`);
 * - `{net:<id>}` per network and `{public-ip}` (`lib/ipam`);
 * - `{beats}`: the DPUs' heartbeats and the controller's record of them;
 * - one per BullMQ queue, in its name: `{hz-controller}hydrazine`, `{hz-frr}frr`, and the
 *   DPU agent queues spread over `AGENT_SHARDS` tags `{hz-agents-N}` (`agentQueueName`):
 *   the agents' traffic lands on every master, while the controller still reads their
 *   event streams with one blocking XREAD per shard.
 *
 * On one Redis the tags change nothing.
 */
import { Cluster, type Redis } from 'ioredis'
import type { RedisClient } from './connection.ts'

/**
 * The hash tag of `key` as Redis Cluster reads it: the text between the first `{` and the
 * next `}` when not empty, else the whole key.
 *
 * @example
 * hashTagOf('bull:{hz-agents-3}agent-dpu-1:wait') // 'hz-agents-3'
 */
export function hashTagOf(key: string): string {
  const open = key.indexOf('{')
  if (open < 0) return key
  const close = key.indexOf('}', open + 1)
  return close > open + 1 ? key.slice(open + 1, close) : key
}

/**
 * A queue's name as people read it (metrics labels, the dashboard, logs): without the
 * hash tag it starts with.
 *
 * @example
 * displayQueueName('{hz-agents-3}agent-dpu-1') // 'agent-dpu-1'
 */
export function displayQueueName(name: string): string {
  return name.replace(/^\{[^}]*\}/, '')
}

/** True for a client of a Redis Cluster. */
export function isCluster(redis: RedisClient): redis is Cluster {
  return redis instanceof Cluster
}

/**
 * Runs `command` on every master of a cluster (a SCAN's keys), or with `role` `all` on
 * replicas too (ACL users, which Redis neither replicates nor fails over); on one Redis,
 * on it. Returns each node's answer; rejects once every node answered, if any failed.
 */
export async function onEveryNode<T>(
  redis: RedisClient,
  command: (node: Redis) => Promise<T>,
  role: 'master' | 'all' = 'master',
): Promise<T[]> {
  if (!isCluster(redis)) return [await command(redis)]
  if (redis.status !== 'ready') await new Promise((ready) => redis.once('ready', ready))
  const answers = await Promise.allSettled(redis.nodes(role).map(command))
  const failed = answers.find((a): a is PromiseRejectedResult => a.status === 'rejected')
  if (failed) throw failed.reason
  return answers.map((a) => (a as PromiseFulfilledResult<T>).value)
}

/**
 * Every key matching `pattern` (SCAN with MATCH), on every master of a cluster.
 *
 * @example
 * await scanKeys(redis, 'hz:{beats}:dpu:*:heartbeat')
 */
export async function scanKeys(redis: RedisClient, pattern: string): Promise<string[]> {
  const perNode = await onEveryNode(redis, async (node) => {
    const keys: string[] = []
    let cursor = '0'
    do {
      const [next, batch] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 500)
      keys.push(...batch)
      cursor = next
    } while (cursor !== '0')
    return keys
  })
  return [...new Set(perNode.flat())]
}
