/**
 * The operator's pools of fabric identifiers: a VNI and a VLAN id per Fabric group, each
 * the lowest free one of its operator-configured range. Allocation is keyed by owner (the
 * group), like addresses: asking again returns what the owner holds, and one script
 * (`lua/fabric-ids-allocate.lua`) takes both or neither, so two groups racing never share
 * an id.
 *
 * @example
 * const ids = createFabricIds(redis, 'hz:ipam:', DEFAULT_FABRIC_RANGES)
 * await ids.allocateFabricIds('group-a') // { vni: 10000, vlan: 100 }, and again on retry
 */
import type { RedisClient } from '../redis/connection.ts'
import { FabricPoolExhausted, InvalidRequest } from './errors.ts'
import { checkId, fabricIdKeys } from './keys.ts'
import { scripts, tuple } from './scripts.ts'

/** A range of ids, both ends included, and the setting that configures it (for errors). */
export interface IdRange {
  readonly first: number
  readonly last: number
  /** What widens it, e.g. `HYDRAZINE_FABRIC_VNIS`. */
  readonly setting: string
}

/** The VNI and VLAN ranges Fabric groups take their identifiers from. */
export interface FabricRanges {
  readonly vnis: IdRange
  readonly vlans: IdRange
}

/** The ranges when the operator names none. */
export const DEFAULT_FABRIC_RANGES: FabricRanges = {
  vnis: { first: 10000, last: 19999, setting: 'HYDRAZINE_FABRIC_VNIS' },
  vlans: { first: 100, last: 3999, setting: 'HYDRAZINE_FABRIC_VLANS' },
}

/** What a Fabric group holds. */
export interface FabricIds {
  readonly vni: number
  readonly vlan: number
}

/** The fabric-identifier operations of `Ipam`. */
export type FabricIdPools = ReturnType<typeof createFabricIds>

export function createFabricIds(redis: RedisClient, prefix: string, ranges: FabricRanges) {
  for (const range of [ranges.vnis, ranges.vlans]) {
    if (!(Number.isInteger(range.first) && range.first >= 0 && range.last >= range.first)) {
      throw new InvalidRequest(`${range.setting}: ${range.first}-${range.last} is not a range`)
    }
  }
  const k = fabricIdKeys(prefix)
  const keys = [k.vni.busy, k.vni.owners, k.vlan.busy, k.vlan.owners]
  return {
    /**
     * The owner's VNI and VLAN id, taken now or held already (then the same ones, even if
     * the ranges moved since). FabricPoolExhausted, naming the setting to widen, when a
     * pool has none free; nothing is taken then.
     */
    async allocateFabricIds(owner: string): Promise<FabricIds> {
      checkId('owner', owner)
      const { vnis, vlans } = ranges
      const [status, a = '', b = ''] = tuple(
        await scripts.fabricIdsAllocate.run(redis, keys, [
          owner,
          String(vnis.first),
          String(vnis.last),
          String(vlans.first),
          String(vlans.last),
        ]),
      )
      if (status === 'ok') return { vni: Number(a), vlan: Number(b) }
      const [kind, range, owners] =
        a === 'vni' ? ['VNI', vnis, k.vni.owners] : ['VLAN id', vlans, k.vlan.owners]
      throw new FabricPoolExhausted(kind, range, await redis.hlen(owners))
    },

    /** Gives back the owner's VNI and VLAN id; what it held, or undefined when nothing. */
    async releaseFabricIds(owner: string): Promise<FabricIds | undefined> {
      checkId('owner', owner)
      const [vni = '', vlan = ''] = tuple(await scripts.fabricIdsRelease.run(redis, keys, [owner]))
      return vni === '' ? undefined : { vni: Number(vni), vlan: Number(vlan) }
    },

    /** The VNI and VLAN id the owner holds, or undefined: one read of each owners hash. */
    async fabricIdsOf(owner: string): Promise<FabricIds | undefined> {
      const [vni, vlan] = await Promise.all([
        redis.hget(k.vni.owners, owner),
        redis.hget(k.vlan.owners, owner),
      ])
      return vni === null || vlan === null ? undefined : { vni: Number(vni), vlan: Number(vlan) }
    },

    /** How many VNIs are held (one per Fabric group), and how many the range has. */
    async fabricIdsUsage(): Promise<{ held: number; size: number }> {
      return {
        held: await redis.hlen(k.vni.owners),
        size: ranges.vnis.last - ranges.vnis.first + 1,
      }
    },
  }
}
