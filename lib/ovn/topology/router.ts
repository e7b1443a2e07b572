/**
 * The group's distributed router (`hz/<group>/lr`): its port in every routed subnet and
 * the link to the group's switch, the policies that keep traffic between routed subnets in
 * the group and drop what would leave it untranslated, and the group's guard. Pure.
 */
import { prefixLength } from './addresses.ts'
import type { GroupContext } from './context.ts'
import { addressSetNames, topologyNames as names, rowKeys } from './names.ts'
import { REROUTE_POLICY_PRIORITY } from './nat.ts'
import type { DesiredRow } from './rows.ts'

/** Above the reroutes: traffic between the group's routed subnets stays in the group. */
const INTERNAL_POLICY_PRIORITY = REROUTE_POLICY_PRIORITY + 1
/** Below the reroutes: what would leave the group without one is dropped. */
const EDGE_POLICY_PRIORITY = REROUTE_POLICY_PRIORITY - 1

/**
 * Router advertisements on the distributed router's switch port of a dual-stack group:
 * SLAAC (no DHCPv6), sent every 10–30 s besides the answers to router solicitations, so
 * a host that came up before its port was bound still learns the prefix soon.
 */
const SLAAC = {
  ipv6_ra_configs: {
    address_mode: 'slaac',
    send_periodic: 'true',
    min_interval: '10',
    max_interval: '30',
  },
} as const

/**
 * The group's guard: an `Address_Set` no match names, whose `external_ids` carry the
 * generation every apply bumps (`diff.ts`). It lives on a row ovn-northd processes
 * incrementally: on the router, every apply would make northd recompute.
 */
export function guardRows({ g, b }: GroupContext): DesiredRow[] {
  const rows: DesiredRow[] = []
  b.addressSet(rows, rowKeys.guard, addressSetNames.guard(g), [])
  return rows
}

/**
 * The distributed router, its port in every routed subnet (with SLAAC in a dual-stack
 * group) linked to the group's switch, and, with two routed subnets of a family or more,
 * the policies that let traffic between them through before the reroutes.
 */
export function routerRows(ctx: GroupContext): DesiredRow[] {
  const { g, b, spec, lsKey, lrKey, routed, routedV4, routedV6 } = ctx
  const rows: DesiredRow[] = []
  rows.push({
    table: 'Logical_Router',
    key: lrKey,
    row: { name: names.router(g), external_ids: b.ids(lrKey) },
  })
  const networks = routed.map((s) => `${s.gateway}/${prefixLength(s.cidr)}`)
  b.lrp(rows, lrKey, names.routerSwitchPort(g), networks, undefined, spec.network6 ? SLAAC : {})
  b.routerLink(rows, lsKey, names.switchRouterPort(g), names.routerSwitchPort(g))
  // Reroutes match the source only: between two routed subnets, the router
  // itself delivers (else it would send the packet to a DPU's gateway router).
  for (const [family, subnets] of [
    ['ip4', routedV4],
    ['ip6', routedV6],
  ] as const) {
    if (subnets.length < 2) continue
    for (const s of subnets) {
      b.policy(rows, lrKey, rowKeys.internalPolicy(s.cidr), {
        priority: INTERNAL_POLICY_PRIORITY,
        match: `${family}.dst == ${s.cidr}`,
        action: 'allow',
      })
    }
  }
  return rows
}

/**
 * Only a host rerouted to its DPU's gateway router, where its traffic is translated,
 * leaves the group. Anything else the router would send out (a host of a subnet without a
 * gateway that found the router anyway, a host on a DPU without a NAT address) is dropped
 * here, below the reroutes, instead of reaching the fabric untranslated.
 */
export function edgePolicyRows({ b, lrKey, routedV4, routedV6 }: GroupContext): DesiredRow[] {
  const rows: DesiredRow[] = []
  for (const [family, leaving] of [
    ['ip4', routedV4],
    ['ip6', routedV6],
  ] as const) {
    // A family no routed subnet takes out has no route out at all.
    if (leaving.length === 0) continue
    b.policy(rows, lrKey, rowKeys.edgePolicy(family), {
      priority: EDGE_POLICY_PRIORITY,
      match: `${family} && ${family}.dst != {${leaving.map((s) => s.cidr).join(', ')}}`,
      action: 'drop',
    })
  }
  return rows
}
