/**
 * The operator's public IPs: a registry of addresses, each free or allocated to one owner
 * (a host), the lowest free one handed out first. Allocation is keyed by owner, like
 * network addresses: asking again returns the IP the owner already holds.
 */
import type { RedisClient } from '../redis/connection.ts'
import { formatIp, fromHex, parseIp, toHex } from './address.ts'
import { Conflict, PoolExhausted } from './errors.ts'
import { checkId, publicIpKeys } from './keys.ts'
import { scripts, tuple } from './scripts.ts'

export interface PublicIpStatus {
  ip: string
  allocated: boolean
  allocatedTo?: string
}

/** The public-IP operations of `Ipam`. */
export type PublicIps = ReturnType<typeof createPublicIps>

export function createPublicIps(redis: RedisClient, prefix: string) {
  const k = publicIpKeys(prefix)
  return {
    /** Adds an operator-owned public IP to the pool; registering it again changes nothing. */
    async registerPublicIp(ip: string): Promise<void> {
      await scripts.publicIpRegister.run(redis, [k.registry, k.free], [toHex(parseIp(ip))])
    },

    /** Removes a public IP; a Conflict (naming the holder) while it is allocated. */
    async unregisterPublicIp(ip: string): Promise<void> {
      const address = parseIp(ip)
      const [status, owner] = tuple(
        await scripts.publicIpUnregister.run(redis, [k.registry, k.free], [toHex(address)]),
      )
      if (status === 'allocated') {
        throw new Conflict(`public IP ${formatIp(address)} is allocated to ${owner}`, owner)
      }
    },

    /** Gives the owner a public IP (the same one on every call until released). */
    async allocatePublicIp(owner: string): Promise<string> {
      checkId('owner', owner)
      const hex = await scripts.publicIpAllocate.run(redis, [k.registry, k.free, k.owners], [owner])
      if (typeof hex !== 'string') throw new PoolExhausted('public', 'public-ips')
      return formatIp(fromHex(hex))
    },

    /** Frees the owner's public IP; returns it, or undefined when it held none. */
    async releasePublicIp(owner: string): Promise<string | undefined> {
      const hex = await scripts.publicIpRelease.run(redis, [k.registry, k.free, k.owners], [owner])
      return typeof hex === 'string' ? formatIp(fromHex(hex)) : undefined
    },

    /** The public IP `owner` holds, or undefined: one read of the owners hash. */
    async publicIpOf(owner: string): Promise<string | undefined> {
      const hex = await redis.hget(k.owners, owner)
      return hex === null ? undefined : formatIp(fromHex(hex))
    },

    /** The public IP the next allocation would hand out (the lowest free), or undefined. */
    async nextPublicIp(): Promise<string | undefined> {
      const [hex] = await redis.zrange(k.free, '0', '0')
      return hex === undefined ? undefined : formatIp(fromHex(hex))
    },

    /** The public IPs these owners hold (owners holding none are absent), in one round trip. */
    async publicIpsOf(owners: readonly string[]): Promise<Map<string, string>> {
      if (owners.length === 0) return new Map()
      const hexes = await redis.hmget(k.owners, ...owners)
      const held = new Map<string, string>()
      owners.forEach((owner, i) => {
        const hex = hexes[i]
        if (hex) held.set(owner, formatIp(fromHex(hex)))
      })
      return held
    },

    /** Every registered public IP, in address order, with its owner when allocated. */
    async listPublicIps(): Promise<PublicIpStatus[]> {
      const registry = await redis.hgetall(k.registry)
      return Object.entries(registry)
        .sort(([a], [b]) => a.length - b.length || (a < b ? -1 : 1))
        .map(([hex, owner]) => ({
          ip: formatIp(fromHex(hex)),
          allocated: owner !== '',
          ...(owner === '' ? {} : { allocatedTo: owner }),
        }))
    },
  }
}
