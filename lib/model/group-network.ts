/**
 * A group's address plan beyond its subnets, after Ganeti's networks: named `pools` a host
 * may ask for (`ManagedResourceRequest.pool`) and `reservations`, addresses IPAM never
 * hands out (a DC's routers, a VIP). Each lies inside one of the group's subnets (`network`
 * or an `extraSubnets` entry).
 *
 * Hosts that name no pool take addresses from each subnet's automatic `default` pool: its
 * usable range minus every named pool. A named pool is handed out only to hosts that ask
 * for it by name. Several entries may share a name: one pool over several ranges.
 *
 * @example
 * pools: [{ name: 'vms', start: '10.0.0.100', end: '10.0.0.199' }],
 * reservations: [{ start: '10.0.0.2', end: '10.0.0.9' }, { start: '10.0.0.250' }],
 */
import { isIP } from 'node:net'
import * as v from 'valibot'
import { contains, overlaps, parseCidr, parseIp, type Span, spanSize } from '../ipam/address.ts'
import { TRANSIT6_NETWORK } from '../ovn/topology/addresses.ts'
import { Rfc1123Label } from './labels.ts'

/** The automatic pool of every subnet: what hosts naming no pool are given addresses from. */
export const DEFAULT_POOL = 'default'
/** Pools and reservations are bitmaps in Redis: each range holds at most 2^20 addresses. */
export const MAX_RANGE_SIZE = 1 << 20
export const MAX_POOLS = 32
export const MAX_RESERVATIONS = 64

const Address = v.pipe(
  v.string(),
  v.maxLength(64, 'is too long for an IP address'),
  v.check((s) => isIP(s) !== 0, 'must be an IP address'),
  v.examples(['10.0.0.1']),
)

/** A named range of a group's subnet, e.g. `{name: 'vms', start: '10.0.0.100', end: '10.0.0.199'}`. */
export const GroupPool = v.pipe(
  v.strictObject({
    name: v.pipe(Rfc1123Label, v.metadata({ not: { const: DEFAULT_POOL } })),
    start: Address,
    end: Address,
  }),
  v.forward(
    v.check((p) => p.name !== DEFAULT_POOL, `${DEFAULT_POOL} is the automatic pool's name`),
    ['name'],
  ),
)
export type GroupPool = v.InferOutput<typeof GroupPool>

/** Addresses IPAM never hands out: one (`start`) or a range (`start` to `end`). */
export const Reservation = v.strictObject({ start: Address, end: v.optional(Address) })
export type Reservation = v.InferOutput<typeof Reservation>

export const GroupPools = v.pipe(
  v.array(GroupPool),
  v.maxLength(MAX_POOLS, `at most ${MAX_POOLS} pools`),
  v.description(
    "named pools inside the group's subnets: a host naming one (`pool`) gets its address there; hosts naming none share each subnet's `default` pool (its usable range minus the named pools). Entries may share a name (one pool, several ranges); pools never overlap",
  ),
)
export const Reservations = v.pipe(
  v.array(Reservation),
  v.maxLength(MAX_RESERVATIONS, `at most ${MAX_RESERVATIONS} reservations`),
  v.description(
    "addresses IPAM never hands out (a DC's routers): one (`start`) or a range, inside one of the group's subnets; a host may not ask for one as its hostIP (400). Reserving an address a host already holds is allowed: it stays the host's",
  ),
)

/** The part of a group spec the address plan is checked against. */
export interface GroupAddressPlan {
  /** Absent for a group that is IPv6 only (`network6`). */
  readonly network?: { readonly cidr: string } | undefined
  readonly extraSubnets?:
    | readonly { readonly cidr: string; readonly dhcp?: boolean | undefined }[]
    | undefined
  /** The group's IPv6 /64 beside `network` (dual-stack), where hosts take SLAAC addresses. */
  readonly network6?: { readonly cidr: string } | undefined
  readonly pools?: readonly GroupPool[] | undefined
  readonly reservations?: readonly Reservation[] | undefined
}

/** One refusal of the address plan: the field path (`pools.1.end`) and why. */
export interface PlanIssue {
  readonly path: readonly (string | number)[]
  readonly message: string
}

/**
 * The group's subnets as spans: the primary network, the extra subnets in order, then the
 * IPv6 network; those that do not parse are left out.
 */
