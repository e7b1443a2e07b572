/**
 * What each queue producer holds in the agents' Redis: the bytes (`MEMORY USAGE`) of its
 * queue's keys, the only keys its Redis user may write (`producerRedisAclRules`). The
 * controller measures them with the DPUs' and revokes the user of a producer over its
 * bound (`functions/internal/producer-usage.ts`), so that no producer fills the agents'
 * Redis for every DPU and every other producer.
 */
import type { RedisClient } from '../redis/connection.ts'
import { bytesByOwner, globEscape, regexEscape } from '../redis/key-usage.ts'
import { producerQueueName } from './producers.ts'

/**
 * Bytes held per producer id, for every producer with a key: one SCAN of the producers'
 * queues' keys (`<prefix>:{hz-producers}producer-<id>:…`), then each key's size.
 *
 * @example const usage = await measureProducerUsage(agentsRedis, 'bull') // Map { 'ci-a' => 9120 }
 */
export async function measureProducerUsage(
  redis: RedisClient,
  queuePrefix = 'bull',
): Promise<Map<string, number>> {
  const [before = ''] = producerQueueName('\n').split('\n')
  const queueKey = new RegExp(`^${regexEscape(`${queuePrefix}:${before}`)}([a-z0-9-]{1,63}):`)
  return bytesByOwner(
    redis,
    [`${globEscape(`${queuePrefix}:${before}`)}*`],
    (key) => queueKey.exec(key)?.[1],
  )
}
