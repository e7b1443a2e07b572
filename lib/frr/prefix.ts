/**
 * The prefixes Hydrazine announces, in the form FRR writes and shows them: a public IPv4
 * address as `A.B.C.D/32` via an IPv4 next hop, a public IPv6 address as `<ipv6>/128` via
 * an IPv6 next hop, IPv6 in canonical compressed lowercase form (`2001:db8:ff::5`, as
 * Node's `new URL` prints it). FRR re-prints whatever it is given in that form, so any
 * other spelling would never match what it shows.
 */
import { isIPv4, isIPv6 } from 'node:net'
import { canonicalIp as canonical } from '../ipam/address.ts'
import { InvalidAnnouncementError } from './errors.ts'

/** An IP address family, named as FRR names its BGP tables (`show bgp ipv6 unicast`). */
export type IpFamily = 'ipv4' | 'ipv6'

/** Both families, in the order Hydrazine writes their address-family blocks. */
export const IP_FAMILIES: readonly IpFamily[] = ['ipv4', 'ipv6']

/** `ipv4` or `ipv6` for an IP address, undefined for anything else. */
export function ipFamily(ip: string): IpFamily | undefined {
  if (isIPv4(ip)) return 'ipv4'
  // A zone (`fe80::1%eth0`) is no address to announce or route to.
  if (isIPv6(ip) && !ip.includes('%')) return 'ipv6'
  return undefined
}

/**
 * The address in the form FRR prints it, or undefined when it is not an IP address.
 *
 * @example canonicalIp('2001:DB8:ff:0:0::5') // '2001:db8:ff::5'
 */
export function canonicalIp(ip: string): string | undefined {
  return ipFamily(ip) === undefined ? undefined : canonical(ip)
}

/**
 * The family of a prefix Hydrazine has in FRR: which of FRR's tables and address-family
 * blocks it lives in. Assumes a prefix as FRR shows it (no check).
 */
export function prefixFamily(prefix: string): IpFamily {
  return prefix.includes(':') ? 'ipv6' : 'ipv4'
}

/**
 * The prefix that announces one public IP: `/32` for IPv4, `/128` for IPv6, canonical.
 * Throws InvalidAnnouncementError when `ip` is not an IP address.
 *
 * @example
 * publicPrefix('203.0.113.7') // '203.0.113.7/32'
 * publicPrefix('2001:DB8:ff::5') // '2001:db8:ff::5/128'
 */
export function publicPrefix(ip: string): string {
  const canonical = canonicalIp(ip)
  if (canonical === undefined)
    throw new InvalidAnnouncementError(ip, null, 'not an IPv4 or IPv6 address')
  return `${canonical}/${prefixFamily(canonical) === 'ipv4' ? 32 : 128}`
}

/**
 * Why Hydrazine cannot announce `prefix` via `nextHop` (null: withdraw it), or undefined
 * when it can: the prefix must be a canonical `/32` or `/128`, the next hop a canonical
 * address of the same family.
 *
 * @example
 * announcementProblem('2001:db8:ff::5/128', '10.77.0.105')
 * // 'next hop 10.77.0.105 is not an IPv6 address, as the prefix is'
 */
export function announcementProblem(prefix: string, nextHop: string | null): string | undefined {
  const slash = prefix.indexOf('/')
  const ip = slash < 0 ? prefix : prefix.slice(0, slash)
  const family = ipFamily(ip)
  if (family === undefined || slash < 0) return 'not an IPv4 /32 or IPv6 /128 prefix'
  const host = publicPrefix(ip)
  if (prefix !== host) return `a public IP is announced as ${host}`
  if (nextHop === null) return undefined
  const nextHopFamily = ipFamily(nextHop)
  if (nextHopFamily !== family)
    return `next hop ${nextHop} is not an ${family === 'ipv4' ? 'IPv4' : 'IPv6'} address, as the prefix is`
  const canonical = canonicalIp(nextHop)
  if (nextHop !== canonical) return `write next hop ${nextHop} as ${canonical}`
  return undefined
}
