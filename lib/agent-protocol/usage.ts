/**
 * What each DPU holds in the agents' Redis: the bytes (`MEMORY USAGE`) of its queue's keys
 * and its heartbeat, the keys its Redis user may write. The controller measures them and
 * revokes the credentials of a DPU over its bound (`functions/dpu-health.ts`), so that no
 * DPU fills the agents' Redis for every other.
 */
import type { RedisClient } from '../redis/connection.ts'
import { bytesByOwner, globEscape, regexEscape } from '../redis/key-usage.ts'
import { heartbeatKeyOf } from './credentials.ts'

/**
 * Bytes held per DPU id, for every DPU with a key: one SCAN of the agent queues' keys
 * (`<prefix>:{hz-agents-N}agent-<id>:…`) and of the heartbeats, then each key's size.
 *
 * @example const usage = await measureDpuUsage(agentsRedis, 'bull') // Map { 'dpu-1' => 48213 }
 */
export async function measureDpuUsage(
  redis: RedisClient,
  queuePrefix = 'bull',
): Promise<Map<string, number>> {
  const queueKey = new RegExp(
    `^${regexEscape(queuePrefix)}:\\{hz-agents-\\d+\\}agent-([A-Za-z0-9][A-Za-z0-9._-]{0,62}):`,
  )
  const [before = '', after = ''] = heartbeatKeyOf('\n').split('\n')
  const beatKey = new RegExp(
    `^${regexEscape(before)}([A-Za-z0-9][A-Za-z0-9._-]{0,62})${regexEscape(after)}$`,
  )
  return bytesByOwner(
    redis,
    [`${globEscape(queuePrefix)}:{hz-agents-*}agent-*`, heartbeatKeyOf('*')],
    (key) => queueKey.exec(key)?.[1] ?? beatKey.exec(key)?.[1],
  )
}
