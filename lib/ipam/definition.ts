/**
 * A network's definition (subnets, pools, external reservations): the input schema, its
 * canonical stored form, the rules it must obey and the layout the allocator works from.
 * Pure: no Redis here.
 */
import * as v from 'valibot'
import {
  type Address,
  type Cidr,
  canonicalIp,
  containsAddress,
  contains as containsSpan,
  formatIp,
  formatSpan,
  overlaps,
  parseCidr,
  parseIp,
  parseSpan,
  type Span,
  spanSize,
  subtract,
  toHex,
} from './address.ts'
import { Conflict, InvalidRequest, NotInSubnet, Overlap } from './errors.ts'

/** Pools are bitmaps in Redis, so they are bounded: 2^20 addresses (128 KiB) at most. */
export const MAX_POOL_SIZE = 1 << 20

const Name = v.pipe(v.string(), v.minLength(1))
export const RangeSchema = v.strictObject({ start: v.string(), end: v.string() })
export const PoolSchema = v.strictObject({
  start: v.string(),
  end: v.string(),
  name: v.optional(Name),
})
export const SubnetSchema = v.strictObject({
  cidr: v.string(),
  gateway: v.optional(v.string()),
  dhcp: v.optional(v.boolean()),
  name: v.optional(Name),
  pools: v.optional(v.array(PoolSchema)),
  external: v.optional(v.array(RangeSchema)),
})
export const NetworkSchema = v.strictObject({ subnets: v.array(SubnetSchema) })

/** An inclusive address range, e.g. `{start: '10.0.0.10', end: '10.0.0.19'}`. */
export interface RangeSpec {
  start: string
  end: string
}
export interface PoolSpec extends RangeSpec {
  name?: string
}
export interface SubnetSpec {
  cidr: string
  gateway?: string
  dhcp?: boolean
  name?: string
  pools?: PoolSpec[]
  external?: RangeSpec[]
}
export interface NetworkSpec {
  subnets: SubnetSpec[]
}

/** Canonical stored form: addresses re-printed, defaults filled in, fixed key order. */
export interface SubnetDefinition {
  cidr: string
  gateway?: string
  dhcp: boolean
  name?: string
  pools: PoolSpec[]
  external: RangeSpec[]
}
export interface NetworkDefinition {
  subnets: SubnetDefinition[]
}

export interface PoolLayout {
  /** Position among all pools of the network, in allocation order. */
  readonly index: number
  readonly subnet: number
  readonly span: Span
  readonly size: number
  readonly name?: string
  /** `name`, or `start-end` for an unnamed pool. */
  readonly label: string
  readonly startHex: string
  readonly endHex: string
}

export interface SubnetLayout {
  readonly index: number
  readonly definition: SubnetDefinition
  readonly cidr: Cidr
  readonly gateway?: Address
  readonly pools: readonly PoolLayout[]
  readonly external: readonly Span[]
  /** Never handed out: network and broadcast addresses, the gateway. */
  readonly reserved: readonly bigint[]
}

export interface Layout {
  readonly definition: NetworkDefinition
  readonly subnets: readonly SubnetLayout[]
  /** Every pool, first pool of the first subnet first. */
  readonly pools: readonly PoolLayout[]
}

export function parseSpec<T>(schema: v.GenericSchema<unknown, T>, input: unknown, what: string): T {
  const result = v.safeParse(schema, input)
  if (!result.success) throw new InvalidRequest(`invalid ${what}: ${v.summarize(result.issues)}`)
  return result.output
}

const range = (r: RangeSpec): RangeSpec => {
  const span = parseSpan(r.start, r.end)
  return {
    start: formatIp({ version: span.version, value: span.first }),
    end: formatIp({ version: span.version, value: span.last }),
  }
}

/** Canonical form of one subnet; throws InvalidRequest on unparsable input. */
export function normalizeSubnet(spec: SubnetSpec): SubnetDefinition {
  return canonicalSubnet(parseSpec(SubnetSchema, spec, 'subnet'))
}

