/**
 * The Lua scripts behind every multi-key IPAM change (`./lua/*.lua`, each with a
 * KEYS / ARGV / returns header), run through lib/redis's EVALSHA runner.
 */
import type { RedisClient } from '../redis/connection.ts'
import { LuaScript } from '../redis/lua-script.ts'
import { onEveryNode } from '../redis/slots.ts'

const script = (name: string) => new LuaScript(new URL(`./lua/${name}.lua`, import.meta.url))

/** Every script, read from disk once per process. */
export const scripts = {
  commitNetwork: script('commit-network'),
  allocateFromPool: script('allocate-from-pool'),
  allocateAddress: script('allocate-address'),
  releaseAddress: script('release-address'),
  publicIpRegister: script('public-ip-register'),
  publicIpUnregister: script('public-ip-unregister'),
  publicIpAllocate: script('public-ip-allocate'),
  publicIpRelease: script('public-ip-release'),
  publicIpTransfer: script('public-ip-transfer'),
  fabricIdsAllocate: script('fabric-ids-allocate'),
  fabricIdsRelease: script('fabric-ids-release'),
} as const

/** Loads every script into the server (every master of a cluster) now, instead of on first use. */
export async function loadScripts(redis: RedisClient): Promise<void> {
  await onEveryNode(redis, async (node) => {
    for (const script of Object.values(scripts)) await node.script('LOAD', script.source)
  })
}

/** The reply of a script that answers `{status, ...values}`, as strings. */
export function tuple(reply: unknown): [string, ...string[]] {
  if (!Array.isArray(reply) || reply.length === 0) {
    throw new TypeError(`unexpected script reply ${JSON.stringify(reply)}`)
  }
  const parts = reply.map((v: unknown) => String(v))
  return [parts[0] ?? '', ...parts.slice(1)]
}
