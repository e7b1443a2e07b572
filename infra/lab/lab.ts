/**
 * The whole system on a simulated data centre (one Linux machine), started and stopped as
 * one: `startLab` puts the parts together, each from its own module:
 *
 * - a fabric bridge in the root namespace (`fabric.gatewayIp`), where Hydrazine's
 *   embedded Redis, FRR and each resource group's OVN central listen (`dpu.ts`);
 * - a fabric router namespace running FRR (zebra + bgpd) that peers with Hydrazine's FRR
 *   (IPv4 and IPv6 routes) and holds "internet" addresses behind it (`fabric-router.ts`);
 * - DPUs (`createDpu`), each running the real agent process (`dpu-agent.ts`), with two
 *   fabric addresses: the encap IP on `br-phy` and a NAT IP that only OVN answers for;
 * - BareMetal hosts as namespaces behind their DPU (`addHost`);
 * - dnsmasq on the fabric standing in for Carbide's DHCP server (`dhcp-server.ts`);
 * - Hydrazine itself (`infra/main.ts`, as `npm start` runs it: one OVN central per
 *   resource group), driven only through its HTTP API (`lab.api`, `hydrazine.ts`).
 *
 * Everything it makes is named from `prefix` and written to `<dataDir>/lab-state.json`
 * so that `removeLabLeftovers` can clean up after a crashed run. Tests look inside with
 * the helpers in `probes.ts`.
 */
import { mkdir, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { requireBinary } from '../../lib/process/daemon.ts'
import { type RedisEndpoint, redactRedisUrl } from '../../lib/redis/connection.ts'
import { labDpuAddresses, RESERVED_IP6, ROUTER_IP6 } from './addresses.ts'
import { type DhcpEntry, dhcpServer } from './dhcp-server.ts'
import { createDpu, createFabric, type Fabric, run, type SimDpu, type SimHost } from './dpu.ts'
import { startDpuAgent } from './dpu-agent.ts'
import { guardFabric, unguardFabric } from './fabric-guard.ts'
import { FABRIC_ROUTER_ASN, type FabricRouter, startFabricRouter } from './fabric-router.ts'
import { type ApiAnswer, HYDRAZINE_ASN, type LabCentral, startHydrazine } from './hydrazine.ts'
import { netnsExec, noIpv6 } from './probes.ts'

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
  /** Its IPv6 NAT address on the fabric (`fd00:fab::/64`). */
  readonly natIp6: string
}

export interface LabState {
  readonly prefix: string
  readonly dataDir: string
  readonly labPid: number
  readonly url?: string
  readonly tokenFile?: string
  /** Where Hydrazine keeps the groups' OVN centrals, one directory each. */
  readonly centralsDir?: string
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
  /** What the DPUs' agents connect to: `rediss://` Redis. */
  readonly redisScheme: string
  /**
   * The agents' Redis as its default user (every key), with the controller's client
   * certificate: for a tool that reads the agents' queues, as the benchmark reads their
   * jobs. Secret: never print its URL.
   */
  readonly redis: RedisEndpoint
  /** Where Hydrazine keeps the groups' OVN centrals, one directory each. */
  readonly centralsDir: string
  /** The DHCP server's address on the fabric (give it as a group's `dhcpServer`). */
  readonly dhcpServerIp: string
  /** dnsmasq's log: each DHCP exchange with the relay agent information it carried. */
  readonly dhcpLog: string
  api(method: string, path: string, body?: unknown): Promise<ApiAnswer>
  /**
   * The OVN central of `group` (created): its NB to observe, the `ssl:` SB its DPUs'
   * ovn-controller follow, its directory.
   */
  central(group: string): Promise<LabCentral>
  /**
   * A host namespace behind DPU `dpu` (1-based), with `ipCidr` on its `eth0` when given.
   * IPv6 is off (no router solicitations in packet counts) unless `ipv6`: then the host
   * configures itself from router advertisements (SLAAC), as a dual-stack host does.
   */
  addHost(opts: {
    dpu: number
    name: string
    mac: string
    ipCidr?: string
    ipv6?: boolean
    /** Another interface (`ifname`) of this host's namespace, on DPU `dpu`. */
    into?: { host: LabHost; ifname: string }
  }): Promise<LabHost>
  /**
   * (Re)starts dnsmasq serving `entries`: per relay circuit id (the agent's relay port
   * name), a subnet and fixed MAC → IP leases.
   */
  configureDhcp(entries: readonly DhcpEntry[]): Promise<void>
  /** `ovn-nbctl` against `group`'s NB: to observe, never to configure. */
  nbctl(group: string, ...args: string[]): Promise<string>
  /**
   * Turns the fabric's source guard on or off (`fabric-guard.ts`): with it, a DPU's encap
   * address is taken as a source only from the bridge port of that DPU's uplink, as a
   * data-centre switch's IP source guard would.
   */
  guardFabric(on: boolean): Promise<void>
  writeState(): Promise<void>
  stop(): Promise<void>
}

