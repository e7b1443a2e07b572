/**
 * The lab's fabric router: a network namespace on the fabric bridge running FRR (zebra +
 * bgpd) that peers with Hydrazine's FRR over BGP and holds an "internet" address
 * (`INTERNET_IP`) behind it, so that announced public IPs can be reached from outside.
 * It is also the fabric's EVPN route reflector: any DPU on the fabric's /24 may peer with
 * it (iBGP, its AS, `l2vpn evpn`), as the DPUs' own FRR do for Fabric groups.
 *
 * And it is the fabric's border for Fabric groups whose hosts leak (`border`): per such
 * group a VRF (a namespace, FRR's netns backend: its zebra runs with `-n`) that imports the
 * group's type-5 routes and exports a default route back into the group. The VRF hands
 * the leaked routes to the router's global table over a link of its own, by eBGP between
 * the VRF's instance (AS `BORDER_VRF_ASN`) and the global one: the VRF sends only /32s
 * marked with the large community `ASN:1:1` (a FabricAccess host's address) or `ASN:1:2`
 * (a public IP), the global table takes only those (`no-export`: never on to Hydrazine's
 * FRR), and sends nothing back. Traffic from the global table to a leaked address goes
 * over that link into the VRF and on over VXLAN to the host's DPU; the VRF's default route
 * leads back over the link.
 */
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { leakCommunityOf } from '../../lib/agent-protocol/index.ts'
import { type5Paths } from '../../lib/frr/evpn-routes.ts'
import { createVtysh } from '../../lib/frr/vtysh.ts'
import type { Daemon } from '../../lib/process/daemon.ts'
import { startFrrDaemons } from '../local/frr.ts'
import { type Fabric, run } from './dpu.ts'
import { netnsExec } from './probes.ts'

export const FABRIC_ROUTER_ASN = 65001
/** The AS of the border's VRF instances, towards the router's global table (eBGP). */
export const BORDER_VRF_ASN = 65002
export const INTERNET_IP = '198.51.100.1'
/** The router's "internet" IPv6 address. */
export const INTERNET_IP6 = '2001:db8:ffff::1'

export interface FabricRouter {
  readonly netns: string
  readonly ip: string
  readonly internetIp: string
  /** Its IPv6 address on the fabric. */
  readonly ip6: string
  readonly internetIp6: string
  /** `vtysh -c <command>` against the router's FRR. */
  vtysh(command: string): Promise<string>
  /** BGP routes the router installed: prefix → next hop. */
  bgpRoutes(): Promise<Map<string, string>>
  /** IPv6 BGP routes the router installed: prefix → next hop. */
  bgpRoutes6(): Promise<Map<string, string>>
  /**
   * The EVPN type-5 routes the reflector holds: `<RT>|<prefix>` (`65001:10001|10.10.0.5/32`)
   * → the next hops (the announcing DPUs' VTEPs).
   */
  evpnRoutes(): Promise<Map<string, string[]>>
  exec(...command: string[]): Promise<string>
  /**
   * Makes the router the border of the Fabric group with VNI `vni` (idempotent): its VRF,
   * importing the group's routes (route target `ASN:VNI`), leaking the marked /32s into
   * the global table and a default route back. What a fabric's operator provisions on a
   * real border leaf.
   */
  border(vni: number): Promise<BorderVrf>
}

/** A Fabric group's VRF on the border. */
export interface BorderVrf {
  readonly vni: number
  /** The namespace holding it. */
  readonly netns: string
  /** The VRF's end of its link to the global table. */
  readonly linkIp: string
}

/**
 * Starts the router at `ip` on `fabric`, peering with `peer` (Hydrazine's BGP speaker at
 * the fabric gateway). What it makes is handed over as it is made: each daemon to
 * `started`, each way to undo a namespace or link to `undo`, so the lab removes them.
 */
