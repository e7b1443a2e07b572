/**
 * The rows of each part of a group's topology — its head, a host, a DHCP relay port, a
 * DPU — as `compileGroupTopology` builds them. Pure.
 */
import { isIP } from 'node:net'
import type { HydrazineError } from '../../errors.ts'
import {
  inSubnet,
  prefixLength,
  TRANSIT_NETWORK,
  TRANSIT6_NETWORK,
  transitAddresses,
  transitAddresses6,
} from './addresses.ts'
import { rowBuilders } from './builders.ts'
import { dnsDomain, hostDnsRecords } from './dns.ts'
import { familyRows, type PartDraft, REROUTE_POLICY_PRIORITY } from './egress.ts'
import { InvalidTopologySpec, Ipv6NatUnsupported } from './errors.ts'
import {
  addressSetNames,
  DPU_KEY,
  GUARD_KEY,
  HOST_KEY,
  topologyNames as names,
  ROLE_KEY,
} from './names.ts'
import type { DesiredRow, TopologyProblem } from './rows.ts'

export { REROUTE_POLICY_PRIORITY } from './egress.ts'

import type { DhcpRelayPort, GroupMember, GroupSubnet, GroupTopologySpec } from './spec.ts'

/** Above the reroutes: traffic between the group's routed subnets stays in the group. */
const INTERNAL_POLICY_PRIORITY = REROUTE_POLICY_PRIORITY + 1
/** Below the reroutes: what would leave the group without one is dropped. */
const EDGE_POLICY_PRIORITY = REROUTE_POLICY_PRIORITY - 1

/** Priority of the drop ACL on each public switch that keeps the fabric out of the group. */
const FABRIC_GUARD_PRIORITY = 1000
/** Priority of the drop ACL that keeps DNS queries from outside off the group's records. */
const DNS_GUARD_PRIORITY = 1000

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

