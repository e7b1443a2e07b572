/**
 * A Lua script run by EVALSHA; a server that does not know it yet (fresh start, SCRIPT
 * FLUSH, failover) gets it by EVAL, which runs it and keeps it: on a Redis Cluster that is
 * the node serving the keys' slot, where a SCRIPT LOAD could land on another. Every
 * multi-key change Hydrazine makes in Redis is one of these, each file opening with a
 * KEYS / ARGV / returns header.
 */
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { RedisClient } from './connection.ts'

export class LuaScript {
  readonly sha: string
  readonly source: string

  /** @param file URL of the `.lua` file, e.g. `new URL('./lua/put-spec.lua', import.meta.url)`. */
  constructor(readonly file: URL) {
    this.source = readFileSync(file, 'utf8')
    this.sha = createHash('sha1').update(this.source).digest('hex')
  }

  async run(
    redis: RedisClient,
    keys: readonly string[],
    args: readonly (string | number | Buffer)[],
  ): Promise<unknown> {
    try {
      return await redis.evalsha(this.sha, keys.length, ...keys, ...args)
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error
      return redis.eval(this.source, keys.length, ...keys, ...args)
    }
  }
}
