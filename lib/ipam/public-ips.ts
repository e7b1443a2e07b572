/**
 * The operator's public IPs: two pools, IPv4 and IPv6, each a registry of addresses free
 * or allocated to one owner (a host), the lowest free one handed out first. Allocation is
 * keyed by owner, like network addresses: asking again returns the IP the owner already
 * holds. An owner holds at most one address of each family; `family` defaults to 4.
 */
import type { RedisClient } from '../redis/connection.ts'
import { type Address, formatIp, fromHex, parseIp, toHex } from './address.ts'
import { Conflict, InvalidRequest, PublicPoolEmpty, publicPoolExhausted } from './errors.ts'
import { checkId, publicIpKeys } from './keys.ts'
import { notPublic } from './public-ranges.ts'
import { scripts, tuple } from './scripts.ts'

export interface PublicIpStatus {
  ip: string
  allocated: boolean
  allocatedTo?: string
}

function checkPublic(address: Address): void {
  const why = notPublic(address)
  if (why) throw new InvalidRequest(`${formatIp(address)} cannot be a public IP: ${why}`)
}

/** The public-IP operations of `Ipam`. */
export type PublicIps = ReturnType<typeof createPublicIps>

export function createPublicIps(redis: RedisClient, prefix: string) {
  const keys = { 4: publicIpKeys(prefix, 4), 6: publicIpKeys(prefix, 6) } as const
  const familyOf = (address: Address) => keys[address.version]
  const format = (hex: string) => formatIp(fromHex(hex))
  return {
    /**
     * Adds an operator-owned public IP to its family's pool; registering it again changes
     * nothing. Loopback, link-local, multicast and other special ranges are refused.
     */
    async registerPublicIp(ip: string): Promise<void> {
      const address = parseIp(ip)
      checkPublic(address)
      const k = familyOf(address)
      await scripts.publicIpRegister.run(redis, [k.registry, k.free], [toHex(address)])
    },

    /** Removes a public IP; a Conflict (naming the holder) while it is allocated. */
    async unregisterPublicIp(ip: string): Promise<void> {
      const address = parseIp(ip)
      const k = familyOf(address)
      const [status, owner] = tuple(
        await scripts.publicIpUnregister.run(redis, [k.registry, k.free], [toHex(address)]),
      )
      if (status === 'allocated') {
        throw new Conflict(`public IP ${formatIp(address)} is allocated to ${owner}`, owner)
      }
    },

    /** Gives the owner a public IP of `family` (the same one on every call until released). */
    async allocatePublicIp(owner: string, family: 4 | 6 = 4): Promise<string> {
      checkId('owner', owner)
      const k = keys[family]
      const hex = await scripts.publicIpAllocate.run(redis, [k.registry, k.free, k.owners], [owner])
      if (typeof hex !== 'string') {
        const registered = await redis.hlen(k.registry)
        throw registered === 0
          ? new PublicPoolEmpty(family)
          : publicPoolExhausted(family, registered)
      }
      return format(hex)
    },

    /** Frees the owner's public IP of `family`; returns it, or undefined when it held none. */
    async releasePublicIp(owner: string, family: 4 | 6 = 4): Promise<string | undefined> {
      const k = keys[family]
      const hex = await scripts.publicIpRelease.run(redis, [k.registry, k.free, k.owners], [owner])
      return typeof hex === 'string' ? format(hex) : undefined
    },

    /**
     * Hands the public IP of `family` that `from` holds to `to`, never freeing it in
     * between (a force-detached host's, held for its DPU's isolation); returns the address
     * `to` holds, or undefined when neither holds one. Idempotent. A Conflict when `to`
     * holds another address already.
     */
    async transferPublicIp(
      from: string,
      to: string,
      family: 4 | 6 = 4,
    ): Promise<string | undefined> {
      checkId('owner', to)
      const k = keys[family]
      const [status, hex] = tuple(
        await scripts.publicIpTransfer.run(redis, [k.registry, k.free, k.owners], [from, to]),
      )
      if (status === 'none' || hex === undefined) return undefined
      if (status === 'held') {
        throw new Conflict(`${to} holds public IP ${format(hex)} already`, to)
      }
      return format(hex)
    },

    /** The public IP of `family` `owner` holds, or undefined: one read of the owners hash. */
    async publicIpOf(owner: string, family: 4 | 6 = 4): Promise<string | undefined> {
      const hex = await redis.hget(keys[family].owners, owner)
      return hex === null ? undefined : format(hex)
    },

    /** Whether the pool of `family` has any address registered (free or not). */
    async hasPublicIps(family: 4 | 6 = 4): Promise<boolean> {
      return (await redis.hlen(keys[family].registry)) > 0
    },

    /** The public IP of `family` the next allocation would hand out (the lowest free), or undefined. */
    async nextPublicIp(family: 4 | 6 = 4): Promise<string | undefined> {
      const [hex] = await redis.zrange(keys[family].free, '0', '0')
      return hex === undefined ? undefined : format(hex)
    },

    /**
     * The public IPs of `family` these owners hold (owners holding none are absent), in
     * one round trip.
     */
    async publicIpsOf(owners: readonly string[], family: 4 | 6 = 4): Promise<Map<string, string>> {
      if (owners.length === 0) return new Map()
      const hexes = await redis.hmget(keys[family].owners, ...owners)
      const held = new Map<string, string>()
      owners.forEach((owner, i) => {
        const hex = hexes[i]
        if (hex) held.set(owner, format(hex))
      })
      return held
    },

    /**
     * Every registered public IP, IPv4 then IPv6, each in address order, with its owner
     * when allocated.
     */
    async listPublicIps(): Promise<PublicIpStatus[]> {
      const out: PublicIpStatus[] = []
      for (const family of [4, 6] as const) {
        const registry = await redis.hgetall(keys[family].registry)
        for (const [hex, owner] of Object.entries(registry).sort(
          ([a], [b]) => a.length - b.length || (a < b ? -1 : 1),
        )) {
          out.push({
            ip: format(hex),
            allocated: owner !== '',
            ...(owner === '' ? {} : { allocatedTo: owner }),
          })
        }
      }
      return out
    },
  }
}