/**
 * `Promise.all` that waits for every promise to settle before it throws the first
 * failure: nothing is still being made when the caller undoes what was.
 */
async function allSettled<T extends readonly unknown[]>(
  promises: readonly [...{ [K in keyof T]: Promise<T[K]> }],
): Promise<T>
async function allSettled<T>(promises: readonly Promise<T>[]): Promise<T[]>
async function allSettled(promises: readonly Promise<unknown>[]): Promise<unknown[]> {
  const results = await Promise.allSettled(promises)
  const failed = results.find((r): r is PromiseRejectedResult => r.status === 'rejected')
  if (failed) throw failed.reason
  return results.map((r) => (r as PromiseFulfilledResult<unknown>).value)
}

/**
 * Starts the lab. On failure everything made so far is removed before the error is
 * thrown; `stop()` removes everything (and is safe to call twice).
 */
export async function startLab(opts: {
  dataDir: string
  prefix: string
  dpus?: number
  /** DHCP relay uplink addresses per DPU: how many groups each may relay for (default 4). */
  relaysPerDpu?: number
  /** The admin network's subnet (`HYDRAZINE_ADMIN_NETWORK`, group `admin`); default none. */
  adminNetwork?: { cidr: string; gateway: string }
  /** `HYDRAZINE_GENEVE_IPSEC=true` for the lab's Hydrazine (default off). */
  geneveIpsec?: boolean
  log?: (line: string) => void
}): Promise<Lab> {
  const log = opts.log ?? (() => {})
  const { dataDir, prefix } = opts
  await mkdir(dataDir, { recursive: true })
  // Stopped first, newest first: the daemons; then the namespaces and links, newest first.
  const daemons: { stop(): Promise<void> }[] = []
  const cleanups: (() => Promise<unknown>)[] = []
  const started = (daemon: { stop(): Promise<void> }) => daemons.push(daemon)
  const undo = (step: () => Promise<unknown>) => cleanups.push(step)
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
    undo(() => fabric.destroy())
    // The fabric's addresses: see `addresses.ts`.
    const base = fabric.gatewayIp.split('.').slice(0, 3).join('.')
    const dpuCount = opts.dpus ?? 3
    const relaysPerDpu = opts.relaysPerDpu ?? 4
    // Refused now when the lab does not fit its /24, before any DPU starts.
    labDpuAddresses(base, 1, dpuCount, relaysPerDpu)
    state = { ...state, fabric: { bridge: fabric.bridge, gatewayIp: fabric.gatewayIp } }
    await writeState()

    const router = await startFabricRouter({
      prefix,
      dataDir,
      fabric,
      ip: `${base}.200`,
      ip6: `${ROUTER_IP6}/64`,
      peer: { ip: fabric.gatewayIp, asn: HYDRAZINE_ASN },
      started,
      undo,
    })
    state = { ...state, router: { netns: router.netns, ip: router.ip } }
    await writeState()
    log(`fabric router ${router.ip} (AS ${FABRIC_ROUTER_ASN}) in ${router.netns}`)

    // The DPUs' namespaces and switches are made while Hydrazine starts, and their agents
    // all start at once: each waits mostly on its processes. Their fabric addresses are
    // handed out first, in order (dpu1 the first), whatever order they come up in. A DPU's
    // undo is registered as soon as it exists, and every one has settled before any
    // failure is thrown: `stop` then undoes them all.
    const planned = Array.from({ length: dpuCount }, (_, k) => ({
      id: `dpu${k + 1}`,
      encapIp: fabric.allocateIp(),
      ...labDpuAddresses(base, k + 1, dpuCount, relaysPerDpu),
    }))
    const simulating = planned.map(async ({ id, encapIp }) => {
      const sim = await createDpu({ fabric, name: id, dataDir, encapIp })
      undo(() => sim.destroy())
      return sim
    })
    const hydrazineStarting = startHydrazine({
      dataDir,
      fabric,
      dummyIp: `${base}.250/24`,
      dummyIp6: RESERVED_IP6,
      router: { ip: router.ip, ip6: router.ip6, asn: FABRIC_ROUTER_ASN },
      ...(opts.adminNetwork ? { adminNetwork: opts.adminNetwork } : {}),
      ...(opts.geneveIpsec ? { geneveIpsec: true } : {}),
      started,
    })
    const [hydrazine, sims] = await allSettled([hydrazineStarting, allSettled(simulating)])
    const { url, tokenFile, centralsDir } = hydrazine
    state = { ...state, url, tokenFile, centralsDir }
    await writeState()
    log(
      `Hydrazine ${url} (agents' Redis ${redactRedisUrl(hydrazine.redisUrl)}, ` +
        `an OVN central per group in ${centralsDir})`,
    )

    for (const [k, { id, natIp, natIp6 }] of planned.entries()) {
      const sim = sims[k]
      if (!sim) throw new Error(`no ${id}`)
      dpus.push({ id, sim, encapIp: sim.encapIp, natIp, natIp6 })
      state = {
        ...state,
        dpus: [...state.dpus, { id, netns: sim.netns, encapIp: sim.encapIp, natIp }],
      }
    }
    await writeState()
    await allSettled(
      planned.map(async ({ id, natIp, natIp6, relayUplinkIps }, k) => {
        const sim = sims[k]
        if (!sim) throw new Error(`no ${id}`)
        started(
          await startDpuAgent({
            id,
            sim,
            natIp,
            natIp6,
            relayUplinkIps: [...relayUplinkIps],
            evpnPeers: [router.ip],
            hydrazine,
          }),
        )
        log(`${id}: encap ${sim.encapIp}, NAT ${natIp} and ${natIp6}, netns ${sim.netns}, agent up`)
      }),
    )

    const dhcp = dhcpServer({ bridge: fabric.bridge, dataDir })
    started(dhcp)
    await dhcp.configure([])

    const addHost: Lab['addHost'] = async (h) => {
      const dpu = dpus[h.dpu - 1]
      if (!dpu) throw new Error(`no DPU ${h.dpu}`)
      const into = h.into ? { netns: h.into.host.netns, ifname: h.into.ifname } : undefined
      const sim = await dpu.sim.addHost({ name: h.name, mac: h.mac, ...(into ? { into } : {}) })
      if (!h.ipv6 && !into) await noIpv6(sim.netns)
      if (h.ipCidr) {
        await run('ip', ['-n', sim.netns, 'addr', 'add', h.ipCidr, 'dev', into?.ifname ?? 'eth0'])
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
      token: hydrazine.token,
      redisScheme: new URL(hydrazine.redisUrl).protocol,
      redis: { url: hydrazine.redisUrl, caFile: hydrazine.caFile, ...hydrazine.redisClient },
      centralsDir,
      dhcpServerIp: fabric.gatewayIp,
      dhcpLog: dhcp.log,
      api: hydrazine.api,
      central: hydrazine.central,
      addHost,
      configureDhcp: dhcp.configure,
      nbctl: async (group, ...args) => {
        const { nb } = await hydrazine.central(group)
        return run('ovn-nbctl', [`--db=${nb}`, '--timeout=10', ...args])
      },
      guardFabric: async (on) => {
        const table = `${prefix}guard`
        if (!on) return unguardFabric(table)
        undo(() => unguardFabric(table))
        const guarded = dpus.map((d) => ({ port: d.sim.fabricPort, encapIp: d.encapIp }))
        await guardFabric(table, fabric.bridge, guarded)
      },
      writeState,
      stop,
    }
  } catch (error) {
    await stop()
    throw error
  }
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
  await quietly(unguardFabric(`${prefix}guard`))
}
