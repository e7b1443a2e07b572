/**
 * A Lua script run by EVALSHA; a server that does not know it yet (fresh start, SCRIPT
 * FLUSH, failover) gets it by SCRIPT LOAD once. Every multi-key change Hydrazine makes in
 * Redis is one of these, each file opening with a KEYS / ARGV / returns header.
 */
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { Redis } from 'ioredis'

export class LuaScript {
  readonly sha: string
  readonly source: string
  #loading: Promise<unknown> | undefined

  /** @param file URL of the `.lua` file, e.g. `new URL('./lua/put-spec.lua', import.meta.url)`. */
  constructor(readonly file: URL) {
    this.source = readFileSync(file, 'utf8')
    this.sha = createHash('sha1').update(this.source).digest('hex')
  }

  async run(
    redis: Redis,
    keys: readonly string[],
    args: readonly (string | number | Buffer)[],
  ): Promise<unknown> {
    try {
      return await redis.evalsha(this.sha, keys.length, ...keys, ...args)
    } catch (error) {
      if (!(error instanceof Error) || !error.message.startsWith('NOSCRIPT')) throw error
      // Many calls in flight may miss at once; they share one SCRIPT LOAD.
      this.#loading ??= Promise.resolve(redis.script('LOAD', this.source)).finally(() => {
        this.#loading = undefined
      })
      await this.#loading
      return redis.evalsha(this.sha, keys.length, ...keys, ...args)
    }
  }
}
