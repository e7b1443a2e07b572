/**
 * The whole system on a simulated data centre (one Linux machine):
 *
 * - a fabric bridge in the root namespace (`fabric.gatewayIp`), where Hydrazine's
 *   embedded Redis, OVN central and FRR listen;
 * - a fabric router namespace running FRR (zebra + bgpd) that peers with Hydrazine's FRR
 *   and holds an "internet" address on a dummy interface;
 * - DPUs (`createDpu`), each running the real agent process (`agent/main.ts`), with two
 *   fabric addresses: the encap IP on `br-phy` and a NAT IP that only OVN answers for;
 * - BareMetal hosts as namespaces behind their DPU (`addHost`);
 * - dnsmasq on the fabric standing in for Carbide's DHCP server;
 * - Hydrazine itself (`infra/main.ts`, as `npm start` runs it), driven only through its
 *   HTTP API (`lab.api`).
 *
 * Everything it makes is named from `prefix` and written to `<dataDir>/lab-state.json`
 * so that `removeLabLeftovers` can clean up after a crashed run.
 */
import { spawn } from 'node:child_process'
import { mkdir, readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { type Daemon, requireBinary, startDaemon } from '../../lib/process/daemon.ts'
import { freePort } from '../../lib/process/ports.ts'
import { startFrrDaemons } from '../local/frr.ts'
import { createDpu, createFabric, type Fabric, run, type SimDpu, type SimHost } from './dpu.ts'

const repo = fileURLToPath(new URL('../..', import.meta.url))
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))
const quietly = (p: Promise<unknown>) => p.then(() => undefined).catch(() => undefined)

/** The binaries the lab needs (beyond node). */
export const LAB_BINARIES = [
  'ip',
  'ethtool',
  'ping',
  'tcpdump',
  'dnsmasq',
  'dhcrelay',
  'redis-server',
  'ovsdb-server',
  'ovs-vswitchd',
  'ovn-controller',
  'ovn-northd',
  '/usr/lib/frr/zebra',
  '/usr/lib/frr/bgpd',
  '/usr/bin/vtysh',
] as const

/** Why the lab cannot run here, or undefined when it can. */
export async function labUnavailable(): Promise<string | undefined> {
  for (const b of LAB_BINARIES) {
    try {
      requireBinary(b)
    } catch (error) {
      return `missing binary: ${(error as Error).message}`
    }
  }
  const probe = `hzprobe${process.pid}`
  try {
    await run('ip', ['netns', 'add', probe])
  } catch (error) {
    return `cannot create network namespaces: ${(error as Error).message}`
  }
  await quietly(run('ip', ['netns', 'del', probe]))
  return undefined
}

export const FABRIC_ROUTER_ASN = 65001
export const HYDRAZINE_ASN = 65000
export const INTERNET_IP = '198.51.100.1'

export interface LabHost extends SimHost {
  readonly dpu: string
  /** `ip netns exec <netns> <command…>`, throwing on failure. */
  exec(...command: string[]): Promise<string>
}

export interface LabDpu {
  readonly id: string
  readonly sim: SimDpu
  readonly encapIp: string
  readonly natIp: string
}

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

export interface ApiAnswer {
  readonly status: number
  readonly body: unknown
}

export interface LabState {
  readonly prefix: string
  readonly dataDir: string
  readonly labPid: number
  readonly url?: string
  readonly tokenFile?: string
  readonly fabric?: { bridge: string; gatewayIp: string }
  readonly router?: { netns: string; ip: string }
  readonly dpus: { id: string; netns: string; encapIp: string; natIp: string }[]
  readonly hosts: { name: string; dpu: string; netns: string; mac: string; hostPort: string }[]
}