export function groupSubnets(plan: GroupAddressPlan): { cidr: string; span: Span }[] {
  const subnets = [
    ...(plan.network ? [plan.network] : []),
    ...(plan.extraSubnets ?? []),
    ...(plan.network6 ? [plan.network6] : []),
  ]
  return subnets.flatMap((s) => {
    try {
      return [{ cidr: s.cidr, span: parseCidr(s.cidr) as Span }]
    } catch {
      return []
    }
  })
}

/** Where the transit links between each group's routers live (`lib/ovn` topology). */
const TRANSIT_SPANS = ['169.254.0.0/16', TRANSIT6_NETWORK].map((cidr) => ({
  cidr,
  span: parseCidr(cidr) as Span,
}))

/**
 * A range's span, the issue with its `end`, or undefined when an address is not one (the
 * schema names that field already).
 */
function spanOf(start: string, end: string | undefined): Span | string | undefined {
  if (isIP(start) === 0 || isIP(end ?? start) === 0) return undefined
  const a = parseIp(start)
  const b = parseIp(end ?? start)
  if (a.version !== b.version) return 'must be the same IP version as start'
  if (a.value > b.value) return 'must not come before start'
  return { version: a.version, first: a.value, last: b.value }
}

/**
 * Checks the extra subnets against the network and each other (no overlap, DHCP on one
 * subnet per IP version: the primary network has it), and each pool and reservation
 * against the group's subnets and each other: inside one subnet, at most
 * `MAX_RANGE_SIZE` addresses, pools never overlapping. IPAM refuses the same; here the
 * refusal names the field. Pure.
 *
 * @example
 * addressPlanIssues({ network: { cidr: '10.0.0.0/24' }, pools: [{ name: 'a', start: '10.1.0.1', end: '10.1.0.9' }] })
 * // [{ path: ['pools', 0], message: 'must lie inside one of the group's subnets: 10.0.0.0/24' }]
 */
export function addressPlanIssues(plan: GroupAddressPlan): PlanIssue[] {
  const subnets = groupSubnets(plan)
  const issues: PlanIssue[] = []
  const dhcp = new Map<number, string>(plan.network ? [[4, 'network']] : [])
  // The schema parsed every CIDR before this check: extra subnet i is subnets[i + first].
  const first = plan.network ? 1 : 0
  for (const [i, s] of (plan.extraSubnets ?? []).entries()) {
    const here = subnets[i + first]
    if (here === undefined) continue
    const other = subnets.slice(0, i + first).find((x) => overlaps(x.span, here.span))
    if (other !== undefined) {
      issues.push({ path: ['extraSubnets', i, 'cidr'], message: `overlaps ${other.cidr}` })
    }
    if (!s.dhcp) continue
    const earlier = dhcp.get(here.span.version)
    if (earlier === undefined) dhcp.set(here.span.version, `extraSubnets.${i}`)
    else {
      issues.push({
        path: ['extraSubnets', i, 'dhcp'],
        message: `${earlier} already has DHCP for IPv${here.span.version}: one subnet per IP version`,
      })
    }
  }
  const v6 = plan.network6 ? subnets.at(-1) : undefined
  if (v6 !== undefined && plan.network6?.cidr === v6.cidr) {
    const other = subnets.slice(0, -1).find((x) => overlaps(x.span, v6.span))
    if (other !== undefined) {
      issues.push({ path: ['network6', 'cidr'], message: `overlaps ${other.cidr}` })
    }
  }
  // The transit links between a group's routers use these; a subnet there would be cut off.
  const fields: (string | number)[][] = [
    ...(plan.network ? [['network', 'cidr']] : []),
    ...(plan.extraSubnets ?? []).map((_, i) => ['extraSubnets', i, 'cidr']),
    ...(plan.network6 ? [['network6', 'cidr']] : []),
  ]
  for (const [i, s] of subnets.entries()) {
    const transit = TRANSIT_SPANS.find((t) => overlaps(t.span, s.span))
    const path = fields[i]
    if (transit && path) {
      issues.push({ path, message: `overlaps ${transit.cidr}, kept for Hydrazine's transit links` })
    }
  }
  const check = (field: 'pools' | 'reservations', ranges: readonly Reservation[]) => {
    const spans: Span[] = []
    for (const [i, r] of ranges.entries()) {
      const span = spanOf(r.start, r.end)
      if (span === undefined) continue
      if (typeof span === 'string') {
        issues.push({ path: [field, i, 'end'], message: span })
        continue
      }
      if (!subnets.some((s) => contains(s.span, span))) {
        const cidrs = subnets.map((s) => s.cidr).join(', ')
        issues.push({
          path: [field, i],
          message: `must lie inside one of the group's subnets: ${cidrs}`,
        })
      } else if (spanSize(span) > BigInt(MAX_RANGE_SIZE)) {
        issues.push({ path: [field, i], message: `must hold at most ${MAX_RANGE_SIZE} addresses` })
      }
      if (field === 'pools' && v6 !== undefined && contains(v6.span, span)) {
        issues.push({
          path: [field, i],
          message: "must not lie in network6: its hosts' addresses come from their MACs (SLAAC)",
        })
      }
      const other = spans.findIndex((s) => overlaps(s, span))
      if (other >= 0) issues.push({ path: [field, i], message: `overlaps ${field}.${other}` })
      spans.push(span)
    }
  }
  check('pools', plan.pools ?? [])
  check('reservations', plan.reservations ?? [])
  return issues
}

