/**
 * A DPU's gateway: transit switch `hz/<g>/dpu/<d>/ts` linking the distributed router to
 * gateway router `hz/<g>/dpu/<d>/gw` (pinned to the DPU's chassis), and public switch
 * `hz/<g>/dpu/<d>/pub` with the gateway's port in the fabric and a localnet port, guarded
 * so the fabric reaches the group through NAT only. The DPU's NAT follows (`nat.ts`). Pure.
 */
import { isIP } from 'node:net'
import {
  inSubnet,
  TRANSIT_NETWORK,
  TRANSIT6_NETWORK,
  transitAddresses,
  transitAddresses6,
} from './addresses.ts'
import type { GroupContext, PartDraft } from './context.ts'
import { DPU_KEY, topologyNames as names, rowKeys } from './names.ts'
import type { DesiredRow } from './rows.ts'
import type { GroupMember } from './spec.ts'

/** Priority of the drop ACL on each public switch that keeps the fabric out of the group. */
const FABRIC_GUARD_PRIORITY = 1000

/** A name of `topologyNames` of one group's DPU. */
type DpuName = (group: string, dpu: string) => string

/**
 * DPU `dpu`'s gateway (link slot `slot`, so its transit addresses): transit switch, the
 * links of both routers to it, gateway router, public switch with the gateway's fabric
 * address and a localnet port, and the public switch's fabric guard for its `members`.
 */
export function gatewayRows(
  ctx: GroupContext,
  draft: PartDraft,
  dpu: string,
  slot: number,
  members: GroupMember[],
): void {
  const { g, b, spec, lrKey } = ctx
  const { rows } = draft
  const { lrSide, gwSide } = transitAddresses(slot)
  const { lrSide: lrSide6, gwSide: gwSide6 } = transitAddresses6(slot)
  const dpuIds = { [DPU_KEY]: dpu }
  const tsKey = rowKeys.transitSwitch(dpu)
  const gwKey = rowKeys.gatewayRouter(dpu)
  const pubKey = rowKeys.publicSwitch(dpu)

  /** The router port `port` on `routerKey` and its switch-side `peer` on `switchKey`. */
  const link = (
    routerKey: string,
    switchKey: string,
    port: DpuName,
    peer: DpuName,
    networks: string[],
  ) => {
    b.lrp(rows, routerKey, port(g, dpu), networks, dpuIds)
    b.routerLink(rows, switchKey, peer(g, dpu), port(g, dpu), dpuIds)
  }

  const v6 = ctx.routedV6.length > 0
  b.ls(rows, tsKey, names.transitSwitch(g, dpu), dpuIds)
  link(lrKey, tsKey, names.routerTransitPort, names.transitRouterPort, [
    `${lrSide}/30`,
    ...(v6 ? [`${lrSide6}/126`] : []),
  ])
  rows.push({
    table: 'Logical_Router',
    key: gwKey,
    row: {
      name: names.gatewayRouter(g, dpu),
      options: { chassis: dpu },
      external_ids: b.ids(gwKey, dpuIds),
    },
  })
  link(gwKey, tsKey, names.gatewayTransitPort, names.transitGatewayPort, [
    `${gwSide}/30`,
    ...(v6 ? [`${gwSide6}/126`] : []),
  ])
  b.ls(rows, pubKey, names.publicSwitch(g, dpu), dpuIds)
  link(gwKey, pubKey, names.gatewayPublicPort, names.publicGatewayPort, [
    spec.dummyFabricIp,
    ...(v6 && spec.dummyFabricIp6 ? [spec.dummyFabricIp6] : []),
  ])
  b.lsp(
    rows,
    pubKey,
    names.localnetPort(g, dpu),
    {
      type: 'localnet',
      addresses: ['unknown'],
      options: { network_name: spec.physicalNetwork ?? 'physnet' },
    },
    dpuIds,
  )
  fabricGuardRows(ctx, rows, dpu, members)
}

/**
 * The fabric reaches the group through NAT only. The gateway router routes the group's
 * subnets back to the distributed router, so a fabric host routing a tenant's network
 * at it (at the DPU's NAT IP, which it answers ARP for) would reach every host at its
 * private address, None ones included, untranslated. A drop ACL on the public switch
 * stops every IP packet from the localnet port to the group's subnets or the transit
 * links before the gateway router sees it; the addresses the DPU exposes (NAT and
 * public IPs) stay reachable, should one lie in a tenant's subnet.
 */
function fabricGuardRows(
  { g, b, spec, cidrsOf }: GroupContext,
  rows: DesiredRow[],
  dpu: string,
  members: GroupMember[],
): void {
  const pubKey = rowKeys.publicSwitch(dpu)
  const exposed = new Set(
    members.flatMap((m) => [m.dpu.natIp, m.dpu.natIp6, m.publicIp, m.publicIp6]),
  )
  const localnet = JSON.stringify(names.localnetPort(g, dpu))
  for (const [family, transit, version] of [
    ['ip4', TRANSIT_NETWORK, 4],
    ['ip6', TRANSIT6_NETWORK, 6],
  ] as const) {
    const cidrs = cidrsOf(version)
    if (version === 6 && cidrs.length === 0 && !spec.dummyFabricIp6) continue
    const denied = [...cidrs, transit]
    const kept = [...exposed].filter(
      (ip): ip is string =>
        ip !== undefined && isIP(ip) === version && denied.some((c) => inSubnet(ip, c)),
    )
    const match = [
      `inport == ${localnet}`,
      `${family}.dst == {${denied.join(', ')}}`,
      ...(kept.length > 0 ? [`${family}.dst != {${kept.sort().join(', ')}}`] : []),
    ].join(' && ')
    b.dropAcl(
      rows,
      pubKey,
      rowKeys.fabricGuardAcl(dpu, family),
      { direction: 'from-lport', priority: FABRIC_GUARD_PRIORITY, match },
      { [DPU_KEY]: dpu },
    )
  }
}