export async function startFabricRouter(opts: {
  prefix: string
  dataDir: string
  fabric: Fabric
  ip: string
  /** Its IPv6 address on the fabric, with prefix length. */
  ip6: string
  peer: { ip: string; asn: number }
  started: (daemon: Daemon) => void
  undo: (step: () => Promise<unknown>) => void
}): Promise<FabricRouter> {
  const { prefix, fabric, peer } = opts
  const routerNs = `${prefix}-rtr`
  const routerIp = opts.ip
  await run('ip', ['netns', 'add', routerNs])
  opts.undo(() => run('ip', ['netns', 'del', routerNs]))
  const rOut = `${prefix}r`
  await run('ip', ['link', 'add', rOut, 'type', 'veth', 'peer', 'name', `${prefix}R`])
  opts.undo(() => run('ip', ['link', 'del', rOut]))
  await run('ip', ['link', 'set', `${prefix}R`, 'netns', routerNs])
  await run('ip', ['-n', routerNs, 'link', 'set', `${prefix}R`, 'name', 'eth0'])
  await run('ip', ['link', 'set', rOut, 'master', fabric.bridge])
  await run('ip', ['link', 'set', rOut, 'up'])
  await run('ethtool', ['-K', rOut, 'tx', 'off'])
  // IPv6 on the fabric only: no router solicitations or autoconfiguration.
  await netnsExec(routerNs, 'sysctl', '-qw', 'net.ipv6.conf.all.accept_ra=0')
  await netnsExec(routerNs, 'sysctl', '-qw', 'net.ipv6.conf.eth0.accept_ra=0')
  await netnsExec(routerNs, 'sysctl', '-qw', 'net.ipv6.conf.all.forwarding=1')
  await run('ip', ['-n', routerNs, 'addr', 'add', opts.ip6, 'dev', 'eth0', 'nodad'])
  await run('ip', ['-n', routerNs, 'addr', 'add', `${routerIp}/24`, 'dev', 'eth0'])
  await run('ip', ['-n', routerNs, 'link', 'set', 'eth0', 'up'])
  await run('ip', ['-n', routerNs, 'link', 'set', 'lo', 'up'])
  await netnsExec(routerNs, 'ethtool', '-K', 'eth0', 'tx', 'off')
  // The "internet" address behind the router (on lo: no dummy module needed).
  await run('ip', ['-n', routerNs, 'addr', 'add', `${INTERNET_IP}/32`, 'dev', 'lo'])
  await run('ip', ['-n', routerNs, 'addr', 'add', `${INTERNET_IP6}/128`, 'dev', 'lo'])

  const frrDir = join(opts.dataDir, 'fabric-frr')
  await mkdir(frrDir, { recursive: true })
  // The border's VRFs: zebra sees the namespaces bound here, and only those.
  const vrfDir = join(opts.dataDir, 'fabric-vrfs')
  await mkdir(vrfDir, { recursive: true })
  await run('sh', ['-c', `mountpoint -q ${vrfDir} || mount --bind ${vrfDir} ${vrfDir}`])
  await run('mount', ['--make-shared', vrfDir])
  opts.undo(() => run('sh', ['-c', `umount -R -l ${vrfDir} || true`]))
  await startFrrDaemons({
    dir: frrDir,
    daemons: ['zebra', 'bgpd'],
    vrfNetnsDir: vrfDir,
    configs: {
      // No EVPN multihoming here: no start-up delay holding the border's VXLAN devices down.
      zebra: 'hostname fabric\nevpn mh startup-delay 0\n',
      bgpd: [
        'frr defaults traditional',
        ...borderPolicy(FABRIC_ROUTER_ASN),
        // Hydrazine's bgpd sends its own link-local address beside each /128's global next
        // hop (the DPU's IPv6 NAT address); FRR would install the link-local one.
        'route-map FROM-HYDRAZINE-V6 permit 10',
        ' set ipv6 next-hop prefer-global',
        'exit',
        `router bgp ${FABRIC_ROUTER_ASN}`,
        ` bgp router-id ${routerIp}`,
        ' no bgp ebgp-requires-policy',
        ` neighbor ${peer.ip} remote-as ${peer.asn}`,
        ` neighbor ${peer.ip} timers 1 3`,
        ` neighbor ${peer.ip} timers connect 1`,
        ` neighbor ${peer.ip} disable-connected-check`,
        // The fabric's EVPN route reflector for every DPU on the fabric.
        ' neighbor DPUS peer-group',
        ` neighbor DPUS remote-as ${FABRIC_ROUTER_ASN}`,
        ' neighbor DPUS timers 1 3',
        ` bgp listen range ${fabricSubnetOf(fabric)} peer-group DPUS`,
        ' address-family ipv4 unicast',
        '  no neighbor DPUS activate',
        ' exit-address-family',
        ' address-family l2vpn evpn',
        '  neighbor DPUS activate',
        '  neighbor DPUS route-reflector-client',
        // The border's own VRFs' L3VNIs.
        '  advertise-all-vni',
        ' exit-address-family',
        ' address-family ipv6 unicast',
        `  neighbor ${peer.ip} activate`,
        `  neighbor ${peer.ip} route-map FROM-HYDRAZINE-V6 in`,
        ' exit-address-family',
        'exit',
        '',
      ].join('\n'),
    },
    pathspace: `${prefix}fab`,
    netns: routerNs,
    started: opts.started,
  })
  const vtysh = (command: string) => run('vtysh', ['--vty_socket', frrDir, '-c', command])
  /** The selected BGP route of each prefix in the RIB `show` prints: prefix → next hop. */
  const bgpRib = async (show: string) => {
    const rib = JSON.parse(await vtysh(show)) as Record<
      string,
      { protocol?: string; selected?: boolean; nexthops?: { ip?: string }[] }[]
    >
    const routes = new Map<string, string>()
    for (const [p, entries] of Object.entries(rib)) {
      const route = entries.find((e) => e.protocol === 'bgp' && e.selected === true)
      const nextHop = route?.nexthops?.[0]?.ip
      if (nextHop !== undefined) routes.set(p, nextHop)
    }
    return routes
  }
  const borders = new Map<number, Promise<BorderVrf>>()
  const border = (vni: number) => {
    const known = borders.get(vni)
    if (known) return known
    const making = makeBorderVrf({
      vni,
      index: borders.size,
      routerNs,
      routerIp,
      vrfDir,
      frrDir,
      undo: opts.undo,
    })
    borders.set(vni, making)
    return making
  }
  return {
    border,
    netns: routerNs,
    ip: routerIp,
    internetIp: INTERNET_IP,
    ip6: opts.ip6.split('/')[0] ?? '',
    internetIp6: INTERNET_IP6,
    vtysh,
    exec: (...command) => netnsExec(routerNs, ...command),
    bgpRoutes: () => bgpRib('show ip route json'),
    bgpRoutes6: () => bgpRib('show ipv6 route json'),
    evpnRoutes: async () => evpnType5(await vtysh('show bgp l2vpn evpn route type prefix json')),
  }
}