/** The reservation holding `ip`, by its index; undefined when none does. */
export function reservationHolding(
  reservations: readonly Reservation[],
  ip: string,
): number | undefined {
  const i = reservations.findIndex((r) => {
    const span = spanOf(r.start, r.end)
    const at = spanOf(ip, undefined)
    return typeof span === 'object' && typeof at === 'object' && contains(span, at)
  })
  return i < 0 ? undefined : i
}

/**
 * Why a host's `pool`, `hostIP` or `hostAccess` does not fit its group's plan: a pool the
 * group does not have, an address it reserved (IPAM hands out neither), one in its
 * `network6` (where every host's address is its SLAAC one), or fabric or public access in
 * a group that is IPv6 only while the fabric is not (`fabric6`: IPv6 leaves groups
 * through NAT66). Pure.
 */
export function hostAddressIssues(
  host: {
    readonly pool?: string | undefined
    readonly hostIP?: string | undefined
    readonly hostAccess?: string | undefined
  },
  group: GroupAddressPlan & { readonly name: string },
  fabric6 = false,
): PlanIssue[] {
  const issues: PlanIssue[] = []
  const access = host.hostAccess !== undefined && host.hostAccess !== 'None'
  if (group.network === undefined && access && !fabric6) {
    issues.push({
      path: ['hostAccess'],
      message: `resource group ${group.name} is IPv6 only and the fabric is not (no HYDRAZINE_FABRIC_DUMMY_IP6): its hosts are reached inside it only (None)`,
    })
  }
  const pools = new Set([DEFAULT_POOL, ...(group.pools ?? []).map((p) => p.name)])
  if (host.pool !== undefined && !pools.has(host.pool)) {
    issues.push({
      path: ['pool'],
      message: `resource group ${group.name} has no pool ${host.pool} (it has ${[...pools].join(', ')})`,
    })
  }
  const reserved =
    host.hostIP === undefined
      ? undefined
      : reservationHolding(group.reservations ?? [], host.hostIP)
  const v6 = group.network6 === undefined ? undefined : groupSubnets(group).at(-1)
  const at = host.hostIP === undefined ? undefined : spanOf(host.hostIP, undefined)
  if (v6 !== undefined && typeof at === 'object' && contains(v6.span, at)) {
    issues.push({
      path: ['hostIP'],
      message: `lies in resource group ${group.name}'s network6, where each host's address is its SLAAC one; give an address of another subnet`,
    })
  }
  if (reserved !== undefined) {
    issues.push({
      path: ['hostIP'],
      message: `is reserved in resource group ${group.name} (reservations.${reserved}); IPAM never hands it out`,
    })
  }
  return issues
}

/**
 * The group's primary network: its IPv4 `network`, or, for a group that is IPv6 only, its
 * `network6`. Its gateway is the address the group's router answers at first.
 */
export function primaryNetwork(spec: {
  readonly network?: { readonly cidr: string; readonly gateway: string } | undefined
  readonly network6?: { readonly cidr: string; readonly gateway: string } | undefined
}): { readonly cidr: string; readonly gateway: string } {
  const primary = spec.network ?? spec.network6
  if (!primary) throw new Error('a resource group has network or network6')
  return primary
}
