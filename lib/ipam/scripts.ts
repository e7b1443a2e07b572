/**
 * The Lua scripts behind every multi-key IPAM change (`./lua/*.lua`, each with a
 * KEYS / ARGV / returns header). They run by EVALSHA; a server that does not know a
 * script yet (fresh start, SCRIPT FLUSH, failover) gets it by SCRIPT LOAD once.
 */
import { createHash } from 'node:crypto'
import { readFileSync } from 'node:fs'
import type { Redis } from 'ioredis'

export class LuaScript {
  readonly sha: string
  readonly source: string
  #loading: Promise<unknown> | undefined

  constructor(readonly name: string) {
    this.source = readFileSync(new URL(`./lua/${name}.lua`, import.meta.url), 'utf8')
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

/** Every script, read from disk once per process. */
export const scripts = {
  commitNetwork: new LuaScript('commit-network'),
  allocateFromPool: new LuaScript('allocate-from-pool'),
  allocateAddress: new LuaScript('allocate-address'),
  releaseAddress: new LuaScript('release-address'),
  publicIpRegister: new LuaScript('public-ip-register'),
  publicIpUnregister: new LuaScript('public-ip-unregister'),
  publicIpAllocate: new LuaScript('public-ip-allocate'),
  publicIpRelease: new LuaScript('public-ip-release'),
  natIpClaim: new LuaScript('nat-ip-claim'),
  natIpRelease: new LuaScript('nat-ip-release'),
  transitAllocate: new LuaScript('transit-allocate'),
  transitRelease: new LuaScript('transit-release'),
} as const

/** The reply of a script that answers `{status, ...values}`, as strings. */
export function tuple(reply: unknown): [string, ...string[]] {
  if (!Array.isArray(reply) || reply.length === 0) {
    throw new TypeError(`unexpected script reply ${JSON.stringify(reply)}`)
  }
  const parts = reply.map((v: unknown) => String(v))
  return [parts[0] ?? '', ...parts.slice(1)]
}