/** The fabric's /24 (the DPUs' addresses), e.g. `100.70.3.0/24`. */
function fabricSubnetOf(fabric: Fabric): string {
  return `${fabric.gatewayIp.split('.').slice(0, 3).join('.')}.0/${fabric.prefixLength}`
}

/** `show bgp l2vpn evpn route type prefix json` as `<RT>|<prefix>` → next hops. */
export function evpnType5(json: string): Map<string, string[]> {
  const routes = new Map<string, string[]>()
  for (const path of type5Paths(json)) {
    const id = `${path.routeTargets[0] ?? '?'}|${path.prefix}`
    const hops = routes.get(id) ?? []
    for (const h of path.nextHops) if (!hops.includes(h)) hops.push(h)
    routes.set(id, hops)
  }
  return routes
}

/**
 * The border's policy, in the router's bgpd: what a VRF sends its global table (only /32s
 * marked leaked), what the global table takes (the same, kept from Hydrazine's FRR), and
 * nothing the other way.
 */
function borderPolicy(asn: number): string[] {
  return [
    `bgp large-community-list standard HZ-LEAKED seq 5 permit ${leakCommunityOf(asn, 'fabric')}`,
    `bgp large-community-list standard HZ-LEAKED seq 10 permit ${leakCommunityOf(asn, 'public')}`,
    'ip prefix-list HZ-LEAKED seq 5 permit 0.0.0.0/0 ge 32',
    'route-map HZ-LEAK-OUT permit 10',
    ' match ip address prefix-list HZ-LEAKED',
    ' match large-community HZ-LEAKED',
    'exit',
    'route-map HZ-LEAK-IN permit 10',
    ' match ip address prefix-list HZ-LEAKED',
    ' match large-community HZ-LEAKED',
    ' set community no-export',
    'exit',
    'route-map HZ-NOTHING deny 10',
    'exit',
  ]
}

