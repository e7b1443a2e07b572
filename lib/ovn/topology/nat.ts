/**
 * A DPU's NAT: per address family, its way out of the group — the routes between the
 * distributed and the DPU's gateway router, the default route to the fabric, the reroute
 * of the DPU's leaving hosts to it, and the SNAT/DNAT rows. Part of a DPU's rows, after
 * its gateway's (`gateway.ts`). Pure.
 */
import { transitAddresses, transitAddresses6 } from './addresses.ts'
import type { GroupContext, PartDraft } from './context.ts'
import { NatConflict } from './errors.ts'
import { addressSetNames, DPU_KEY, HOST_KEY, rowKeys } from './names.ts'
import type { GroupMember, GroupSubnet } from './spec.ts'

/** Priority of the per-DPU reroute policies on the distributed router. */
export const REROUTE_POLICY_PRIORITY = 1000

/** One address family as it leaves the group through a DPU. */
export interface FamilyEgress {
  readonly family: 'ip4' | 'ip6'
  readonly routed: readonly GroupSubnet[]
  readonly lrSide: string
  readonly gwSide: string
  readonly fabricGateway: string | undefined
  readonly natIpOf: (m: GroupMember) => string | undefined
  /** The member's address of this family that leaves the group, if any. */
  readonly hostIpOf: (m: GroupMember) => string | undefined
  readonly publicIpOf: (m: GroupMember) => string | undefined
}

/**
 * One address family's way out of the group through DPU `dpu`: routes between the
 * distributed and the gateway router, the default route to the fabric, the reroute to
 * this DPU of the addresses its hosts leave from (one policy matching an `Address_Set`
 * of them: a host joining or leaving changes the set, never the router), and the NAT (SNAT of its subnets to the DPU's NAT
 * address; FabricAccess: `dnat_and_snat` NAT address ↔ host; PublicAccess:
 * `dnat_and_snat` public address ↔ host and `dnat` NAT address → host). Nothing when
 * no subnet of the family is routed out.
 */
export function familyRows(
  { g, b, lrKey, problem }: GroupContext,
  draft: PartDraft,
  dpu: string,
  members: GroupMember[],
  f: FamilyEgress,
): void {
  if (f.routed.length === 0) return
  const { rows } = draft
  const dpuIds = { [DPU_KEY]: dpu }
  const gwKey = rowKeys.gatewayRouter(dpu)
  const v6 = f.family === 'ip6'
  const any = v6 ? '::/0' : '0.0.0.0/0'
  const natIps = new Set(members.flatMap((m) => f.natIpOf(m) ?? []))
  if (natIps.size > 1) {
    const what = v6 ? 'IPv6 NAT address' : 'NAT IP'
    throw new NatConflict(g, dpu, `members disagree on the ${what} (${[...natIps].join(', ')})`)
  }
  const natIp = [...natIps][0]
  // A DPU without a NAT address of the family takes none of it out: the group's
  // addresses (which other groups may share) never reach the fabric untranslated.
  if (!natIp) {
    for (const m of members) {
      if (m.access === 'None' || f.hostIpOf(m) === undefined) continue
      const message = v6
        ? `host ${m.hostName} needs ${m.access} but the DPU has no IPv6 NAT address; its IPv6 stays in the group`
        : `host ${m.hostName} needs ${m.access} but the DPU has no NAT IP; it gets no NAT and stays in the group`
      problem(draft, new NatConflict(g, dpu, message), m.hostName)
    }
    return
  }
  for (const s of f.routed) b.route(rows, gwKey, s.cidr, f.lrSide, dpu, dpuIds)
  if (f.fabricGateway) b.route(rows, gwKey, any, f.fabricGateway, dpu, dpuIds)
  b.route(rows, lrKey, any, f.gwSide, dpu, dpuIds)
  for (const s of f.routed) b.nat(rows, gwKey, 'snat', natIp, s.cidr, dpuIds)
  const externals = new Map<string, string>()
  const inbound = (
    type: 'dnat' | 'dnat_and_snat',
    external: string,
    m: GroupMember,
    hostIp: string,
  ) => {
    const other = externals.get(external)
    if (other !== undefined) {
      throw new NatConflict(g, dpu, `${external} is claimed by both ${other} and ${m.hostName}`)
    }
    externals.set(external, m.hostName)
    b.nat(rows, gwKey, type, external, hostIp, { ...dpuIds, [HOST_KEY]: m.hostName })
  }
  const leaving = members.flatMap((m) => f.hostIpOf(m) ?? [])
  if (leaving.length > 0) {
    const set = addressSetNames.dpuHosts(g, dpu, f.family)
    b.addressSet(rows, rowKeys.dpuHosts(dpu, f.family), set, leaving.sort(), dpuIds)
    b.policy(
      rows,
      lrKey,
      rowKeys.reroutePolicy(dpu, f.family),
      {
        priority: REROUTE_POLICY_PRIORITY,
        match: `${f.family}.src == $${set}`,
        action: 'reroute',
        nexthops: [f.gwSide],
      },
      dpuIds,
    )
  }
  for (const m of members) {
    const hostIp = f.hostIpOf(m)
    if (hostIp === undefined || m.access === 'None') continue
    if (m.access === 'FabricAccess') {
      inbound('dnat_and_snat', natIp, m, hostIp)
      continue
    }
    // One dnat_and_snat per host, or OVN picks its egress source address at random.
    // Until its public IP is allocated, the host is reachable at the NAT IP only.
    const publicIp = f.publicIpOf(m)
    if (publicIp) inbound('dnat_and_snat', publicIp, m, hostIp)
    inbound('dnat', natIp, m, hostIp)
  }
}

/**
 * The NAT of DPU `dpu` (link slot `slot`) for its `members`: IPv4's, then IPv6's
 * (`familyRows`).
 *
 * @throws NatConflict when two members claim one external address or the DPU two NAT addresses
 */
export function natRows(
  ctx: GroupContext,
  draft: PartDraft,
  dpu: string,
  slot: number,
  members: GroupMember[],
): void {
  const { spec } = ctx
  const { lrSide, gwSide } = transitAddresses(slot)
  const { lrSide: lrSide6, gwSide: gwSide6 } = transitAddresses6(slot)
  familyRows(ctx, draft, dpu, members, {
    family: 'ip4',
    routed: ctx.routedV4,
    lrSide,
    gwSide,
    fabricGateway: spec.fabricGatewayIp,
    natIpOf: (m) => m.dpu.natIp,
    hostIpOf: (m) => (ctx.leavesGroup(m.ip) ? m.ip : undefined),
    publicIpOf: (m) => m.publicIp,
  })
  familyRows(ctx, draft, dpu, members, {
    family: 'ip6',
    routed: ctx.routedV6,
    lrSide: lrSide6,
    gwSide: gwSide6,
    fabricGateway: spec.fabricGatewayIp6,
    natIpOf: (m) => m.dpu.natIp6,
    hostIpOf: ctx.leavingIp6,
    publicIpOf: (m) => m.publicIp6,
  })
}