/** A part being built: its rows, its problems, and whether its host was left out. */
export interface Draft {
  rows: DesiredRow[]
  problems: TopologyProblem[]
  omitted: boolean
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

/**
 * The builders of each part of one group's compile: its head (distributed switch and
 * router), a host, a relay port, a DPU.
 */
export function groupParts(spec: GroupTopologySpec) {
  const g = spec.name
  const b = rowBuilders(g)
  const subnets = subnetsOf(spec)
  /** Subnets the distributed router is in: hosts there reach the router and beyond. */
  const routed = subnets.filter((s) => s.gateway !== undefined)
  /** Routed IPv4 subnets: their hosts reach the fabric through their DPU. */
  const routedV4 = routed.filter((s) => isIP(s.gateway ?? '') === 4)
  /**
   * Routed IPv6 subnets whose hosts reach the fabric through their DPU (NAT66): all of
   * them when the fabric has IPv6 (`dummyFabricIp6`), none otherwise.
   */
  const routedV6 = spec.dummyFabricIp6 ? routed.filter((s) => isIP(s.gateway ?? '') === 6) : []
  const physnet = spec.physicalNetwork ?? 'physnet'
  const lsKey = 'ls'
  const lrKey = 'lr'
  const subnetOf = (ip: string) => subnets.find((s) => inSubnet(ip, s.cidr))
  /** The group's subnets of one address family, routed or not. */
  const cidrsOf = (version: 4 | 6) =>
    subnets.filter((s) => isIP(s.cidr.split('/')[0] ?? '') === version).map((s) => s.cidr)
  const leavesGroup = (ip: string) => routedV4.some((s) => inSubnet(ip, s.cidr))
  const leavesGroup6 = (ip: string) => routedV6.some((s) => inSubnet(ip, s.cidr))
  /** The member's IPv6 address that may leave the group: its SLAAC one, or its own. */
  const leavingIp6 = (m: GroupMember) =>
    [m.ip6, m.ip].find((ip) => ip !== undefined && isIP(ip) === 6 && leavesGroup6(ip))
  const problem = (draft: PartDraft, error: HydrazineError, host?: string) =>
    draft.problems.push({ code: error.code, message: error.message, ...(host ? { host } : {}) })
  const egress = { g, b, lrKey, problem }

  /** The distributed switch and router, in every routed subnet, and the group's guard. */
  const headRows = (rows: DesiredRow[]) => {
    // The generation guard (`diff.ts`) lives on a row no match names and ovn-northd
    // processes incrementally: on the router, every apply would make northd recompute.
    b.addressSet(rows, GUARD_KEY, addressSetNames.guard(g), [])
    b.ls(rows, lsKey, names.switch(g))
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
        b.policy(rows, lrKey, `policy/internal/${s.cidr}`, {
          priority: INTERNAL_POLICY_PRIORITY,
          match: `${family}.dst == ${s.cidr}`,
          action: 'allow',
        })
      }
    }
    // OVN's DNS responder answers any query crossing the switch, from outside too (one
    // that reached a host through its NAT): with DNS on, UDP 53 from the router port is
    // dropped unless it comes from one of the group's own subnets.
    if (spec.dns) {
      const inside = (version: 4 | 6, family: 'ip4' | 'ip6') => {
        const cidrs = cidrsOf(version)
        return cidrs.length > 0 ? `(${family} && ${family}.src != {${cidrs.join(', ')}})` : family
      }
      b.dropAcl(rows, lsKey, 'acl/ls/dns-from-outside', {
        direction: 'from-lport',
        priority: DNS_GUARD_PRIORITY,
        match: `inport == ${JSON.stringify(names.switchRouterPort(g))} && udp.dst == 53 && (${inside(4, 'ip4')} || ${inside(6, 'ip6')})`,
      })
    }
    // Only a host rerouted to its DPU's gateway router, where its traffic is translated,
    // leaves the group. Anything else the router would send out (a host of a subnet
    // without a gateway that found the router anyway, a host on a DPU without a NAT
    // address) is dropped here instead of reaching the fabric untranslated.
    for (const [family, leaving] of [
      ['ip4', routedV4],
      ['ip6', routedV6],
    ] as const) {
      // A family no routed subnet takes out has no route out at all.
      if (leaving.length === 0) continue
      b.policy(rows, lrKey, `policy/edge/${family}`, {
        priority: EDGE_POLICY_PRIORITY,
        match: `${family} && ${family}.dst != {${leaving.map((s) => s.cidr).join(', ')}}`,
        action: 'drop',
      })
    }
  }

  /** A host's port, locked to its MAC and address; left out when no subnet holds it. */
  const memberRows = (draft: Draft, m: GroupMember) => {
    const subnet = subnetOf(m.ip)
    if (!subnet) {
      draft.omitted = true
      const cidrs = subnets.map((s) => s.cidr).join(', ')
      const message = `host ${m.hostName} address ${m.ip} is in none of the group's subnets (${cidrs}); it is left out`
      problem(draft, new InvalidTopologySpec(g, message), m.hostName)
      return
    }
    if (m.access !== 'None' && !leavesGroup(m.ip) && !(isIP(m.ip) === 6 && leavesGroup6(m.ip))) {
      const error =
        isIP(m.ip) === 4
          ? new InvalidTopologySpec(
              g,
              `host ${m.hostName} has ${m.access}, but its subnet ${subnet.cidr} has no gateway: it gets no NAT`,
            )
          : new Ipv6NatUnsupported(g, m.hostName, m.access)
      problem(draft, error, m.hostName)
    }
    let ip6 = m.ip6
    if (ip6 !== undefined && !(spec.network6 && inSubnet(ip6, spec.network6.cidr))) {
      const where = spec.network6
        ? `not in network6 ${spec.network6.cidr}`
        : 'but the group has no network6'
      const message = `host ${m.hostName} IPv6 address ${ip6} is ${where}; its port has its other address only`
      problem(draft, new InvalidTopologySpec(g, message), m.hostName)
      ip6 = undefined
    }
    const addresses = `${m.mac} ${m.ip}${ip6 ? ` ${ip6}` : ''}`
    b.lsp(
      draft.rows,
      lsKey,
      m.logicalPort,
      {
        addresses: [addresses],
        port_security: [addresses],
        // Bound on its own DPU only: a port left behind elsewhere (a forced detach) with
        // the same iface-id never claims it.
        options: { 'requested-chassis': m.dpu.id },
      },
      { [HOST_KEY]: m.hostName, [DPU_KEY]: m.dpu.id },
    )
  }

  /** A built host's DNS records, answered on the group's switch only. */
  const dnsRows = (draft: Draft, m: GroupMember) => {
    if (!spec.dns) return
    const ips = [
      m.ip,
      ...(m.ip6 && spec.network6 && inSubnet(m.ip6, spec.network6.cidr) ? [m.ip6] : []),
    ]
    const records = hostDnsRecords(m.dnsName ?? m.hostName, dnsDomain(g, spec.dns.zone), ...ips)
    b.dns(draft.rows, lsKey, `dns/${m.hostName}`, records, { [HOST_KEY]: m.hostName })
  }

  /** A DHCP relay's port; without its address when that is not the group's. */
  const relayRows = (draft: Draft, r: DhcpRelayPort) => {
    let ip = r.ip
    if (ip !== undefined && (!r.mac || !subnetOf(ip))) {
      const message = `relay ${r.portName} address ${ip} needs a MAC and must be in one of the group's subnets; the port has no address`
      problem(draft, new InvalidTopologySpec(g, message))
      ip = undefined
    }
    b.lsp(
      draft.rows,
      lsKey,
      r.portName,
      {
        addresses: [r.mac && ip ? `${r.mac} ${ip}` : (r.mac ?? 'unknown')],
        options: { 'requested-chassis': r.dpuId },
      },
      { [DPU_KEY]: r.dpuId, [ROLE_KEY]: 'dhcp-relay' },
    )
  }

  /** One DPU's part: transit switch, gateway router, public switch, routes, NAT, policies. */
  const dpuRows = (draft: Draft, dpu: string, slot: number, members: GroupMember[]) => {
    const { rows } = draft
    const { lrSide, gwSide } = transitAddresses(slot)
    const dpuIds = { [DPU_KEY]: dpu }
    const tsKey = `ts/${dpu}`
    const gwKey = `gw/${dpu}`
    const pubKey = `pub/${dpu}`

    /** The router port `port` on `routerKey` and its switch-side `peer` on `switchKey`. */
    const link = (
      routerKey: string,
      switchKey: string,
      port: (g: string, dpu: string) => string,
      peer: (g: string, dpu: string) => string,
      networks: string[],
    ) => {
      b.lrp(rows, routerKey, port(g, dpu), networks, dpuIds)
      b.routerLink(rows, switchKey, peer(g, dpu), port(g, dpu), dpuIds)
    }

    const { lrSide: lrSide6, gwSide: gwSide6 } = transitAddresses6(slot)
    const v6 = routedV6.length > 0
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
      { type: 'localnet', addresses: ['unknown'], options: { network_name: physnet } },
      dpuIds,
    )
    fabricGuardRows(rows, dpu, pubKey, members)
    familyRows(egress, draft, dpu, members, {
      family: 'ip4',
      routed: routedV4,
      lrSide,
      gwSide,
      fabricGateway: spec.fabricGatewayIp,
      natIpOf: (m) => m.dpu.natIp,
      hostIpOf: (m) => (leavesGroup(m.ip) ? m.ip : undefined),
      publicIpOf: (m) => m.publicIp,
    })
    familyRows(egress, draft, dpu, members, {
      family: 'ip6',
      routed: routedV6,
      lrSide: lrSide6,
      gwSide: gwSide6,
      fabricGateway: spec.fabricGatewayIp6,
      natIpOf: (m) => m.dpu.natIp6,
      hostIpOf: leavingIp6,
      publicIpOf: (m) => m.publicIp6,
    })
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
  const fabricGuardRows = (
    rows: DesiredRow[],
    dpu: string,
    pubKey: string,
    members: GroupMember[],
  ) => {
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
        `acl/${pubKey}/${family}`,
        { direction: 'from-lport', priority: FABRIC_GUARD_PRIORITY, match },
        { [DPU_KEY]: dpu },
      )
    }
  }

  return { owner: b.owner, headRows, memberRows, dnsRows, relayRows, dpuRows }
}
