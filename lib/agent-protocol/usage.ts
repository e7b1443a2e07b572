/**
 * What each DPU holds in the agents' Redis: the bytes (`MEMORY USAGE`) of its queue's keys
 * and its heartbeat, the keys its Redis user may write. The controller measures them and
 * revokes the credentials of a DPU over its bound (`functions/dpu-health.ts`), so that no
 * DPU fills the agents' Redis for every other.
 */
import type { RedisClient } from '../redis/connection.ts'
import { scanKeys } from '../redis/slots.ts'
import { heartbeatKeyOf } from './credentials.ts'

/** How many `MEMORY USAGE` are in flight at once. */
const AT_ONCE = 256

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
  const [queueKeys, beatKeys] = await Promise.all([
    scanKeys(redis, `${globEscape(queuePrefix)}:{hz-agents-*}agent-*`),
    scanKeys(redis, heartbeatKeyOf('*')),
  ])
  const owned: [string, string][] = []
  for (const key of queueKeys) {
    const dpu = queueKey.exec(key)?.[1]
    if (dpu) owned.push([dpu, key])
  }
  for (const key of beatKeys) {
    const dpu = beatKey.exec(key)?.[1]
    if (dpu) owned.push([dpu, key])
  }
  const usage = new Map<string, number>()
  for (let i = 0; i < owned.length; i += AT_ONCE) {
    const batch = owned.slice(i, i + AT_ONCE)
    const sizes = await Promise.all(
      batch.map(([, key]) => redis.memory('USAGE', key).catch(() => null)),
    )
    batch.forEach(([dpu], j) => {
      usage.set(dpu, (usage.get(dpu) ?? 0) + Number(sizes[j] ?? 0))
    })
  }
  return usage
}

const regexEscape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
/** `text` matched literally by a SCAN pattern. */
const globEscape = (text: string) => text.replace(/[*?[\]\\]/g, '\\$&')
