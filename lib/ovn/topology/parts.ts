/**
 * The rows of each part of a group's topology — its head, a host, a DHCP relay port, a
 * DPU — as `compileGroupTopology` builds them. Pure.
 */
import { isIP } from 'node:net'
import type { HydrazineError } from '../../errors.ts'
import { inSubnet, prefixLength, transitAddresses } from './addresses.ts'
import { rowBuilders } from './builders.ts'
import type { DesiredRow, TopologyProblem } from './compile.ts'
import { dnsDomain, hostDnsRecords } from './dns.ts'
import { InvalidTopologySpec, Ipv6NatUnsupported, NatConflict } from './errors.ts'
import { DPU_KEY, HOST_KEY, topologyNames as names, ROLE_KEY } from './names.ts'
import type { DhcpRelayPort, GroupMember, GroupSubnet, GroupTopologySpec } from './spec.ts'

/** Priority of the per-host reroute policies on the distributed router. */
export const HOST_POLICY_PRIORITY = 1000
/** Above the reroutes: traffic between the group's routed subnets stays in the group. */
const INTERNAL_POLICY_PRIORITY = HOST_POLICY_PRIORITY + 1

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
  /** Routed IPv4 subnets: their hosts reach the fabric through their DPU (OVN NATs IPv4 only). */
  const routedV4 = routed.filter((s) => isIP(s.gateway ?? '') === 4)
  const physnet = spec.physicalNetwork ?? 'physnet'
  const lsKey = 'ls'
  const lrKey = 'lr'
  const subnetOf = (ip: string) => subnets.find((s) => inSubnet(ip, s.cidr))
  const leavesGroup = (ip: string) => routedV4.some((s) => inSubnet(ip, s.cidr))
  const problem = (draft: Draft, error: HydrazineError, host?: string) =>
    draft.problems.push({ code: error.code, message: error.message, ...(host ? { host } : {}) })

  /** The distributed switch and router, in every routed subnet. */
  const headRows = (rows: DesiredRow[]) => {
    b.ls(rows, lsKey, names.switch(g))
    rows.push({
      table: 'Logical_Router',
      key: lrKey,
      row: { name: names.router(g), external_ids: b.ids(lrKey) },
    })
    const networks = routed.map((s) => `${s.gateway}/${prefixLength(s.cidr)}`)
    b.lrp(rows, lrKey, names.routerSwitchPort(g), networks, undefined, spec.network6 ? SLAAC : {})
    b.routerLink(rows, lsKey, names.switchRouterPort(g), names.routerSwitchPort(g))
    // Hosts' reroutes match their source only: between two routed subnets, the router
    // itself delivers (else it would send the packet to a DPU's gateway router).
    if (routedV4.length < 2) return
    for (const s of routedV4) {
      b.policy(rows, lrKey, `policy/internal/${s.cidr}`, {
        priority: INTERNAL_POLICY_PRIORITY,
        match: `ip4.dst == ${s.cidr}`,
        action: 'allow',
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
    if (m.access !== 'None' && !leavesGroup(m.ip)) {
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
      { addresses: [addresses], port_security: [addresses] },
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
      { addresses: [r.mac && ip ? `${r.mac} ${ip}` : (r.mac ?? 'unknown')] },
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

    b.ls(rows, tsKey, names.transitSwitch(g, dpu), dpuIds)
    link(lrKey, tsKey, names.routerTransitPort, names.transitRouterPort, [`${lrSide}/30`])
    rows.push({
      table: 'Logical_Router',
      key: gwKey,
      row: {
        name: names.gatewayRouter(g, dpu),
        options: { chassis: dpu },
        external_ids: b.ids(gwKey, dpuIds),
      },
    })
    link(gwKey, tsKey, names.gatewayTransitPort, names.transitGatewayPort, [`${gwSide}/30`])
    b.ls(rows, pubKey, names.publicSwitch(g, dpu), dpuIds)
    link(gwKey, pubKey, names.gatewayPublicPort, names.publicGatewayPort, [spec.dummyFabricIp])
    b.lsp(
      rows,
      pubKey,
      names.localnetPort(g, dpu),
      { type: 'localnet', addresses: ['unknown'], options: { network_name: physnet } },
      dpuIds,
    )

    if (routedV4.length === 0) return
    for (const s of routedV4) b.route(rows, gwKey, s.cidr, lrSide, dpu, dpuIds)
    if (spec.fabricGatewayIp) b.route(rows, gwKey, '0.0.0.0/0', spec.fabricGatewayIp, dpu, dpuIds)
    b.route(rows, lrKey, '0.0.0.0/0', gwSide, dpu, dpuIds)

    const natIps = new Set(members.flatMap((m) => (m.dpu.natIp ? [m.dpu.natIp] : [])))
    if (natIps.size > 1)
      throw new NatConflict(g, dpu, `members disagree on the NAT IP (${[...natIps].join(', ')})`)
    const natIp = [...natIps][0]
    if (natIp) for (const s of routedV4) b.nat(rows, gwKey, 'snat', natIp, s.cidr, dpuIds)
    const externals = new Map<string, string>()
    const inbound = (type: 'dnat' | 'dnat_and_snat', external: string, m: GroupMember) => {
      const other = externals.get(external)
      if (other !== undefined) {
        throw new NatConflict(g, dpu, `${external} is claimed by both ${other} and ${m.hostName}`)
      }
      externals.set(external, m.hostName)
      b.nat(rows, gwKey, type, external, m.ip, { ...dpuIds, [HOST_KEY]: m.hostName })
    }
    for (const m of members) {
      if (!leavesGroup(m.ip)) continue
      b.policy(
        rows,
        lrKey,
        `policy/${m.hostName}`,
        {
          priority: HOST_POLICY_PRIORITY,
          match: `ip4.src == ${m.ip}`,
          action: 'reroute',
          nexthops: [gwSide],
        },
        { ...dpuIds, [HOST_KEY]: m.hostName },
      )
      if (m.access === 'None') continue
      if (!natIp) {
        const message = `host ${m.hostName} needs ${m.access} but the DPU has no NAT IP; it gets no NAT`
        problem(draft, new NatConflict(g, dpu, message), m.hostName)
        continue
      }
      if (m.access === 'FabricAccess') {
        inbound('dnat_and_snat', natIp, m)
        continue
      }
      // One dnat_and_snat per host, or OVN picks its egress source address at random.
      // Until its public IP is allocated, the host is reachable at the NAT IP only.
      if (m.publicIp) inbound('dnat_and_snat', m.publicIp, m)
      inbound('dnat', natIp, m)
    }
  }

  return { owner: b.owner, headRows, memberRows, dnsRows, relayRows, dpuRows }
}