export interface Lab {
  readonly prefix: string
  readonly dataDir: string
  readonly fabric: Fabric
  readonly router: FabricRouter
  readonly dpus: readonly LabDpu[]
  readonly hosts: readonly LabHost[]
  /** Hydrazine's HTTP API base URL and its operator token. */
  readonly url: string
  readonly token: string
  /** Hydrazine's OVN NB (unix remote), to observe, never to configure. */
  readonly nbRemote: string
  /** The DHCP server's address on the fabric (give it as a group's `dhcpServer`). */
  readonly dhcpServerIp: string
  /** dnsmasq's log: each DHCP exchange with the relay agent information it carried. */
  readonly dhcpLog: string
  api(method: string, path: string, body?: unknown): Promise<ApiAnswer>
  addHost(opts: { dpu: number; name: string; mac: string; ipCidr?: string }): Promise<LabHost>
  /**
   * (Re)starts dnsmasq serving `entries`: per relay circuit id (the agent's relay port
   * name), a subnet and fixed MAC → IP leases.
   */
  configureDhcp(entries: readonly DhcpEntry[]): Promise<void>
  nbctl(...args: string[]): Promise<string>
  writeState(): Promise<void>
  stop(): Promise<void>
}

export interface DhcpEntry {
  readonly circuitId: string
  readonly cidr: string
  readonly gateway: string
  readonly leases: readonly { mac: string; ip: string }[]
}

export function netnsExec(netns: string, ...command: string[]): Promise<string> {
  return run('ip', ['netns', 'exec', netns, ...command])
}

/** Disables IPv6 in a namespace: no router solicitations to muddy packet counters. */
async function noIpv6(netns: string): Promise<void> {
  await quietly(netnsExec(netns, 'sysctl', '-qw', 'net.ipv6.conf.all.disable_ipv6=1'))
  await quietly(netnsExec(netns, 'sysctl', '-qw', 'net.ipv6.conf.default.disable_ipv6=1'))
  await quietly(netnsExec(netns, 'sysctl', '-qw', 'net.ipv6.conf.eth0.disable_ipv6=1'))
}

/**
 * Starts the lab. On failure everything made so far is removed before the error is
 * thrown; `stop()` removes everything (and is safe to call twice).
 */
