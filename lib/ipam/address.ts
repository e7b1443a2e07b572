/**
 * IP address arithmetic for IPAM: addresses as bigints, CIDRs and ranges, and the
 * fixed-width hex form the Lua scripts compare and add (8 hex digits for IPv4, 32 for
 * IPv6, lowercase), so that string order is numeric order inside Redis.
 */
import { isIPv4, isIPv6 } from 'node:net'
import { InvalidRequest } from './errors.ts'

export type IpVersion = 4 | 6

export interface Address {
  readonly version: IpVersion
  readonly value: bigint
}

/** An inclusive range of addresses of one version. */
export interface Span {
  readonly version: IpVersion
  readonly first: bigint
  readonly last: bigint
}

export interface Cidr extends Span {
  readonly prefix: number
  /** Canonical text, e.g. `10.0.0.0/24`, `2001:db8::/64`. */
  readonly text: string
}

const bits = (version: IpVersion): number => (version === 4 ? 32 : 128)

export function parseIp(text: string): Address {
  if (isIPv4(text)) {
    const value = text.split('.').reduce((acc, octet) => (acc << 8n) | BigInt(octet), 0n)
    return { version: 4, value }
  }
  if (isIPv6(text) && !text.includes('%')) return { version: 6, value: parseIpv6(text) }
  throw new InvalidRequest(`not an IP address: ${JSON.stringify(text)}`)
}

function parseIpv6(text: string): bigint {
  let head = text
  let tailV4: bigint | undefined
  const lastColon = text.lastIndexOf(':')
  if (text.slice(lastColon + 1).includes('.')) {
    tailV4 = parseIp(text.slice(lastColon + 1)).value
    head = `${text.slice(0, lastColon + 1)}0:0`
  }
  const [left = '', right] = head.split('::')
  const leftGroups = left === '' ? [] : left.split(':')
  const rightGroups = right === undefined || right === '' ? [] : right.split(':')
  const zeros = right === undefined ? 0 : 8 - leftGroups.length - rightGroups.length
  const groups = [...leftGroups, ...Array<string>(zeros).fill('0'), ...rightGroups]
  let value = groups.reduce((acc, g) => (acc << 16n) | BigInt(`0x${g}`), 0n)
  if (tailV4 !== undefined) value = (value & ~0xffffffffn) | tailV4
  return value
}

/** Canonical text: dotted quad, or RFC 5952 compressed IPv6. */
export function formatIp(address: Address): string {
  const { version, value } = address
  if (version === 4) {
    return [24n, 16n, 8n, 0n].map((s) => ((value >> s) & 0xffn).toString()).join('.')
  }
  const groups = [112n, 96n, 80n, 64n, 48n, 32n, 16n, 0n].map((s) => (value >> s) & 0xffffn)
  // The longest run (>= 2) of zero groups, leftmost on ties, becomes "::".
  let bestStart = -1
  let bestLength = 1
  for (let i = 0; i < 8; ) {
    if (groups[i] !== 0n) {
      i++
      continue
    }
    let j = i
    while (j < 8 && groups[j] === 0n) j++
    if (j - i > bestLength) {
      bestStart = i
      bestLength = j - i
    }
    i = j
  }
  const hex = groups.map((g) => g.toString(16))
  if (bestStart < 0) return hex.join(':')
  return `${hex.slice(0, bestStart).join(':')}::${hex.slice(bestStart + bestLength).join(':')}`
}

/** Re-prints an address in canonical form (`2001:DB8:0::1` → `2001:db8::1`). */
export function canonicalIp(text: string): string {
  return formatIp(parseIp(text))
}

