/**
 * How a network's addresses are used, as Ganeti's `gnt-network info` map: per subnet, the
 * counts of used, reserved and free addresses, each pool's, and a map with one character
 * per address (`+` used, `X` reserved, `.` free, `-` outside every pool). Also the dry run
 * of a definition change: which held addresses it would leave behind.
 *
 * The map is computed from spans, never address by address, so an IPv6 /64 costs no more
 * than a /24: a subnet of up to `MAX_PLAIN_MAP` addresses is drawn per address, a larger
 * one as runs (`X1.253+2`: one reserved, 253 free, two used).
 */
import { type Address, containsAddress, formatIp, fromHex, type Span, spanSize } from './address.ts'
import {
  compile,
  droppedSpans,
  type Layout,
  type NetworkSpec,
  normalizeNetwork,
  type RangeSpec,
  type SubnetLayout,
  vacatedSpans,
} from './definition.ts'
import { Conflict, NotFound } from './errors.ts'
import { type LayoutCache, MAX_ATTEMPTS } from './layout-cache.ts'
import type { DefineOptions } from './networks.ts'

/** Largest subnet drawn one character per address; larger ones are drawn as runs. */
export const MAX_PLAIN_MAP = 1024

/** What one address is: held by an owner, reserved, free in a pool, or in no pool. */
export type AddressState = 'used' | 'reserved' | 'free' | 'outside'

const SYMBOL: Readonly<Record<AddressState, string>> = {
  used: '+',
  reserved: 'X',
  free: '.',
  outside: '-',
}

export interface PoolUsage {
  /** The pool's name; absent for an unnamed pool. */
  name?: string
  start: string
  end: string
  size: number
  used: number
  free: number
}

export interface SubnetUsage {
  cidr: string
  name?: string
  gateway?: string
  dhcp: boolean
  /** Addresses in the subnet, in decimal: an IPv6 subnet's count exceeds 2^53. */
  size: string
  /** Held by an owner (a host, a DHCP relay). */
  used: number
  /** Never handed out automatically and not held: network, broadcast, gateway, external. */
  reserved: number
  /** In a pool, neither held nor reserved: what allocation may still hand out. */
  free: number
  pools: PoolUsage[]
  /** The externally reserved ranges (the group's `reservations`). */
  external: RangeSpec[]
  /** `address`: one character per address; `runs`: `<character><count>` per run. */
  mapFormat: 'address' | 'runs'
  map: string
}

export interface NetworkUsage {
  network: string
  subnets: SubnetUsage[]
  /** Every held address and its owner, in address order. */
  allocations: { owner: string; ip: string }[]
}

/** One address held by `owner`. */
export interface Held {
  readonly owner: string
  readonly address: Address
}

/** Which held addresses a change of definition would leave outside it, or on a reserved one. */
export type Orphan = { owner: string; ip: string }

/** Network usage reads of `Ipam`. */
export type Usage = ReturnType<typeof createUsage>

export function createUsage(layouts: LayoutCache) {
  /** The layout and the held addresses, read at one version. */
  async function snapshot(network: string): Promise<{ layout?: Layout; held: Held[] }> {
    const k = layouts.keys(network)
    for (let attempt = 0; attempt < MAX_ATTEMPTS; attempt++) {
      const { version, layout } = await layouts.read(network, true)
      const replies =
        (await layouts.redis.multi().hget(k.meta, 'version').hgetall(k.owners).exec()) ?? []
      if (String(replies[0]?.[1] ?? '0') !== version) continue
      const owners = (replies[1]?.[1] ?? {}) as Record<string, string>
      const held = Object.entries(owners).map(([owner, hex]) => ({ owner, address: fromHex(hex) }))
      return { ...(layout === undefined ? {} : { layout }), held }
    }
    throw new Conflict(`network ${network} kept changing while being read`, undefined, {
      retryable: true,
    })
  }

  return {
    /** The network's usage map; NotFound when it does not exist. */
    async usage(network: string): Promise<NetworkUsage> {
      const { layout, held } = await snapshot(network)
      if (layout === undefined) throw new NotFound('network', network)
      return describeUsage(network, layout, held)
    },

    /**
     * What `defineNetwork(network, spec, options)` would refuse to leave behind: each held
     * address the new definition drops or reserves (a new gateway) — but for those of the
     * owners `options.releaseDropped` names in dropped subnets, which it gives back. Empty
     * for a network that does not exist yet. Throws what `defineNetwork` throws for an
     * invalid definition.
     */
    async orphans(
      network: string,
      spec: NetworkSpec,
      options: DefineOptions = {},
    ): Promise<Orphan[]> {
      const next = compile(network, normalizeNetwork(spec))
      const { layout, held } = await snapshot(network)
      if (layout === undefined) return []
      const vacated = vacatedSpans(layout, next)
      const prefix = options.releaseDropped?.ownerPrefix
      const dropped = prefix === undefined ? [] : droppedSpans(layout, next)
      const givenBack = (h: Held) =>
        prefix !== undefined &&
        h.owner.startsWith(prefix) &&
        dropped.some((span) => containsAddress(span, h.address))
      return held
        .filter((h) => vacated.some((span) => containsAddress(span, h.address)) && !givenBack(h))
        .sort(byAddress)
        .map((h) => ({ owner: h.owner, ip: formatIp(h.address) }))
    },
  }
}