/** A group's VRF on the border: its namespace, L3VNI, link to the global table and BGP. */
async function makeBorderVrf(opts: {
  vni: number
  index: number
  routerNs: string
  routerIp: string
  vrfDir: string
  frrDir: string
  undo: (step: () => Promise<unknown>) => void
}): Promise<BorderVrf> {
  const { vni, routerNs, routerIp, vrfDir } = opts
  const ns = `${routerNs}-v${vni}`
  const vrf = `hzv${vni}`
  const [bridge, vxlan] = [`hzb${vni}`, `hzx${vni}`]
  // A /30 per VRF in 169.254.200.0/24: the global table's end .1, the VRF's .2.
  const base = 4 * opts.index
  const globalIp = `169.254.200.${base + 1}`
  const linkIp = `169.254.200.${base + 2}`
  const [outside, inside] = [`${routerNs.slice(0, 8)}b${opts.index}`, 'leak']
  await run('ip', ['netns', 'add', ns])
  opts.undo(() => run('ip', ['netns', 'del', ns]))
  await netnsExec(
    ns,
    'sysctl',
    '-qw',
    'net.ipv4.ip_forward=1',
    'net.ipv4.conf.all.rp_filter=0',
    'net.ipv4.conf.default.rp_filter=0',
  )
  await run('ip', ['-n', ns, 'link', 'set', 'lo', 'up'])
  await run('ip', [
    '-n',
    routerNs,
    'link',
    'add',
    vxlan,
    'type',
    'vxlan',
    'id',
    String(vni),
    'local',
    routerIp,
    'dstport',
    '4789',
    'nolearning',
  ])
  await run('ip', ['-n', routerNs, 'link', 'set', vxlan, 'netns', ns])
  await run('ip', ['-n', ns, 'link', 'add', bridge, 'type', 'bridge', 'stp_state', '0'])
  await run('ip', ['-n', ns, 'link', 'set', vxlan, 'master', bridge])
  await run('ip', ['-n', ns, 'link', 'set', bridge, 'up'])
  await run('ip', ['-n', ns, 'link', 'set', vxlan, 'up'])
  await netnsExec(ns, 'sysctl', '-qw', `net.ipv4.conf.${bridge}.rp_filter=0`)
  await run('ip', [
    '-n',
    routerNs,
    'link',
    'add',
    outside,
    'type',
    'veth',
    'peer',
    'name',
    inside,
    'netns',
    ns,
  ])
  await run('ip', ['-n', routerNs, 'addr', 'add', `${globalIp}/30`, 'dev', outside])
  await run('ip', ['-n', routerNs, 'link', 'set', outside, 'up'])
  await run('ip', ['-n', ns, 'addr', 'add', `${linkIp}/30`, 'dev', inside])
  await run('ip', ['-n', ns, 'link', 'set', inside, 'up'])
  // The VRF's way out: the router's global table (announced into the group by FRR).
  await run('ip', ['-n', ns, 'route', 'add', 'default', 'via', globalIp])
  await run('sh', [
    '-c',
    `touch ${vrfDir}/${vrf} && mount --bind /run/netns/${ns} ${vrfDir}/${vrf}`,
  ])
  opts.undo(() => run('sh', ['-c', `umount -l ${vrfDir}/${vrf} || true`]))
  const vtysh = createVtysh({ vtyDir: opts.frrDir, timeoutMs: 20_000 })
  const until = Date.now() + 15_000
  while (!(await vrfActive(vtysh, vrf))) {
    if (Date.now() > until) throw new Error(`the border's zebra did not take VRF ${vrf}`)
    await new Promise((r) => setTimeout(r, 200))
  }
  const asn = FABRIC_ROUTER_ASN
  // The VRF's instance before its L3VNI: bgpd makes an instance in the default's AS for an
  // L3VNI it learns of with none, and would then refuse one in BORDER_VRF_ASN.
  await vtysh.configure([
    `router bgp ${BORDER_VRF_ASN} vrf ${vrf}`,
    ` bgp router-id ${linkIp}`,
    ' no bgp ebgp-requires-policy',
    ` neighbor ${globalIp} remote-as ${asn}`,
    ` neighbor ${globalIp} timers 1 3`,
    ` neighbor ${globalIp} timers connect 1`,
    ' address-family ipv4 unicast',
    `  neighbor ${globalIp} route-map HZ-LEAK-OUT out`,
    `  neighbor ${globalIp} route-map HZ-NOTHING in`,
    ' exit-address-family',
    ' address-family l2vpn evpn',
    `  route-target import ${asn}:${vni}`,
    `  route-target export ${asn}:${vni}`,
    '  default-originate ipv4',
    ' exit-address-family',
    'exit',
    `router bgp ${asn}`,
    ` neighbor ${linkIp} remote-as ${BORDER_VRF_ASN}`,
    ` neighbor ${linkIp} timers 1 3`,
    ` neighbor ${linkIp} timers connect 1`,
    ' address-family ipv4 unicast',
    `  neighbor ${linkIp} route-map HZ-LEAK-IN in`,
    `  neighbor ${linkIp} route-map HZ-NOTHING out`,
    ' exit-address-family',
    'exit',
    `vrf ${vrf}`,
    ` vni ${vni}`,
    'exit-vrf',
  ])
  // vtysh -f goes on past a line bgpd refuses: the session must come up, or say why not.
  const upBy = Date.now() + 20_000
  while (!/Established/.test(await vtysh.show(`show bgp neighbor ${linkIp}`).catch(() => ''))) {
    if (Date.now() > upBy) {
      throw new Error(`the border's VRF ${vrf} did not peer with the global table (${linkIp})`)
    }
    await new Promise((r) => setTimeout(r, 200))
  }
  return { vni, netns: ns, linkIp }
}

/** Whether zebra has `vrf` (a namespace it found) active. */
async function vrfActive(vtysh: { show(command: string): Promise<string> }, vrf: string) {
  const out = await vtysh.show('show vrf').catch(() => '')
  return out
    .split('\n')
    .some((line) => line.trim().startsWith(`vrf ${vrf} `) && !line.includes('inactive'))
}
