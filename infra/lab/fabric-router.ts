/**
 * The lab's fabric router: a network namespace on the fabric bridge running FRR (zebra +
 * bgpd) that peers with Hydrazine's FRR over BGP and holds an "internet" address
 * (`INTERNET_IP`) behind it, so that announced public IPs can be reached from outside.
 * It is also the fabric's EVPN route reflector: any DPU on the fabric's /24 may peer with
 * it (iBGP, its AS, `l2vpn evpn`), as the DPUs' own FRR do for Fabric groups.
 */
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { type5Paths } from '../../lib/frr/evpn-routes.ts'
import type { Daemon } from '../../lib/process/daemon.ts'
import { startFrrDaemons } from '../local/frr.ts'
import { type Fabric, run } from './dpu.ts'
import { netnsExec } from './probes.ts'

export const FABRIC_ROUTER_ASN = 65001
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
  await startFrrDaemons({
    dir: frrDir,
    daemons: ['zebra', 'bgpd'],
    configs: {
      zebra: 'hostname fabric\n',
      bgpd: [
        'frr defaults traditional',
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
  return {
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
