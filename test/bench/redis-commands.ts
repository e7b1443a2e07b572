/**
 * How many commands a Redis executed over a bench round, by command: `INFO commandstats`
 * read before and after (its `calls` count every command the server ran, those a Lua
 * script ran included).
 */
import { createRedis } from '../../lib/redis/connection.ts'

/** Calls so far per command (lower case, `evalsha`, `hgetall`, …) of the Redis at `url`. */
export async function commandCalls(url: string): Promise<Map<string, number>> {
  const redis = createRedis({ url }, { maxRetriesPerRequest: 3 })
  try {
    const text = await redis.info('commandstats')
    const calls = new Map<string, number>()
    for (const line of text.split('\n')) {
      const found = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim())
      if (found?.[1] && found[2]) calls.set(found[1], Number(found[2]))
    }
    return calls
  } finally {
    redis.disconnect()
  }
}

/**
 * Starts counting the commands of the Redis at `url`; `stop()` gives the calls per command
 * since, largest first. The two INFO reads count themselves (2 commands).
 */
export async function countCommands(url: string): Promise<{
  stop: () => Promise<{ total: number; byCommand: [string, number][] }>
}> {
  const before = await commandCalls(url)
  return {
    stop: async () => {
      const after = await commandCalls(url)
      const byCommand = [...after]
        .map(([command, n]): [string, number] => [command, n - (before.get(command) ?? 0)])
        .filter(([, n]) => n > 0)
        .sort(([, a], [, b]) => b - a)
      return { total: byCommand.reduce((sum, [, n]) => sum + n, 0), byCommand }
    },
  }
}

/** `hgetall 10.3, evalsha 9.1, …`: the largest `top` commands per `per` (an attach). */
export function describeCommands(byCommand: readonly [string, number][], per: number, top = 8) {
  return byCommand
    .slice(0, top)
    .map(([command, n]) => `${command} ${(n / per).toFixed(1)}`)
    .join(', ')
}
