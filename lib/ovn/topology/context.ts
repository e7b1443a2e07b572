/**
 * What every part of a group's compile (`switch.ts`, `router.ts`, `gateway.ts`, `nat.ts`,
 * `relay.ts`, `dns.ts`) reads of the group's spec: its subnets, which of them are routed
 * out, the row builders carrying its owner, and how a part reports a problem. Built once
 * per compile by `groupContext`; pure.
 */
import { isIP } from 'node:net'
import type { HydrazineError } from '../../errors.ts'
import { inSubnet, TRANSIT6_NETWORK } from './addresses.ts'
import { rowBuilders } from './builders.ts'
import { InvalidTopologySpec } from './errors.ts'
import { rowKeys } from './names.ts'
import type { DesiredRow, TopologyProblem } from './rows.ts'
import type { GroupMember, GroupSubnet, GroupTopologySpec } from './spec.ts'

/** The rows one part of a group's compile builds, and what it could not build. */
export interface PartDraft {
  readonly rows: DesiredRow[]
  readonly problems: TopologyProblem[]
}

/** A part being built: its rows, its problems, and whether its host was left out. */
export interface Draft extends PartDraft {
  omitted: boolean
}

/** A new, empty part. */
export function newDraft(): Draft {
  return { rows: [], problems: [], omitted: false }
}

/** One group's spec as its parts read it. */
export interface GroupContext {
  readonly spec: GroupTopologySpec
  /** The group's name. */
  readonly g: string
  readonly b: ReturnType<typeof rowBuilders>
  /** The group's subnets, primary first, `network6` last. */
  readonly subnets: readonly GroupSubnet[]
  /** Subnets the distributed router is in: hosts there reach the router and beyond. */
  readonly routed: readonly GroupSubnet[]
  /** Routed IPv4 subnets: their hosts reach the fabric through their DPU. */
  readonly routedV4: readonly GroupSubnet[]
  /**
   * Routed IPv6 subnets whose hosts reach the fabric through their DPU (NAT66): all of
   * them when the fabric has IPv6 (`dummyFabricIp6`), none otherwise.
   */
  readonly routedV6: readonly GroupSubnet[]
  /** Row key of the group's distributed switch. */
  readonly lsKey: string
  /** Row key of the group's distributed router. */
  readonly lrKey: string
  readonly subnetOf: (ip: string) => GroupSubnet | undefined
  /** The group's subnets of one address family, routed or not. */
  readonly cidrsOf: (version: 4 | 6) => string[]
  /** Whether `ip` lies in a routed IPv4 subnet. */
  readonly leavesGroup: (ip: string) => boolean
  /** Whether `ip` lies in an IPv6 subnet routed out of the group. */
  readonly leavesGroup6: (ip: string) => boolean
  /** The member's IPv6 address that may leave the group: its SLAAC one, or its own. */
  readonly leavingIp6: (m: GroupMember) => string | undefined
  /** Notes `error` among the part's problems (about `host`, if given). */
  readonly problem: (draft: PartDraft, error: HydrazineError, host?: string) => void
}

/**
 * The context of `spec`'s compile.
 *
 * @throws InvalidTopologySpec when its subnets overlap or a gateway lies outside its subnet
 */
export function groupContext(spec: GroupTopologySpec): GroupContext {
  const g = spec.name
  const subnets = subnetsOf(spec)
  const routed = subnets.filter((s) => s.gateway !== undefined)
  const routedV4 = routed.filter((s) => isIP(s.gateway ?? '') === 4)
  const routedV6 = spec.dummyFabricIp6 ? routed.filter((s) => isIP(s.gateway ?? '') === 6) : []
  const leavesGroup = (ip: string) => routedV4.some((s) => inSubnet(ip, s.cidr))
  const leavesGroup6 = (ip: string) => routedV6.some((s) => inSubnet(ip, s.cidr))
  return {
    spec,
    g,
    b: rowBuilders(g),
    subnets,
    routed,
    routedV4,
    routedV6,
    lsKey: rowKeys.switch,
    lrKey: rowKeys.router,
    subnetOf: (ip) => subnets.find((s) => inSubnet(ip, s.cidr)),
    cidrsOf: (version) =>
      subnets.filter((s) => isIP(s.cidr.split('/')[0] ?? '') === version).map((s) => s.cidr),
    leavesGroup,
    leavesGroup6,
    leavingIp6: (m) =>
      [m.ip6, m.ip].find((ip) => ip !== undefined && isIP(ip) === 6 && leavesGroup6(ip)),
    problem: (draft, error, host) =>
      draft.problems.push({ code: error.code, message: error.message, ...(host ? { host } : {}) }),
  }
}

/**
 * The group's subnets, primary first, `network6` last: each extra subnet's gateway must
 * lie in it, and no two subnets may overlap (IPAM refuses both before the topology sees them).
 */
function subnetsOf(spec: GroupTopologySpec): GroupSubnet[] {
  const g = spec.name
  const subnets: GroupSubnet[] = [
    { cidr: spec.cidr, gateway: spec.gateway },
    ...(spec.extraSubnets ?? []),
    // An IPv6-only group's network6 is its primary network (`cidr`) already.
    ...(spec.network6 && spec.network6.cidr !== spec.cidr ? [spec.network6] : []),
  ]
  for (const [i, s] of subnets.entries()) {
    const [transit6] = TRANSIT6_NETWORK.split('/')
    const onTransit =
      inSubnet(transit6 ?? '', s.cidr) || inSubnet(s.cidr.split('/')[0] ?? '', TRANSIT6_NETWORK)
    // Only IPv6 that leaves the group uses the transit /126s.
    if (spec.dummyFabricIp6 && onTransit) {
      throw new InvalidTopologySpec(
        g,
        `subnet ${s.cidr} overlaps ${TRANSIT6_NETWORK}, kept for transit links`,
      )
    }
    if (s.gateway !== undefined && !inSubnet(s.gateway, s.cidr)) {
      throw new InvalidTopologySpec(g, `gateway ${s.gateway} is not in ${s.cidr}`)
    }
    const address = s.cidr.split('/')[0] ?? ''
    for (const other of subnets.slice(0, i)) {
      const otherAddress = other.cidr.split('/')[0] ?? ''
      if (inSubnet(address, other.cidr) || inSubnet(otherAddress, s.cidr)) {
        throw new InvalidTopologySpec(g, `subnet ${s.cidr} overlaps ${other.cidr}`)
      }
    }
  }
  return subnets
}
