/**
 * Where IPAM keeps its state in Redis, under a caller-chosen prefix. Keys of one network
 * share the hash tag `{net:<id>}` and the public IPs share `{public-ip}` (IPv6: `{public-ip6}`), so each lives in
 * one Redis Cluster slot and one Lua script may touch all of its keys.
 */
import { InvalidRequest } from './errors.ts'

/** No braces (they would end the hash tag) and no whitespace. */
const ID = /^[^{}\s]+$/

/** Refuses an id that cannot be part of a key, e.g. `checkId('owner', 'host 7')`. */
export function checkId(kind: string, id: string): void {
  if (!ID.test(id))
    throw new InvalidRequest(`bad ${kind} id ${JSON.stringify(id)}: no braces or spaces`)
}

export interface PoolKeys {
  /** Bitmap: addresses never handed out automatically (see `exclusionBitmap`). */
  readonly excl: string
  /** Bitmap: addresses held by owners or excluded, where an allocation looks for its first clear bit. */
  readonly busy: string
  /**
   * Every key the pool's bitmaps may lie under, for deleting them: `excl`, `busy` and
   * the bitmap of held addresses alone that earlier versions kept beside them.
   */
  readonly all: readonly string[]
}

export interface NetworkKeys {
  /** Hash: `version` (outlives the network) and `def` (the definition's JSON). */
  readonly meta: string
  /** Hash: owner → address hex. */
  readonly owners: string
  /** Hash: address hex → owner. */
  readonly holders: string
  pool(index: number): PoolKeys
}

export interface PublicIpKeys {
  /** Hash: address hex → owner (`''` while free). */
  readonly registry: string
  /** Sorted set of the free addresses' hex, lowest first. */
  readonly free: string
  /** Hash: owner → address hex. */
  readonly owners: string
}

export function networkKeys(prefix: string, network: string): NetworkKeys {
  checkId('network', network)
  const base = `${prefix}{net:${network}}`
  return {
    meta: `${base}:meta`,
    owners: `${base}:owners`,
    holders: `${base}:holders`,
    pool: (index) => {
      const excl = `${base}:pool:${index}:excl`
      const busy = `${base}:pool:${index}:busy`
      return { excl, busy, all: [excl, busy, `${base}:pool:${index}:res`] }
    },
  }
}

/** The public IP pool of one address family: IPv4 in `{public-ip}`, IPv6 in `{public-ip6}`. */
export function publicIpKeys(prefix: string, family: 4 | 6 = 4): PublicIpKeys {
  const base = `${prefix}{public-ip${family === 6 ? '6' : ''}}`
  return { registry: `${base}:registry`, free: `${base}:free`, owners: `${base}:owners` }
}

export interface FabricIdKeys {
  /** Bitmap (bit N set: id N held) and hash owner → id, of VNIs and of VLAN ids. */
  readonly vni: { readonly busy: string; readonly owners: string }
  readonly vlan: { readonly busy: string; readonly owners: string }
}

/** The fabric-identifier pools, all in `{fabric-ids}` so that one script takes from both. */
export function fabricIdKeys(prefix: string): FabricIdKeys {
  const base = `${prefix}{fabric-ids}`
  return {
    vni: { busy: `${base}:vni:busy`, owners: `${base}:vni:owners` },
    vlan: { busy: `${base}:vlan:busy`, owners: `${base}:vlan:owners` },
  }
}