export async function startLab(opts: {
  dataDir: string
  prefix: string
  dpus?: number
  log?: (line: string) => void
}): Promise<Lab> {
  const log = opts.log ?? (() => {})
  const { dataDir, prefix } = opts
  await mkdir(dataDir, { recursive: true })
  const daemons: Daemon[] = []
  const cleanups: (() => Promise<unknown>)[] = []
  const hosts: LabHost[] = []
  const dpus: LabDpu[] = []
  const statePath = join(dataDir, 'lab-state.json')
  let state: LabState = { prefix, dataDir, labPid: process.pid, dpus: [], hosts: [] }
  const writeState = () => writeFile(statePath, `${JSON.stringify(state, null, 2)}\n`)
  let stopped = false
  const stop = async () => {
    if (stopped) return
    stopped = true
    for (const d of daemons.splice(0).reverse()) await d.stop().catch(() => {})
    for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => {})
    await removeLabLeftovers(prefix)
  }
  await writeState()

  try {
    const fabric = await createFabric({ prefix })
    cleanups.push(() => fabric.destroy())
    const base = fabric.gatewayIp.split('.').slice(0, 3).join('.')
    state = { ...state, fabric: { bridge: fabric.bridge, gatewayIp: fabric.gatewayIp } }
    await writeState()

    // ── fabric router ────────────────────────────────────────────────────────
    const routerNs = `${prefix}-rtr`
    const routerIp = `${base}.200`
    await run('ip', ['netns', 'add', routerNs])
    cleanups.push(() => run('ip', ['netns', 'del', routerNs]))
    state = { ...state, router: { netns: routerNs, ip: routerIp } }
    await writeState()
    const rOut = `${prefix}r`
    await run('ip', ['link', 'add', rOut, 'type', 'veth', 'peer', 'name', `${prefix}R`])
    cleanups.push(() => run('ip', ['link', 'del', rOut]))
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

    const frrDir = join(dataDir, 'fabric-frr')
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
          ` neighbor ${fabric.gatewayIp} remote-as ${HYDRAZINE_ASN}`,
          ` neighbor ${fabric.gatewayIp} timers 1 3`,
          ` neighbor ${fabric.gatewayIp} timers connect 1`,
          ` neighbor ${fabric.gatewayIp} disable-connected-check`,
          'exit',
          '',
        ].join('\n'),
      },
      pathspace: `${prefix}fab`,
      netns: routerNs,
      started: (daemon) => daemons.push(daemon),
    })
    const vtysh = (command: string) => run('vtysh', ['--vty_socket', frrDir, '-c', command])
    const router: FabricRouter = {
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
    log(`fabric router ${routerIp} (AS ${FABRIC_ROUTER_ASN}) in ${routerNs}`)

    // ── Hydrazine ────────────────────────────────────────────────────────────
    const hzDir = join(dataDir, 'hydrazine')
    await mkdir(hzDir, { recursive: true })
    const port = await freePort()
    const url = `http://127.0.0.1:${port}`
    const hzLog = join(dataDir, 'hydrazine.log')
    daemons.push(
      await startDaemon({
        name: 'hydrazine',
        command: process.execPath,
        args: ['--import', 'tsx', 'infra/main.ts'],
        cwd: repo,
        env: {
          HYDRAZINE_DATA_DIR: hzDir,
          HYDRAZINE_HTTP_PORT: String(port),
          HYDRAZINE_GRPC_PORT: String(await freePort()),
          HYDRAZINE_EMBEDDED_LISTEN: fabric.gatewayIp,
          HYDRAZINE_BGP_ASN: String(HYDRAZINE_ASN),
          HYDRAZINE_BGP_ROUTER_ID: fabric.gatewayIp,
          HYDRAZINE_BGP_PEERS: `${routerIp}:${FABRIC_ROUTER_ASN}`,
          HYDRAZINE_FABRIC_DUMMY_IP: `${base}.250/24`,
          HYDRAZINE_FABRIC_GATEWAY: routerIp,
          HYDRAZINE_PHYSICAL_NETWORK: 'physnet',
          LOG_LEVEL: 'info',
        },
        logFile: hzLog,
        ready: async () => {
          try {
            return (await fetch(`${url}/healthz`)).ok
          } catch {
            return false
          }
        },
        readyTimeoutMs: 60_000,
      }),
    )
    const hzOut = await readFile(hzLog, 'utf8')
    const redis = /redis-server listening on ([0-9.]+):(\d+)/.exec(hzOut)
    const sb = /ovsdb-server\(sb\) on unix:\S+ and (tcp:[0-9.]+:\d+)/.exec(hzOut)
    const nb = /ovsdb-server\(nb\) on (unix:[^\s"]+)/.exec(hzOut)
    if (!redis || !sb || !nb) throw new Error(`cannot find Redis/OVN endpoints in ${hzLog}`)
    const redisUrl = `redis://${redis[1]}:${redis[2]}`
    const nbRemote = nb[1] ?? ''
    const tokenFile = join(hzDir, 'operator-token')
    const token = (await readFile(tokenFile, 'utf8')).trim()
    state = { ...state, url, tokenFile }
    await writeState()
    log(`Hydrazine ${url} (Redis ${redisUrl}, SB ${sb[1]})`)

    const api = async (method: string, path: string, body?: unknown): Promise<ApiAnswer> => {
      const res = await fetch(`${url}${path}`, {
        method,
        headers: {
          authorization: `Bearer ${token}`,
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
        },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      })
      const text = await res.text()
      let parsed: unknown = text
      try {
        parsed = text ? JSON.parse(text) : undefined
      } catch {}
      return { status: res.status, body: parsed }
    }

    // ── DPUs, each with the real agent ──────────────────────────────────────
    for (let i = 1; i <= (opts.dpus ?? 3); i++) {
      const id = `dpu${i}`
      const sim = await createDpu({ fabric, name: id, dataDir })
      cleanups.push(() => sim.destroy())
      const natIp = `${base}.${100 + i}`
      dpus.push({ id, sim, encapIp: sim.encapIp, natIp })
      state = {
        ...state,
        dpus: [...state.dpus, { id, netns: sim.netns, encapIp: sim.encapIp, natIp }],
      }
      await writeState()
      const flags: [string, string][] = [
        ['dpu-id', id],
        ['fabric-ips', `${sim.encapIp},${natIp}`],
        ['ovs-db', sim.ovsDb],
        ['ovs-rundir', sim.ovsRunDir],
        ['redis-url', redisUrl],
        ['grpc-listen', '127.0.0.1:0'],
        ['run-dir', join(sim.dataDir, 'agent')],
        ['netns', sim.netns],
        ['datapath-type', 'netdev'],
        ['uplink-bridge', sim.uplinkBridge],
        ['uplink-interface', sim.uplinkInterface],
        ['bridge-mappings', `physnet:${sim.uplinkBridge}`],
        // Fabric addresses for this DPU's DHCP relays (giaddr), four groups' worth.
        ['relay-uplink-ips', [0, 1, 2, 3].map((n) => `${base}.${150 + 4 * i + n}/24`).join(',')],
        ['heartbeat-ms', '1000'],
        ['install-timeout-ms', '30000'],
        ['lock-ms', '10000'],
      ]
      daemons.push(
        await startDaemon({
          name: `agent(${id})`,
          command: process.execPath,
          args: ['--import', 'tsx', 'agent/main.ts', ...flags.flatMap(([f, v]) => [`--${f}`, v])],
          cwd: repo,
          logFile: join(sim.dataDir, 'agent.log'),
          ready: async () => {
            const answer = await api('GET', '/v1/dpus').catch(() => undefined)
            const items = (answer?.body as { items?: { id: string }[] } | undefined)?.items ?? []
            return items.some((d) => d.id === id)
          },
          readyTimeoutMs: 30_000,
        }),
      )
      log(`${id}: encap ${sim.encapIp}, NAT ${natIp}, netns ${sim.netns}, agent up`)
    }

    // ── DHCP server (dnsmasq) on the fabric ─────────────────────────────────
    const dhcpLog = join(dataDir, 'dnsmasq.log')
    let dnsmasq: Daemon | undefined
    const configureDhcp = async (entries: readonly DhcpEntry[]) => {
      if (dnsmasq) {
        const d = dnsmasq
        dnsmasq = undefined
        daemons.splice(daemons.indexOf(d), 1)
        await d.stop()
      }
      const args = [
        '--keep-in-foreground',
        '--port=0',
        `--interface=${fabric.bridge}`,
        '--bind-interfaces',
        '--log-dhcp',
        `--log-facility=${dhcpLog}`,
        `--dhcp-leasefile=${join(dataDir, 'dnsmasq.leases')}`,
        `--pid-file=${join(dataDir, 'dnsmasq.pid')}`,
        '--dhcp-authoritative',
      ]
      entries.forEach((e, i) => {
        const tag = `g${i}`
        const [network = '', len = '24'] = e.cidr.split('/')
        args.push(
          `--dhcp-circuitid=set:${tag},${e.circuitId}`,
          `--dhcp-range=tag:${tag},${network},static,${maskOf(Number(len))},1h`,
          `--dhcp-option=tag:${tag},option:router,${e.gateway}`,
        )
        for (const l of e.leases) args.push(`--dhcp-host=${l.mac},${l.ip}`)
      })
      dnsmasq = await startDaemon({
        name: 'dnsmasq',
        command: 'dnsmasq',
        args,
        logFile: join(dataDir, 'dnsmasq.out'),
        ready: async () => (await readFile(dhcpLog, 'utf8').catch(() => '')).includes('DHCP'),
      })
      daemons.push(dnsmasq)
    }
    await configureDhcp([])

    const addHost = async (h: { dpu: number; name: string; mac: string; ipCidr?: string }) => {
      const dpu = dpus[h.dpu - 1]
      if (!dpu) throw new Error(`no DPU ${h.dpu}`)
      const sim = await dpu.sim.addHost({ name: h.name, mac: h.mac })
      await noIpv6(sim.netns)
      if (h.ipCidr) {
        await run('ip', ['-n', sim.netns, 'addr', 'add', h.ipCidr, 'dev', 'eth0'])
      }
      const host: LabHost = {
        ...sim,
        dpu: dpu.id,
        exec: (...command) => netnsExec(sim.netns, ...command),
      }
      hosts.push(host)
      state = {
        ...state,
        hosts: [
          ...state.hosts,
          { name: h.name, dpu: dpu.id, netns: sim.netns, mac: h.mac, hostPort: sim.hostPort },
        ],
      }
      await writeState()
      return host
    }

    return {
      prefix,
      dataDir,
      fabric,
      router,
      dpus,
      hosts,
      url,
      token,
      nbRemote,
      dhcpServerIp: fabric.gatewayIp,
      dhcpLog,
      api,
      addHost,
      configureDhcp,
      nbctl: (...args) => run('ovn-nbctl', [`--db=${nbRemote}`, '--timeout=10', ...args]),
      writeState,
      stop,
    }
  } catch (error) {
    await stop()
    throw error
  }
}

function maskOf(len: number): string {
  const bits = len === 0 ? 0 : (0xffffffff << (32 - len)) >>> 0
  return [24, 16, 8, 0].map((s) => (bits >>> s) & 255).join('.')
}

/**
 * Removes every namespace and link whose name starts with `prefix` (what a lab made),
 * for `lab down` after a crash and as the last step of `stop()`.
 */
export async function removeLabLeftovers(prefix: string): Promise<void> {
  const namespaces = (await run('ip', ['netns', 'list']).catch(() => ''))
    .split('\n')
    .map((l) => l.split(' ')[0] ?? '')
    .filter((n) => n.startsWith(`${prefix}-`))
  for (const ns of namespaces) await quietly(run('ip', ['netns', 'del', ns]))
  const links = (await run('ip', ['-o', 'link', 'show']).catch(() => ''))
    .split('\n')
    .map((l) => /^\d+: ([^:@]+)/.exec(l)?.[1] ?? '')
    .filter((n) => n.startsWith(prefix))
  for (const link of links) await quietly(run('ip', ['link', 'del', link]))
}

/** Polls `check` every `everyMs` until it returns true or `timeoutMs` passes. */
export async function eventually(
  check: () => Promise<boolean>,
  timeoutMs = 30_000,
  everyMs = 500,
): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check().catch(() => false)) return true
    if (Date.now() > deadline) return false
    await sleep(everyMs)
  }
}