function canonicalSubnet(s: v.InferOutput<typeof SubnetSchema>): SubnetDefinition {
  return {
    cidr: parseCidr(s.cidr).text,
    ...(s.gateway === undefined ? {} : { gateway: canonicalIp(s.gateway) }),
    dhcp: s.dhcp ?? false,
    ...(s.name === undefined ? {} : { name: s.name }),
    pools: (s.pools ?? []).map((p) => ({
      ...range(p),
      ...(p.name === undefined ? {} : { name: p.name }),
    })),
    external: (s.external ?? []).map(range),
  }
}

export function normalizeNetwork(spec: NetworkSpec): NetworkDefinition {
  const n = parseSpec(NetworkSchema, spec, 'network')
  return { subnets: n.subnets.map(canonicalSubnet) }
}

export const normalizeRange = (r: RangeSpec): RangeSpec => range(parseSpec(RangeSchema, r, 'range'))

function reservedOf(cidr: Cidr, gateway: Address | undefined): bigint[] {
  const reserved: bigint[] = []
  if (cidr.version === 4 && cidr.prefix <= 30) reserved.push(cidr.first, cidr.last)
  // IPv6 has no broadcast; its first address is the subnet-router anycast address.
  if (cidr.version === 6 && cidr.prefix <= 126) reserved.push(cidr.first)
  if (gateway !== undefined) reserved.push(gateway.value)
  return reserved
}

/**
 * Checks every rule of a network definition and returns its layout.
 *
 * Throws NotInSubnet (gateway, pool or external range outside its subnet), Overlap
 * (subnets, pools or external ranges that overlap), Conflict (two DHCP subnets of one
 * IP version, duplicate subnet names, gateway on the network/broadcast address) and
 * InvalidRequest (unparsable input, oversized pools).
 */
export function compile(network: string, definition: NetworkDefinition): Layout {
  const subnets: SubnetLayout[] = []
  const pools: PoolLayout[] = []
  const dhcpByVersion = new Map<number, string>()
  const names = new Set<string>()
  for (const [index, def] of definition.subnets.entries()) {
    const cidr = parseCidr(def.cidr)
    const gateway = def.gateway === undefined ? undefined : parseIp(def.gateway)
    if (gateway !== undefined) {
      if (!containsAddress(cidr, gateway))
        throw new NotInSubnet(network, `gateway ${def.gateway}`, cidr.text)
      if (
        cidr.version === 4 &&
        cidr.prefix <= 30 &&
        (gateway.value === cidr.first || gateway.value === cidr.last)
      ) {
        throw new Conflict(
          `network ${network}: gateway ${def.gateway} is the network or broadcast address of ${cidr.text}`,
        )
      }
    }
    for (const other of subnets) {
      if (overlaps(other.cidr, cidr))
        throw new Overlap(network, `subnet ${cidr.text}`, `subnet ${other.cidr.text}`)
    }
    if (def.dhcp) {
      const previous = dhcpByVersion.get(cidr.version)
      if (previous !== undefined) {
        throw new Conflict(
          `network ${network}: DHCP is already on for IPv${cidr.version} subnet ${previous}; ${cidr.text} cannot have it too`,
        )
      }
      dhcpByVersion.set(cidr.version, cidr.text)
    }
    if (def.name !== undefined) {
      if (names.has(def.name))
        throw new Conflict(`network ${network}: two subnets are named ${def.name}`)
      names.add(def.name)
    }
    const subnetPools: PoolLayout[] = []
    for (const p of def.pools) {
      const span = parseSpan(p.start, p.end)
      const label = p.name ?? formatSpan(span)
      if (!containsSpan(cidr, span))
        throw new NotInSubnet(network, `pool ${formatSpan(span)}`, cidr.text)
      if (spanSize(span) > BigInt(MAX_POOL_SIZE)) {
        throw new InvalidRequest(
          `pool ${formatSpan(span)} is larger than ${MAX_POOL_SIZE} addresses; use a bounded range`,
        )
      }
      for (const other of pools.concat(subnetPools)) {
        if (overlaps(other.span, span))
          throw new Overlap(network, `pool ${formatSpan(span)}`, `pool ${formatSpan(other.span)}`)
      }
      subnetPools.push({
        index: pools.length + subnetPools.length,
        subnet: index,
        span,
        size: Number(spanSize(span)),
        ...(p.name === undefined ? {} : { name: p.name }),
        label,
        startHex: toHex({ version: span.version, value: span.first }),
        endHex: toHex({ version: span.version, value: span.last }),
      })
    }
    const external: Span[] = []
    for (const r of def.external) {
      const span = parseSpan(r.start, r.end)
      if (!containsSpan(cidr, span))
        throw new NotInSubnet(network, `external range ${formatSpan(span)}`, cidr.text)
      for (const other of external) {
        if (overlaps(other, span))
          throw new Overlap(
            network,
            `external range ${formatSpan(span)}`,
            `external range ${formatSpan(other)}`,
          )
      }
      external.push(span)
    }
    pools.push(...subnetPools)
    subnets.push({
      index,
      definition: def,
      cidr,
      ...(gateway === undefined ? {} : { gateway }),
      pools: subnetPools,
      external,
      reserved: reservedOf(cidr, gateway),
    })
  }
  return { definition, subnets, pools }
}