export function parseCidr(text: string): Cidr {
  const slash = text.indexOf('/')
  if (slash < 0) throw new InvalidRequest(`not a CIDR (missing /prefix): ${JSON.stringify(text)}`)
  const base = parseIp(text.slice(0, slash))
  const prefixText = text.slice(slash + 1)
  const prefix = Number(prefixText)
  if (!/^\d{1,3}$/.test(prefixText) || prefix > bits(base.version)) {
    throw new InvalidRequest(`bad prefix length in CIDR ${JSON.stringify(text)}`)
  }
  const hostBits = BigInt(bits(base.version) - prefix)
  const hostMask = (1n << hostBits) - 1n
  if ((base.value & hostMask) !== 0n) {
    throw new InvalidRequest(`CIDR ${text} has host bits set`)
  }
  return {
    version: base.version,
    prefix,
    first: base.value,
    last: base.value | hostMask,
    text: `${formatIp(base)}/${prefix}`,
  }
}

/** Builds a span from two addresses of the same version, start <= end. */
export function parseSpan(start: string, end: string): Span {
  const a = parseIp(start)
  const b = parseIp(end)
  if (a.version !== b.version) {
    throw new InvalidRequest(`range ${start}-${end} mixes IPv4 and IPv6`)
  }
  if (a.value > b.value) throw new InvalidRequest(`range ${start}-${end} ends before it starts`)
  return { version: a.version, first: a.value, last: b.value }
}

export const spanSize = (s: Span): bigint => s.last - s.first + 1n

export const contains = (outer: Span, inner: Span): boolean =>
  outer.version === inner.version && outer.first <= inner.first && inner.last <= outer.last

export const containsAddress = (span: Span, a: Address): boolean =>
  span.version === a.version && span.first <= a.value && a.value <= span.last

export const overlaps = (a: Span, b: Span): boolean =>
  a.version === b.version && a.first <= b.last && b.first <= a.last

/** `a` minus `b`: zero, one or two spans. */
export function subtract(a: Span, b: Span): Span[] {
  if (!overlaps(a, b)) return [a]
  const parts: Span[] = []
  if (a.first < b.first) parts.push({ version: a.version, first: a.first, last: b.first - 1n })
  if (b.last < a.last) parts.push({ version: a.version, first: b.last + 1n, last: a.last })
  return parts
}

export const formatSpan = (s: Span): string =>
  `${formatIp({ version: s.version, value: s.first })}-${formatIp({ version: s.version, value: s.last })}`

/** Fixed-width lowercase hex: the form addresses take as Redis hash fields. */
export function toHex(address: Address): string {
  return address.value.toString(16).padStart(address.version === 4 ? 8 : 32, '0')
}

export function fromHex(hex: string): Address {
  if (hex.length !== 8 && hex.length !== 32) throw new InvalidRequest(`bad address key ${hex}`)
  return { version: hex.length === 8 ? 4 : 6, value: BigInt(`0x${hex}`) }
}

/**
 * The address a host with `mac` takes in the IPv6 /64 `cidr` by SLAAC (RFC 4862) with a
 * modified EUI-64 interface identifier (RFC 4291 appendix A): the MAC with `ff:fe` in its
 * middle and the universal/local bit flipped. Neutron gives a port on a SLAAC subnet the
 * same address.
 *
 * @example eui64Address('fd00:10::/64', '0a:00:00:00:00:01') // 'fd00:10::800:ff:fe00:1'
 */
export function eui64Address(cidr: string, mac: string): string {
  const network = parseCidr(cidr)
  if (network.version !== 6 || network.prefix !== 64) {
    throw new InvalidRequest(`SLAAC needs an IPv6 /64, not ${cidr}`)
  }
  const octets = mac.split(':').map((h) => Number.parseInt(h, 16))
  if (octets.length !== 6 || octets.some((o) => !(o >= 0 && o <= 255))) {
    throw new InvalidRequest(`not a MAC address: ${JSON.stringify(mac)}`)
  }
  const [a = 0, b = 0, c = 0, d = 0, e = 0, f = 0] = octets
  const id = [a ^ 0x02, b, c, 0xff, 0xfe, d, e, f].reduce((acc, o) => (acc << 8n) | BigInt(o), 0n)
  return formatIp({ version: 6, value: network.first | id })
}
