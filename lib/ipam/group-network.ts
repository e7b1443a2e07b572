/**
 * A group's network as IPAM takes it: the IPAM network spec of a group's spec, and the
 * owners its hosts' SLAAC addresses are held under. Pure; shared by the group's handler
 * and by the checks before a group's spec is stored.
 */
import { DEFAULT_POOL } from '../model/group-network.ts'
import type { ResourceGroup } from '../model/objects.ts'
import { contains, formatIp, parseCidr, parseSpan, type Span, subtract } from './address.ts'
import type { NetworkSpec } from './index.ts'

const IPV6_OWNER_PREFIX = 'ipv6/'

/**
 * The IPAM owner of a host's SLAAC address in its group's `network6` (its second address,
 * beside the one its own name holds). The `/` keeps it apart from host names.
 */
export function ipv6OwnerOf(host: string): string {
  return `${IPV6_OWNER_PREFIX}${host}`
}

/** The host an IPv6 owner names; undefined for any other owner. */
export function ipv6HostOf(owner: string): string | undefined {
  return owner.startsWith(IPV6_OWNER_PREFIX) ? owner.slice(IPV6_OWNER_PREFIX.length) : undefined
}

/**
 * Every host's SLAAC address owner, as IPAM matches them (`DefineOptions.releaseDropped`):
 * a group network whose `network6` moved or went gives their old addresses back in the
 * same step that defines it.
 */
export const IPV6_OWNERS = { ownerPrefix: IPV6_OWNER_PREFIX } as const

/**
 * The group's IPAM network: its subnets, each with its automatic `default` pool (the
 * usable range minus the group's named pools), the named pools it holds, and the
 * group's reservations inside it as external ranges (never handed out automatically).
 * The IPv6 `network6` has no pool: its hosts' addresses follow from their MACs (SLAAC)
 * and are taken one by one (`ipv6OwnerOf`).
 */
export function networkSpecOf(group: Pick<ResourceGroup, 'spec'>): NetworkSpec {
  const { spec } = group
  const subnets: {
    cidr: string
    gateway?: string | undefined
    dhcp?: boolean | undefined
    slaac?: boolean
  }[] = [
    ...(spec.network
      ? [{ cidr: spec.network.cidr, gateway: spec.network.gateway, dhcp: true }]
      : []),
    ...(spec.extraSubnets ?? []),
    ...(spec.network6 ? [{ ...spec.network6, slaac: true }] : []),
  ]
  const named = (spec.pools ?? []).map((p) => ({ ...p, span: parseSpan(p.start, p.end) }))
  const reserved = (spec.reservations ?? []).map((r) => ({
    start: r.start,
    end: r.end ?? r.start,
    span: parseSpan(r.start, r.end ?? r.start),
  }))
  return {
    subnets: subnets.map((s) => {
      const span = parseCidr(s.cidr)
      const size = span.last - span.first + 1n
      // IPv4 skips network and broadcast; IPv6 pools are bounded (the first 65,536).
      const first = span.version === 4 && size > 2n ? span.first + 1n : span.first
      const last =
        span.version === 4
          ? size > 2n
            ? span.last - 1n
            : span.last
          : span.first + (size < 65_536n ? size - 1n : 65_535n)
      const at = (value: bigint) => formatIp({ version: span.version, value })
      const pools = named.filter((p) => contains(span, p.span))
      // SLAAC: each host's address follows from its MAC; nothing is handed out from a pool.
      const defaults = s.slaac
        ? []
        : pools.reduce<Span[]>(
            (parts, p) => parts.flatMap((part) => subtract(part, p.span)),
            [{ version: span.version, first, last }],
          )
      const external = reserved.filter((r) => contains(span, r.span))
      return {
        cidr: s.cidr,
        ...(s.gateway ? { gateway: s.gateway } : {}),
        dhcp: s.dhcp ?? false,
        pools: [
          ...defaults.map((d) => ({ start: at(d.first), end: at(d.last), name: DEFAULT_POOL })),
          ...pools.map((p) => ({ start: p.start, end: p.end, name: p.name })),
        ],
        ...(external.length > 0
          ? { external: external.map((r) => ({ start: r.start, end: r.end })) }
          : {}),
      }
    }),
  }
}
