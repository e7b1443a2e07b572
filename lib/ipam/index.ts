/**
 * IP address management for group networks (subnets, pools, reservations) and the
 * operator's public IPs, kept in Redis.
 *
 * Every multi-key change is one Lua script (`./lua/`), so concurrent workers never hand
 * out one address twice. Allocation is keyed by owner: asking again for the same owner
 * returns the same address, so a retried handler never takes a second one.
 *
 * `Ipam` is made of five parts, each in its own file: network definition changes
 * (`networks.ts`), addresses handed to owners (`allocations.ts`), the usage map and the
 * dry run of a definition change (`usage.ts`), public IPs (`public-ips.ts`) and Fabric
 * groups' VNIs and VLAN ids (`fabric-ids.ts`). The first
 * three share one cache of network layouts (`layout-cache.ts`).
 */
import type { RedisClient } from '../redis/connection.ts'
import { type Allocations, createAllocations } from './allocations.ts'
import {
  createFabricIds,
  DEFAULT_FABRIC_RANGES,
  type FabricIdPools,
  type FabricRanges,
} from './fabric-ids.ts'
import { LayoutCache } from './layout-cache.ts'
import { createNetworks, type Networks } from './networks.ts'
import { createPublicIps, type PublicIps } from './public-ips.ts'
import { loadScripts } from './scripts.ts'
import { createUsage, type Usage } from './usage.ts'

export type { AllocateOptions, Allocation, NetworkMap } from './allocations.ts'
export type {
  NetworkDefinition,
  NetworkSpec,
  PoolSpec,
  RangeSpec,
  SubnetDefinition,
  SubnetSpec,
} from './definition.ts'
export {
  AddressInUse,
  Conflict,
  FabricPoolExhausted,
  InvalidRequest,
  NotFound,
  NotInSubnet,
  Overlap,
  PoolExhausted,
  PublicPoolEmpty,
} from './errors.ts'
export type { FabricIds, FabricRanges, IdRange } from './fabric-ids.ts'
export { DEFAULT_FABRIC_RANGES } from './fabric-ids.ts'
export type { DefineOptions, Released, SubnetChange } from './networks.ts'
export type { PublicIpStatus } from './public-ips.ts'
export type { NetworkUsage, Orphan, PoolUsage, SubnetUsage } from './usage.ts'

export interface IpamOptions {
  /**
   * Prepended to every key. Keys of one network share the hash tag `{net:<id>}`, so a
   * network lives in one Redis Cluster slot. Default `hz:ipam:`.
   */
  prefix?: string
  /** The VNI and VLAN ranges Fabric groups take theirs from; default `DEFAULT_FABRIC_RANGES`. */
  fabric?: FabricRanges
}

/** Every IPAM operation, on one object (`createIpam`). */
export interface Ipam extends Networks, Allocations, PublicIps, Usage, FabricIdPools {
  /** Loads every script into the server now, instead of on first use. */
  load(): Promise<void>
}

/**
 * Builds an Ipam from its three parts; network changes and allocations share one layout
 * cache, so the next allocation uses a network as this process last changed it.
 *
 * @example
 * const ipam = createIpam(redis, { prefix: 'hz:ipam:' })
 * await ipam.createNetwork('rg-blue', {
 *   subnets: [{ cidr: '10.0.0.0/24', gateway: '10.0.0.1',
 *     pools: [{ start: '10.0.0.1', end: '10.0.0.254' }],
 *     external: [{ start: '10.0.0.254', end: '10.0.0.254' }] }],
 * })
 * const { ip } = await ipam.allocate('rg-blue', 'host-7') // 10.0.0.2, and again on retry
 */
export function createIpam(redis: RedisClient, options: IpamOptions = {}): Ipam {
  const prefix = options.prefix ?? 'hz:ipam:'
  const layouts = new LayoutCache(redis, prefix)
  return {
    ...createNetworks(layouts),
    ...createAllocations(layouts),
    ...createUsage(layouts),
    ...createPublicIps(redis, prefix),
    ...createFabricIds(redis, prefix, options.fabric ?? DEFAULT_FABRIC_RANGES),
    load: () => loadScripts(redis),
  }
}
