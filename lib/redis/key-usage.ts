/**
 * What a set of keys holds in Redis, summed per owner: the bytes `MEMORY USAGE` gives for
 * each key. The controller bounds what each writer of the agents' Redis may hold there (a
 * DPU: lib/agent-protocol/usage.ts; a queue producer: lib/jobs/producer-usage.ts).
 */
import type { RedisClient } from './connection.ts'
import { scanKeys } from './slots.ts'

/** How many `MEMORY USAGE` are in flight at once. */
const AT_ONCE = 256

/**
 * Bytes held per owner: every key `pattern` SCANs (on every master of a cluster) whose
 * owner `ownerOf` names, summed per owner. A key gone between the SCAN and its
 * `MEMORY USAGE` counts nothing. Owners with no key are absent.
 *
 * @example
 * await bytesByOwner(redis, ['bull:{hz-producers}producer-*'], (key) => /producer-([a-z0-9-]+):/.exec(key)?.[1])
 */
export async function bytesByOwner(
  redis: RedisClient,
  patterns: readonly string[],
  ownerOf: (key: string) => string | undefined,
): Promise<Map<string, number>> {
  const keys = (await Promise.all(patterns.map((pattern) => scanKeys(redis, pattern)))).flat()
  const owned: [string, string][] = []
  for (const key of keys) {
    const owner = ownerOf(key)
    if (owner !== undefined) owned.push([owner, key])
  }
  const usage = new Map<string, number>()
  for (let i = 0; i < owned.length; i += AT_ONCE) {
    const batch = owned.slice(i, i + AT_ONCE)
    const sizes = await Promise.all(
      batch.map(([, key]) => redis.memory('USAGE', key).catch(() => null)),
    )
    batch.forEach(([owner], j) => {
      usage.set(owner, (usage.get(owner) ?? 0) + Number(sizes[j] ?? 0))
    })
  }
  return usage
}

/** `text` matched literally in a regular expression. */
export const regexEscape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
/** `text` matched literally by a SCAN pattern. */
export const globEscape = (text: string) => text.replace(/[*?[\]\\]/g, '\\$&')