const byAddress = (a: Held, b: Held) =>
  a.address.version - b.address.version ||
  (a.address.value < b.address.value ? -1 : a.address.value > b.address.value ? 1 : 0)

/** The usage of every subnet of `layout` with `held` taken. Pure. */
export function describeUsage(
  network: string,
  layout: Layout,
  held: readonly Held[],
): NetworkUsage {
  const sorted = [...held].sort(byAddress)
  return {
    network,
    subnets: layout.subnets.map((s) => subnetUsage(s, sorted)),
    allocations: sorted.map((h) => ({ owner: h.owner, ip: formatIp(h.address) })),
  }
}

/** One run of addresses in the same state, `first` to `last`. */
interface Run {
  readonly state: AddressState
  readonly first: bigint
  readonly last: bigint
}

function subnetUsage(subnet: SubnetLayout, held: readonly Held[]): SubnetUsage {
  const { cidr, definition } = subnet
  const inSubnet = held.filter((h) => containsAddress(cidr, h.address))
  const runs = runsOf(subnet, inSubnet)
  const count = (state: AddressState) =>
    runs.reduce((n, r) => (r.state === state ? n + (r.last - r.first + 1n) : n), 0n)
  const size = spanSize(cidr)
  return {
    cidr: cidr.text,
    ...(definition.name === undefined ? {} : { name: definition.name }),
    ...(definition.gateway === undefined ? {} : { gateway: definition.gateway }),
    dhcp: definition.dhcp,
    size: size.toString(),
    used: Number(count('used')),
    reserved: Number(count('reserved')),
    free: Number(count('free')),
    pools: subnet.pools.map((p) => {
      const within = (r: Run, state: AddressState) =>
        r.state !== state || r.last < p.span.first || r.first > p.span.last
          ? 0n
          : min(r.last, p.span.last) - max(r.first, p.span.first) + 1n
      const sum = (state: AddressState) => runs.reduce((n, r) => n + within(r, state), 0n)
      return {
        ...(p.name === undefined ? {} : { name: p.name }),
        start: formatIp({ version: p.span.version, value: p.span.first }),
        end: formatIp({ version: p.span.version, value: p.span.last }),
        size: p.size,
        used: Number(sum('used')),
        free: Number(sum('free')),
      }
    }),
    external: definition.external,
    mapFormat: size <= BigInt(MAX_PLAIN_MAP) ? 'address' : 'runs',
    map: drawRuns(runs, size <= BigInt(MAX_PLAIN_MAP)),
  }
}

/**
 * The subnet as runs of one state, first address to last: a sweep over the boundaries of
 * held addresses, reserved addresses and ranges, and pools. Held wins over reserved
 * (Ganeti lets an operator reserve an address in use), reserved over a pool.
 */
export function runsOf(subnet: SubnetLayout, held: readonly Held[]): Run[] {
  const { version } = subnet.cidr
  const spans: [AddressState, Span][] = [
    ...held.map((h): [AddressState, Span] => [
      'used',
      { version, first: h.address.value, last: h.address.value },
    ]),
    ...subnet.reserved.map((value): [AddressState, Span] => [
      'reserved',
      { version, first: value, last: value },
    ]),
    ...subnet.external.map((span): [AddressState, Span] => ['reserved', span]),
    ...subnet.pools.map((p): [AddressState, Span] => ['free', p.span]),
  ]
  const deltas = new Map<bigint, Record<AddressState, number>>()
  const at = (position: bigint) => {
    let d = deltas.get(position)
    if (d === undefined) {
      d = { used: 0, reserved: 0, free: 0, outside: 0 }
      deltas.set(position, d)
    }
    return d
  }
  for (const [state, span] of spans) {
    at(span.first)[state] += 1
    at(span.last + 1n)[state] -= 1
  }
  at(subnet.cidr.first)
  const positions = [...deltas.keys()]
    .filter((p) => p <= subnet.cidr.last)
    .sort((a, b) => (a < b ? -1 : a > b ? 1 : 0))
  const depth = { used: 0, reserved: 0, free: 0, outside: 0 }
  const runs: Run[] = []
  for (const [i, position] of positions.entries()) {
    const d = deltas.get(position)
    for (const state of ['used', 'reserved', 'free'] as const) depth[state] += d?.[state] ?? 0
    const state: AddressState =
      depth.used > 0
        ? 'used'
        : depth.reserved > 0
          ? 'reserved'
          : depth.free > 0
            ? 'free'
            : 'outside'
    const last = (positions[i + 1] ?? subnet.cidr.last + 1n) - 1n
    const previous = runs.at(-1)
    if (previous?.state === state) runs[runs.length - 1] = { ...previous, last }
    else runs.push({ state, first: position, last })
  }
  return runs
}

/** The runs drawn one character per address, or as `<character><count>` per run. */
export function drawRuns(runs: readonly Run[], perAddress: boolean): string {
  return runs
    .map((r) => {
      const n = r.last - r.first + 1n
      return perAddress ? SYMBOL[r.state].repeat(Number(n)) : `${SYMBOL[r.state]}${n}`
    })
    .join('')
}

const min = (a: bigint, b: bigint) => (a < b ? a : b)
const max = (a: bigint, b: bigint) => (a > b ? a : b)