/** ICMP echo requests a namespace has received (`/proc/net/snmp` Icmp InEchos). */
export async function icmpInEchos(netns: string): Promise<number> {
  const snmp = await netnsExec(netns, 'cat', '/proc/net/snmp')
  const lines = snmp.split('\n').filter((l) => l.startsWith('Icmp:'))
  const names = lines[0]?.split(/\s+/) ?? []
  const values = lines[1]?.split(/\s+/) ?? []
  return Number(values[names.indexOf('InEchos')] ?? Number.NaN)
}

/** True when `count` pings from `netns` to `target` all get answers. */
export async function pings(netns: string, target: string, count = 2): Promise<boolean> {
  try {
    await netnsExec(netns, 'ping', '-c', String(count), '-i', '0.2', '-W', '1', target)
    return true
  } catch {
    return false
  }
}

/**
 * Captures the first packet matching `filter` on `netns`'s interfaces, started before
 * `act` runs; resolves with tcpdump's line (or '' after `timeoutMs`).
 */
export async function capture(
  netns: string,
  filter: string,
  act: () => Promise<unknown>,
  timeoutMs = 10_000,
): Promise<string> {
  const child = spawn(
    'ip',
    ['netns', 'exec', netns, 'tcpdump', '-l', '-n', '-c', '1', '-i', 'any', ...filter.split(' ')],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  )
  let out = ''
  let err = ''
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString()
  })
  child.stderr.on('data', (c: Buffer) => {
    err += c.toString()
  })
  const done = new Promise<void>((r) => child.once('exit', () => r()))
  await eventually(async () => err.includes('listening on'), 5000, 100)
  await act()
  await Promise.race([done, sleep(timeoutMs)])
  if (child.exitCode === null) child.kill('SIGKILL')
  await done
  return out.trim()
}
