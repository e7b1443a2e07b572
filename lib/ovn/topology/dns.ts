/**
 * A group's DNS names, as OVN's native DNS answers them (the NB `DNS` table, referenced
 * from the group's switch's `dns_records`): each host is `<name>.<group>.<zone>` — and
 * `<name>` alone — inside its own group, with a PTR record for its address. OVN answers a
 * query for one of these names when it crosses the group's switch (`ls_in_dns_lookup`),
 * whatever address it was sent to; any other query goes on unanswered by OVN. Here too: a
 * host's `DNS` row (`hostDnsRows`) and the ACL keeping queries from outside off them
 * (`dnsGuardRows`). Pure.
 */
import { formatIp, parseIp, toHex } from '../../ipam/address.ts'
import { inSubnet } from './addresses.ts'
import type { GroupContext, PartDraft } from './context.ts'
import { HOST_KEY, topologyNames as names, rowKeys } from './names.ts'
import type { DesiredRow } from './rows.ts'
import type { GroupMember } from './spec.ts'

/** Priority of the drop ACL that keeps DNS queries from outside off the group's records. */
const DNS_GUARD_PRIORITY = 1000

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

/**
 * OVN's DNS responder answers any query crossing the switch, from outside too (one that
 * reached a host through its NAT): with DNS on, UDP 53 from the router port is dropped
 * unless it comes from one of the group's own subnets. Nothing without DNS.
 */
export function dnsGuardRows({ g, b, spec, lsKey, cidrsOf }: GroupContext): DesiredRow[] {
  const rows: DesiredRow[] = []
  if (!spec.dns) return rows
  const inside = (version: 4 | 6, family: 'ip4' | 'ip6') => {
    const cidrs = cidrsOf(version)
    return cidrs.length > 0 ? `(${family} && ${family}.src != {${cidrs.join(', ')}})` : family
  }
  b.dropAcl(rows, lsKey, rowKeys.dnsGuardAcl, {
    direction: 'from-lport',
    priority: DNS_GUARD_PRIORITY,
    match: `inport == ${JSON.stringify(names.switchRouterPort(g))} && udp.dst == 53 && (${inside(4, 'ip4')} || ${inside(6, 'ip6')})`,
  })
  return rows
}

/** A built host's DNS records, answered on the group's switch only. */
export function hostDnsRows({ g, b, spec, lsKey }: GroupContext, draft: PartDraft, m: GroupMember) {
  if (!spec.dns) return
  const ips = [
    m.ip,
    ...(m.ip6 && spec.network6 && inSubnet(m.ip6, spec.network6.cidr) ? [m.ip6] : []),
  ]
  const records = hostDnsRecords(m.dnsName ?? m.hostName, dnsDomain(g, spec.dns.zone), ...ips)
  b.dns(draft.rows, lsKey, rowKeys.hostDns(m.hostName), records, { [HOST_KEY]: m.hostName })
}
