/**
 * The DPU's own FRR for Fabric groups: one zebra and one bgpd, started by the agent on
 * the first Fabric job and kept while it runs. A leaking host's route is marked with a
 * large community for the fabric's border (`hostRouteMaps`). The default instance peers (iBGP, the
 * fabric's AS) with the fabric's EVPN route reflectors and advertises every VNI; each
 * group's VRF `hzv<VNI>` has `router bgp ASN vrf hzv<VNI>` that redistributes its kernel
 * host routes (only /32 and /128) as EVPN type-5 routes in the group's L3VNI, route
 * target ASN:VNI, with the DPU's VTEP as next hop. The configuration is the same for the
 * kernel and the netns VRF backends; only zebra's start differs: with the netns backend,
 * zebra runs with `-n` in a private mount namespace whose `/run/netns` is the backend's
 * directory (`vrf.ts`), so it takes the DPU's VRF namespaces, and only those, as VRFs.
 */
import { chmod, chown, mkdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { leakCommunityOf } from '../lib/agent-protocol/index.ts'
import { type5Paths } from '../lib/frr/evpn-routes.ts'
import { createVty, type Vty } from '../lib/frr/vty.ts'
import { createVtysh, type Vtysh } from '../lib/frr/vtysh.ts'
import { type Daemon, startDaemon } from '../lib/process/daemon.ts'
import { canConnect } from '../lib/process/ports.ts'
import { stopLeftover } from './daemons.ts'
import { FreshRead } from './fresh-read.ts'
import { LEAK_METRIC, vrfNames } from './vrf.ts'

export interface EvpnPlace {
  /** Where the daemons keep configs, pid files, vty sockets and logs. */
  readonly dir: string
  /** FRR pathspace (`-N`): unique on the machine. */
  readonly pathspace: string
  /** The DPU's underlay namespace (the lab); absent: the agent's own. */
  readonly netns?: string | undefined
  /** The netns backend's directory, zebra's `/run/netns`; absent: kernel VRF devices. */
  readonly netnsDir?: string | undefined
  /** The DPU's VTEP: the next hop of the routes it originates. */
  readonly vtep: string
  readonly log: (line: string) => void
}

export interface EvpnVrf {
  readonly vni: number
  readonly asn: number
  readonly routeTarget: string
  readonly vtep: string
}

/**
 * The route-map a VRF redistributes its kernel host routes through, per family: a leaking
 * host's route (its metric, `LEAK_METRIC`) gets the border's marking, the large community
 * `ASN:1:1` (its own address) or `ASN:1:2` (its public IP); any other /32 (/128) goes
 * unmarked. Pure.
 */
export function hostRouteMaps(asn: number): string[] {
  const marks = [
    [5, LEAK_METRIC.fabric, leakCommunityOf(asn, 'fabric')],
    [6, LEAK_METRIC.public, leakCommunityOf(asn, 'public')],
  ] as const
  return (
    [
      ['HZ-HOSTS4', 'ip'],
      ['HZ-HOSTS6', 'ipv6'],
    ] as const
  ).flatMap(([map, family]) => [
    ...marks.flatMap(([seq, metric, community]) => [
      `route-map ${map} permit ${seq}`,
      ` match ${family} address prefix-list ${map}`,
      ` match metric ${metric}`,
      ` set large-community ${community}`,
      'exit',
    ]),
    `route-map ${map} permit 10`,
    ` match ${family} address prefix-list ${map}`,
    'exit',
  ])
}

/** The default instance's lines: iBGP EVPN with the fabric's route reflectors. Pure. */
export function evpnBaseConfig(asn: number, vtep: string, peers: readonly string[]): string[] {
  return [
    'ip prefix-list HZ-HOSTS4 seq 5 permit 0.0.0.0/0 ge 32',
    'ipv6 prefix-list HZ-HOSTS6 seq 5 permit ::/0 ge 128',
    ...hostRouteMaps(asn),
    `router bgp ${asn}`,
    ` bgp router-id ${vtep}`,
    ' no bgp default ipv4-unicast',
    ...peers.flatMap((p) => [
      ` neighbor ${p} remote-as ${asn}`,
      ` neighbor ${p} timers 1 3`,
      ` neighbor ${p} timers connect 1`,
    ]),
    ' address-family l2vpn evpn',
    ...peers.map((p) => `  neighbor ${p} activate`),
    '  advertise-all-vni',
    ' exit-address-family',
    'exit',
  ]
}

/** A group's VRF: its L3VNI in zebra, its BGP instance announcing its host routes. Pure. */
export function evpnVrfConfig({ vni, asn, routeTarget, vtep }: EvpnVrf): string[] {
  const { vrf } = vrfNames(vni)
  return [
    `vrf ${vrf}`,
    ` vni ${vni}`,
    'exit-vrf',
    `router bgp ${asn} vrf ${vrf}`,
    ` bgp router-id ${vtep}`,
    ' address-family ipv4 unicast',
    '  redistribute kernel route-map HZ-HOSTS4',
    ' exit-address-family',
    ' address-family ipv6 unicast',
    '  redistribute kernel route-map HZ-HOSTS6',
    ' exit-address-family',
    ' address-family l2vpn evpn',
    '  advertise ipv4 unicast',
    '  advertise ipv6 unicast',
    `  route-target import ${routeTarget}`,
    `  route-target export ${routeTarget}`,
    ' exit-address-family',
    'exit',
  ]
}

/**
 * Undoes `evpnVrfConfig`: the VRF's routes are withdrawn with its instance. The L3VNI goes
 * first: bgpd refuses to remove an instance whose VRF still has one. Pure.
 */
export function evpnVrfRemoval(vni: number, asn: number): string[] {
  const { vrf } = vrfNames(vni)
  return [`vrf ${vrf}`, ` no vni ${vni}`, 'exit-vrf', `no router bgp ${asn} vrf ${vrf}`]
}

/** What bgpd announces: the EVPN type-5 routes (the whole table; `selfOriginatedType5` picks). */
const TYPE5_ROUTES = 'show bgp l2vpn evpn route type prefix json'

/** zebra and bgpd of the DPU, and what they announce. */
export class EvpnSpeaker {
  private daemons: Daemon[] = []
  private starting: Promise<void> | undefined
  /**
   * How many times zebra and bgpd were started: what was configured in them holds while
   * this stays the same (`FabricAgent` keys what it configured with it).
   */
  private startCount = 0
  /** The default instance's configuration as last applied to the running daemons. */
  private baseApplied: string | undefined
  /** Configuration (a VRF's lines reach zebra and bgpd both: vtysh sends each its own). */
  readonly vtysh: Vtysh
  /**
   * Reads over the daemons' own vty sockets, kept open: no vtysh process per read (each
   * one costs tens of ms of CPU, and every host's configure polls bgpd until its routes
   * are announced).
   */
  private readonly bgpd: Vty
  private readonly zebra: Vty
  /** bgpd's EVPN type-5 routes: one read at a time, shared by the callers polling it. */
  private readonly type5 = new FreshRead(() => this.bgpd.show(TYPE5_ROUTES))

  constructor(
    private readonly place: EvpnPlace,
    private readonly peers: readonly string[],
  ) {
    this.vtysh = createVtysh({ vtyDir: place.dir, timeoutMs: 20_000 })
    this.bgpd = createVty({ vtyDir: place.dir, daemon: 'bgpd', timeoutMs: 20_000 })
    this.zebra = createVty({ vtyDir: place.dir, daemon: 'zebra', timeoutMs: 20_000 })
  }

  get running(): boolean {
    return this.daemons.length === 2 && this.daemons.every((d) => d.running)
  }

  /** Starts zebra and bgpd unless they run, and configures the default instance. */
  async ensure(asn: number, vtep: string): Promise<void> {
    if (!this.running) {
      this.starting ??= this.start().finally(() => {
        this.starting = undefined
      })
      await this.starting
    }
    // Applied once per start: each vtysh run costs tens of ms of CPU, and every host's
    // configure asks for it.
    const base = `${asn} ${vtep}`
    if (this.baseApplied === base) return
    await this.vtysh.configure(evpnBaseConfig(asn, vtep, this.peers))
    this.baseApplied = base
  }

  /** Changes when the daemons start again: what they were told before is gone. */
  get generation(): number {
    return this.startCount
  }

  private async start(): Promise<void> {
    const { dir, pathspace, netns, netnsDir, log } = this.place
    await this.stop()
    this.startCount += 1
    await mkdir(dir, { recursive: true })
    // FRR running as root still wants its run directory group-writable by its vty group.
    const vtyGroup = await vtyGroupId()
    if (vtyGroup !== undefined) await chown(dir, 0, vtyGroup).catch(() => {})
    await chmod(dir, 0o775)
    const identity =
      process.getuid?.() === 0
        ? ['-u', 'root', '-g', vtyGroup !== undefined ? 'frrvty' : 'root']
        : []
    for (const name of ['zebra', 'bgpd'] as const) {
      const conf = join(dir, `${name}.conf`)
      // zebra holds EVPN devices protodown for a startup delay (180 s by default) meant for
      // multihoming; a DPU has no Ethernet segment to protect, and its VRFs come later.
      await writeFile(
        conf,
        `hostname ${pathspace}\n${name === 'zebra' ? 'evpn mh startup-delay 0\n' : ''}`,
      )
      const pidFile = join(dir, `${name}.pid`)
      if (await stopLeftover(pidFile, `/usr/lib/frr/${name}`)) log(`stopped a leftover ${name}`)
      const argv = [
        `/usr/lib/frr/${name}`,
        ...(name === 'zebra' && netnsDir ? ['-n'] : []),
        '-N',
        pathspace,
        ...identity,
        '-f',
        conf,
        '-i',
        pidFile,
        '-z',
        join(dir, 'zserv.api'),
        '--vty_socket',
        dir,
        '--log',
        `file:${join(dir, `${name}.log`)}`,
      ]
      // zebra -n takes every file of /run/netns as a VRF: it sees the backend's only.
      const command = netnsDir
        ? [
            'unshare',
            '--mount',
            '--propagation',
            'slave',
            '--',
            'sh',
            '-c',
            `mount --rbind ${netnsDir} /run/netns && exec "$@"`,
            'sh',
            ...argv,
          ]
        : argv
      const [file = '', ...args] = command
      const daemon = await startDaemon({
        name: `${name}(evpn)`,
        command: file,
        args,
        ...(netns ? { netns } : {}),
        logFile: join(dir, `${name}.out`),
        tailFiles: [join(dir, `${name}.log`)],
        ready: () => canConnect({ path: join(dir, `${name}.vty`) }),
        readyTimeoutMs: 20_000,
      })
      this.daemons.push(daemon)
      log(`${name} for Fabric groups started (reaper pid ${daemon.pid})`)
    }
  }

  /** Configures a group's VRF once zebra has it (a namespace or device it just learnt of). */
  async addVrf(vrf: EvpnVrf): Promise<void> {
    const { vrf: name } = vrfNames(vrf.vni)
    await waitUntil(async () => (await this.activeVrfs()).has(name), 10_000)
    await this.vtysh.configure(evpnVrfConfig(vrf))
  }

  async removeVrf(vni: number, asn: number): Promise<void> {
    await this.vtysh.configure(evpnVrfRemoval(vni, asn))
  }

  /** The VRFs zebra knows and has active. */
  async activeVrfs(): Promise<Set<string>> {
    if (!this.running) return new Set()
    const out = await this.zebra.show('show vrf').catch(() => '')
    const active = new Set<string>()
    for (const line of out.split('\n')) {
      const m = /^vrf (\S+) (\S+)/.exec(line.trim())
      if (m?.[1] && !/inactive/.test(line)) active.add(m[1])
    }
    return active
  }

  /**
   * The host prefixes this DPU announces as EVPN type-5 routes of the VRF: self-originated,
   * with the group's route target (`ASN:VNI`).
   */
  async announced(vni: number, routeTarget?: string): Promise<string[]> {
    const out = await this.type5Json()
    return selfOriginatedType5(out, routeTarget ?? `:${vni}`, this.place.vtep)
  }

  /** `announced` of each VRF, from one read of bgpd (a heartbeat's, for every VRF). */
  async announcedIn(vnis: readonly number[]): Promise<Map<number, string[]>> {
    const out = vnis.length > 0 ? await this.type5Json() : '{}'
    return new Map(vnis.map((vni) => [vni, selfOriginatedType5(out, `:${vni}`, this.place.vtep)]))
  }

  private async type5Json(): Promise<string> {
    if (!this.running) return '{}'
    return this.type5.read().catch(() => '{}')
  }

  async stop(): Promise<void> {
    this.baseApplied = undefined
    for (const d of this.daemons.splice(0).reverse()) await d.stop().catch(() => {})
  }

  /** Stops the daemons and closes the connections to them, for good. */
  async close(): Promise<void> {
    await this.stop()
    this.bgpd.close()
    this.zebra.close()
  }
}

/**
 * The prefixes of `show bgp l2vpn evpn route … json` this DPU originates (next hop its
 * VTEP) whose route target is `rt` (`65001:7`, or `:7` for any AS). Pure.
 */
export function selfOriginatedType5(json: string, rt: string, vtep: string): string[] {
  const prefixes = new Set<string>()
  for (const path of type5Paths(json)) {
    if (!path.nextHops.includes(vtep)) continue
    if (path.routeTargets.some((r) => r === rt || (rt.startsWith(':') && r.endsWith(rt)))) {
      prefixes.add(path.prefix)
    }
  }
  return [...prefixes]
}

async function vtyGroupId(): Promise<number | undefined> {
  const groups = await readFile('/etc/group', 'utf8').catch(() => '')
  const line = groups.split('\n').find((l) => l.startsWith('frrvty:'))
  const gid = Number(line?.split(':')[2])
  return Number.isInteger(gid) ? gid : undefined
}

/**
 * Polls `check` until true or `ms` pass; true when it became true. The pause between
 * checks starts at 10 ms and doubles up to 200 ms: a route FRR learns within a few ms is
 * seen at once, and one that takes seconds costs a few reads per second.
 */
export async function waitUntil(check: () => Promise<boolean>, ms: number): Promise<boolean> {
  const until = Date.now() + ms
  for (let pause = 10; ; pause = Math.min(2 * pause, 200)) {
    if (await check()) return true
    if (Date.now() > until) return false
    await new Promise((r) => setTimeout(r, pause))
  }
}
