/**
 * The lab's fabric router: a network namespace on the fabric bridge running FRR (zebra +
 * bgpd) that peers with Hydrazine's FRR over BGP and holds an "internet" address
 * (`INTERNET_IP`) behind it, so that announced public IPs can be reached from outside.
 */
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import type { Daemon } from '../../lib/process/daemon.ts'
import { startFrrDaemons } from '../local/frr.ts'
import { type Fabric, run } from './dpu.ts'
import { netnsExec, noIpv6 } from './probes.ts'

export const FABRIC_ROUTER_ASN = 65001
export const INTERNET_IP = '198.51.100.1'

export interface FabricRouter {
  readonly netns: string
  readonly ip: string
  readonly internetIp: string
  /** `vtysh -c <command>` against the router's FRR. */
  vtysh(command: string): Promise<string>
  /** BGP routes the router installed: prefix → next hop. */
  bgpRoutes(): Promise<Map<string, string>>
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
  await noIpv6(routerNs)
  await run('ip', ['-n', routerNs, 'addr', 'add', `${routerIp}/24`, 'dev', 'eth0'])
  await run('ip', ['-n', routerNs, 'link', 'set', 'eth0', 'up'])
  await run('ip', ['-n', routerNs, 'link', 'set', 'lo', 'up'])
  await netnsExec(routerNs, 'ethtool', '-K', 'eth0', 'tx', 'off')
  // The "internet" address behind the router (on lo: no dummy module needed).
  await run('ip', ['-n', routerNs, 'addr', 'add', `${INTERNET_IP}/32`, 'dev', 'lo'])

  const frrDir = join(opts.dataDir, 'fabric-frr')
  await mkdir(frrDir, { recursive: true })
  await startFrrDaemons({
    dir: frrDir,
    daemons: ['zebra', 'bgpd'],
    configs: {
      zebra: 'hostname fabric\n',
      bgpd: [
        'frr defaults traditional',
        `router bgp ${FABRIC_ROUTER_ASN}`,
        ` bgp router-id ${routerIp}`,
        ' no bgp ebgp-requires-policy',
        ` neighbor ${peer.ip} remote-as ${peer.asn}`,
        ` neighbor ${peer.ip} timers 1 3`,
        ` neighbor ${peer.ip} timers connect 1`,
        ` neighbor ${peer.ip} disable-connected-check`,
        'exit',
        '',
      ].join('\n'),
    },
    pathspace: `${prefix}fab`,
    netns: routerNs,
    started: opts.started,
  })
  const vtysh = (command: string) => run('vtysh', ['--vty_socket', frrDir, '-c', command])
  return {
    netns: routerNs,
    ip: routerIp,
    internetIp: INTERNET_IP,
    vtysh,
    exec: (...command) => netnsExec(routerNs, ...command),
    async bgpRoutes() {
      const rib = JSON.parse(await vtysh('show ip route json')) as Record<
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
    },
  }
}
