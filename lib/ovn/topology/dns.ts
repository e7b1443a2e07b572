/**
 * A group's DNS names, as OVN's native DNS answers them (the NB `DNS` table, referenced
 * from the group's switch's `dns_records`): each host is `<name>.<group>.<zone>` — and
 * `<name>` alone — inside its own group, with a PTR record for its address. OVN answers a
 * query for one of these names when it crosses the group's switch (`ls_in_dns_lookup`),
 * whatever address it was sent to; any other query goes on unanswered by OVN. Pure.
 */
import { formatIp, parseIp, toHex } from '../../ipam/address.ts'

/**
 * The domain a group's hosts are named in: `<group>.<zone>`, what a host puts in its
 * resolver's `search` line.
 *
 * @example dnsDomain('group-a', 'hydrazine.internal') // 'group-a.hydrazine.internal'
 */
export function dnsDomain(group: string, zone: string): string {
  return `${group}.${zone}`
}

/**
 * The records of one host: its fully qualified name and its short name to its addresses
 * (A or AAAA, by each address's family; OVN keeps them space-separated), and each
 * address's reverse name to the full name (PTR). Names are lowercase: DNS compares them without case, and OVN's lookup keys are
 * what the query carries, lowercased.
 *
 * @example
 * hostDnsRecords('web', 'group-a.hydrazine.internal', '10.10.10.2')
 * // { 'web.group-a.hydrazine.internal': '10.10.10.2', web: '10.10.10.2',
 * //   '2.10.10.10.in-addr.arpa': 'web.group-a.hydrazine.internal' }
 */
export function hostDnsRecords(
  name: string,
  domain: string,
  ...ips: readonly string[]
): Record<string, string> {
  const host = name.toLowerCase()
  const fqdn = `${host}.${domain.toLowerCase()}`
  const all = ips.join(' ')
  return {
    [fqdn]: all,
    [host]: all,
    ...Object.fromEntries(ips.map((ip) => [reverseName(ip), fqdn])),
  }
}

/**
 * The name a PTR query for `ip` asks about: `in-addr.arpa` (RFC 1035) for IPv4, one
 * nibble per label under `ip6.arpa` (RFC 3596) for IPv6.
 *
 * @example reverseName('10.10.10.2') // '2.10.10.10.in-addr.arpa'
 * @example reverseName('fd00::1') // '1.0.0.0.….0.d.f.ip6.arpa' (32 nibbles)
 */
export function reverseName(ip: string): string {
  const address = parseIp(ip)
  if (address.version === 4) {
    return `${formatIp(address).split('.').reverse().join('.')}.in-addr.arpa`
  }
  // toHex: the address's 32 nibbles, most significant first.
  return `${[...toHex(address)].reverse().join('.')}.ip6.arpa`
}