/**
 * The pool's exclusion bitmap as Redis stores it (bit 0 = most significant bit of byte 0):
 * set for the addresses never handed out automatically (network, broadcast, gateway,
 * external ranges) and for the padding past the pool's end.
 */
export function exclusionBitmap(subnet: SubnetLayout, pool: PoolLayout): Buffer {
  const bytes = Buffer.alloc(Math.ceil(pool.size / 8))
  const set = (bit: number) => {
    const byte = bit >> 3
    bytes[byte] = (bytes[byte] ?? 0) | (0x80 >> (bit & 7))
  }
  for (let bit = pool.size; bit < bytes.length * 8; bit++) set(bit)
  const { first, last } = pool.span
  for (const value of subnet.reserved) {
    if (value >= first && value <= last) set(Number(value - first))
  }
  for (const ext of subnet.external) {
    if (!overlaps(ext, pool.span)) continue
    const from = Math.max(0, Number(ext.first - first))
    const to = Math.min(pool.size - 1, Number(ext.last - first))
    for (let bit = from; bit <= to; bit++) set(bit)
  }
  return bytes
}

/** Finds a subnet by CIDR or name. */
export function findSubnet(layout: Layout, ident: string): SubnetLayout | undefined {
  return layout.subnets.find(
    (s) =>
      s.definition.name === ident ||
      s.definition.cidr === ident ||
      safeCidr(ident) === s.definition.cidr,
  )
}

function safeCidr(text: string): string | undefined {
  try {
    return parseCidr(text).text
  } catch {
    return undefined
  }
}

/** The subnet whose CIDR holds every address of `span`. */
export function subnetHolding(layout: Layout, span: Span): SubnetLayout | undefined {
  return layout.subnets.find((s) => containsSpan(s.cidr, span))
}

/**
 * What must hold no address for a network's definition to change from `current` to
 * `next`: every part of its subnets the new definition drops, and every address the new
 * one reserves (network, broadcast, gateway). Pure.
 *
 * @example
 * vacatedSpans(compile('g', a), compile('g', b)) // [10.20.0.0-10.20.0.255] when b drops that subnet
 */
export function vacatedSpans(current: Layout, next: Layout): Span[] {
  const reserved = next.subnets.flatMap((s) =>
    s.reserved.map((value) => ({ version: s.cidr.version, first: value, last: value })),
  )
  return [...droppedSpans(current, next), ...reserved]
}

/**
 * The parts of `current`'s subnets that no subnet of `next` holds: addresses there lie in
 * no subnet once the definition changes. Pure.
 *
 * @example
 * droppedSpans(compile('g', a), compile('g', b)) // [fd00:10::-fd00:10::ffff:ffff:ffff:ffff] when b moves that /64
 */
export function droppedSpans(current: Layout, next: Layout): Span[] {
  return current.subnets.flatMap((s) =>
    next.subnets.reduce<Span[]>(
      (left, kept) => left.flatMap((part) => subtract(part, kept.cidr)),
      [s.cidr],
    ),
  )
}
