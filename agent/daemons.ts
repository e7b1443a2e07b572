/**
 * The daemons the agent runs on its DPU: one `ovn-controller` and one `dhcrelay` per
 * group. Both are started with `startDaemon`, so they die with the agent; a restarted
 * agent first stops any survivor named by the pidfile, then starts its own, so that
 * there is never more than one of each.
 */
import { execFile } from 'node:child_process'
import { readFile, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { OvsdbClient } from '../lib/ovn/index.ts'
import { type Daemon, startDaemon } from '../lib/process/daemon.ts'
import { isAlive } from '../lib/process/pids.ts'
import { canConnect } from '../lib/process/ports.ts'

const exec = promisify(execFile)
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

export interface DaemonPlace {
  /** Directory for pid, log and control files. */
  readonly runDir: string
  /** OVS_RUNDIR of the local ovs-vswitchd (ovn-controller connects to br-int.mgmt there). */
  readonly ovsRunDir: string
  /** Network namespace to run in; absent = the agent's own. */
  readonly netns?: string
  readonly log: (line: string) => void
}

/** Stops a leftover daemon named by `pidFile` (from an agent that died), if any. */
export async function stopLeftover(pidFile: string, command: string): Promise<boolean> {
  const pid = Number((await readFile(pidFile, 'utf8').catch(() => '')).trim())
  if (!Number.isInteger(pid) || pid <= 0 || !isAlive(pid)) return false
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')
  if (!cmdline.includes(command)) return false
  process.kill(pid, 'SIGTERM')
  for (let i = 0; i < 50 && isAlive(pid); i++) await sleep(50)
  if (isAlive(pid)) process.kill(pid, 'SIGKILL')
  await rm(pidFile, { force: true })
  return true
}

/** PEM files of the DPU's TLS identity, as ovn-controller takes them. */
export interface TlsFiles {
  readonly cert: string
  readonly key: string
  readonly ca: string
}

/**
 * The single ovn-controller of this DPU. It follows `ovn-remote` changes live. With the
 * DPU's TLS files it runs with `--private-key`, `--certificate` and `--ca-cert`, so that
 * an `ssl:` remote sees the DPU's certificate (whose CN OVN RBAC takes as the chassis).
 */
export class OvnController {
  private daemon: Daemon | undefined
  private starting: Promise<Daemon> | undefined
  /** The certificate (PEM) in `tls.cert` when the running ovn-controller started. */
  private startedWith: string | undefined

  /**
   * @param certificate what `tls.cert` holds now: ovn-controller reads it only when it
   *   starts, so `stale` compares the two.
   */
  constructor(
    private readonly place: DaemonPlace,
    private readonly ovsDb: string,
    private readonly tls?: TlsFiles,
    private readonly certificate?: () => string,
  ) {}

  /** Running with another certificate (or CA) than `tls.cert` (or `tls.ca`) holds now. */
  get stale(): boolean {
    return this.running && this.startedWith !== this.certificate?.()
  }

  get pidFile(): string {
    return join(this.place.runDir, 'ovn-controller.pid')
  }

  /** ovn-controller has no `--unixctl`: its socket is `$OVN_RUNDIR/ovn-controller.<pid>.ctl`. */
  async controlSocket(): Promise<string | undefined> {
    const pid = Number((await readFile(this.pidFile, 'utf8').catch(() => '')).trim())
    if (!Number.isInteger(pid) || pid <= 0) return undefined
    return join(this.place.runDir, `ovn-controller.${pid}.ctl`)
  }

  get running(): boolean {
    return this.daemon?.running ?? false
  }

  /** Starts ovn-controller unless it runs already. */
  async ensure(): Promise<void> {
    if (this.daemon?.running) return
    this.starting ??= this.start().finally(() => {
      this.starting = undefined
    })
    this.daemon = await this.starting
  }

  private async start(): Promise<Daemon> {
    const { runDir, ovsRunDir, netns, log } = this.place
    if (await stopLeftover(this.pidFile, 'ovn-controller')) log('stopped a leftover ovn-controller')
    await rm(this.pidFile, { force: true })
    this.startedWith = this.certificate?.()
    const daemon = await startDaemon({
      name: 'ovn-controller',
      command: 'ovn-controller',
      args: [
        this.ovsDb,
        `--pidfile=${this.pidFile}`,
        `--log-file=${join(runDir, 'ovn-controller.log')}`,
        ...(this.tls
          ? [
              `--private-key=${this.tls.key}`,
              `--certificate=${this.tls.cert}`,
              `--ca-cert=${this.tls.ca}`,
            ]
          : []),
      ],
      env: { OVS_RUNDIR: ovsRunDir, OVN_RUNDIR: runDir, OVN_LOGDIR: runDir },
      ...(netns ? { netns } : {}),
      logFile: join(runDir, 'ovn-controller.out'),
      tailFiles: [join(runDir, 'ovn-controller.log')],
      ready: async () => {
        const ctl = await this.controlSocket()
        return ctl !== undefined && (await canConnect({ path: ctl }))
      },
    })
    log(`ovn-controller started (reaper pid ${daemon.pid})`)
    return daemon
  }

  /** True when ovn-controller says its Southbound connection is up (unixctl `connection-status`). */
  async connected(): Promise<boolean> {
    if (!this.running) return false
    const ctl = await this.controlSocket()
    if (!ctl) return false
    let client: OvsdbClient | undefined
    try {
      // unixctl speaks JSON-RPC too: the OVSDB client carries it.
      client = await OvsdbClient.connect(`unix:${ctl}`, {
        reconnect: false,
        echoIntervalMs: 0,
        connectTimeoutMs: 500,
        requestTimeoutMs: 1000,
      })
      return String(await client.request('connection-status', [])).trim() === 'connected'
    } catch {
      return false
    } finally {
      await client?.close()
    }
  }

  async stop(): Promise<void> {
    await this.daemon?.stop()
    this.daemon = undefined
  }
}

export interface RelaySpec {
  readonly group: string
  /** The relay's downstream interface; its name is the circuit id (`-a`). */
  readonly port: string
  readonly dhcpServer: string
  /** MAC of the relay's logical switch port, set on the downstream interface. */
  readonly mac: string
  /** The relay's address in the group's subnet, `ip/len` (absent: dhcrelay drops requests). */
  readonly address?: string
  /** The relay's fabric address, `ip/len`: its giaddr, where the server answers. */
  readonly uplinkAddress: string
  /**
   * The far end of the downstream veth, when it is not a port of br-int named `port` in
   * the DPU's namespace: a Fabric group's relay link `hzd<VNI>` in the group's VRF. The
   * relay's address is then the group's anycast gateway, which the VRF answers ARP for:
   * the relay never does.
   */
  readonly downstream?: { readonly name: string; readonly netns?: string | undefined }
}

interface RunningRelay {
  readonly spec: RelaySpec
  readonly daemon: Daemon
}

/** Name of the relay's uplink veth inside its namespace. */
export const RELAY_UPLINK = 'uplink'

/** The DPU-side end of a relay's uplink veth (a port of the uplink bridge). */
export function relayUplinkPortName(port: string): string {
  return `${port}u`
}

/**
 * One isc `dhcrelay` per group, each alone in its own network namespace on the DPU.
 *
 * dhcrelay listens on every interface of its namespace whatever `-i`/`-id` says, and
 * drops requests from an interface without an IPv4 address. So a relay's namespace
 * holds exactly two interfaces:
 *
 * - `port` (`hzr` + 8 hex, the circuit id): one end of a veth whose other end, of the
 *   same name, is a port of br-int bound (`iface-id`) to the group's relay LSP. It has
 *   the LSP's MAC and the relay's own address in the group's subnet, which the
 *   controller reserved in IPAM for this DPU;
 * - `uplink`: one end of a veth whose other end (`<port>u`) is a port of the uplink
 *   bridge, i.e. on the fabric, with a fabric address of this DPU (`--relay-uplink-ips`).
 *
 * dhcrelay runs with `-a` (option 82, circuit id = `port`) and `-U uplink` (RFC 3527):
 * giaddr is the uplink address, so the server answers a routable fabric address, and
 * the link selection sub-option carries the tenant address that picks the subnet.
 * Overlapping group subnets on one DPU never meet: each is in its own namespace, the
 * server tells them apart by circuit id, and each uplink address belongs to one relay.
 * Veths rather than OVS internal ports: with the userspace datapath an internal port
 * is a tap that ovs-vswitchd manages by name in its own namespace.
 */
export class DhcpRelays {
  private readonly relays = new Map<string, RunningRelay>()
  /** Per group, the end of the last start or stop asked for: one runs at a time. */
  private readonly busy = new Map<string, Promise<unknown>>()

  constructor(private readonly place: DaemonPlace) {}

  pidFile(port: string): string {
    return join(this.place.runDir, `dhcrelay-${port}.pid`)
  }

  /** The relay's network namespace: named for the DPU's, so lab DPUs do not meet. */
  namespaceOf(port: string): string {
    return `${this.place.netns ?? 'hz'}-${port}`
  }

  isRunning(group: string): boolean {
    return this.relays.get(group)?.daemon.running ?? false
  }

  list(): RelaySpec[] {
    return [...this.relays.values()].map((r) => r.spec)
  }

  private ip(args: readonly string[], netns = this.place.netns): Promise<unknown> {
    return exec('ip', [...(netns ? ['-n', netns] : []), ...args], { timeout: 10_000 }).catch(
      (err: unknown) => {
        const stderr = (err as { stderr?: string }).stderr ?? String(err)
        throw new Error(`ip ${args.join(' ')}: ${stderr.trim()}`)
      },
    )
  }

  private async linkExists(name: string, netns = this.place.netns): Promise<boolean> {
    return exec('ip', [...(netns ? ['-n', netns] : []), 'link', 'show', 'dev', name], {
      timeout: 10_000,
    }).then(
      () => true,
      () => false,
    )
  }

  /**
   * Makes the relay's namespace and both veths exist (before OVS is asked to add their
   * DPU-side ends to bridges). Idempotent: what exists is kept. True when a veth had to be
   * made (again): a relay running on the old one must be started again.
   */
  async plumb(spec: Pick<RelaySpec, 'port' | 'mac' | 'downstream'>): Promise<boolean> {
    let made = false
    const ns = this.namespaceOf(spec.port)
    const nsList = await exec('ip', ['netns', 'list'], { timeout: 10_000 })
    if (!nsList.stdout.split('\n').some((l) => l.split(' ')[0] === ns)) {
      await exec('ip', ['netns', 'add', ns], { timeout: 10_000 })
    }
    const inNs = (...args: string[]) => exec('ip', ['-n', ns, ...args], { timeout: 10_000 })
    await relayNamespaceGuards(ns)
    await inNs('link', 'set', 'lo', 'up')
    const down = spec.downstream ?? { name: spec.port, netns: this.place.netns }
    for (const [outside, outsideNs, inside] of [
      [down.name, down.netns, spec.port],
      [relayUplinkPortName(spec.port), this.place.netns, RELAY_UPLINK],
    ] as const) {
      const inOutside = (...args: string[]) => this.ip(args, outsideNs)
      const insideExists = () =>
        inNs('link', 'show', 'dev', inside).then(
          () => true,
          () => false,
        )
      for (let tries = 1; ; tries++) {
        if ((await this.linkExists(outside, outsideNs)) && (await insideExists())) break
        if (tries > 5) throw new Error(`relay veth ${outside} / ${ns} ${inside} could not be made`)
        made = true
        // A half-made pair: one end lost, or its namespace deleted a moment ago (the kernel
        // destroys the old namespace's veths after `ip netns del` returns, the outside end
        // last). Start again from nothing, a few times while the old pair goes.
        await inNs('link', 'del', inside).catch(() => undefined)
        await inOutside('link', 'del', outside).catch(() => undefined)
        const add = ['link', 'add', outside, 'type', 'veth', 'peer', 'name', inside, 'netns', ns]
        await inOutside(...add).catch(
          () => new Promise((resolve) => setTimeout(resolve, 100 * tries)),
        )
      }
      await inOutside('link', 'set', 'dev', outside, 'up')
      await inNs('link', 'set', 'dev', inside, 'up')
      // Checksum offload off on both ends: the userspace datapath does not complete them.
      await txOff(outside, outsideNs)
      await txOff(inside, ns)
    }
    await inNs('link', 'set', 'dev', spec.port, 'address', spec.mac)
    if (spec.downstream) {
      // Its address is the group's anycast gateway, answered by the VRF: never by the relay.
      await exec(
        'ip',
        ['netns', 'exec', ns, 'sysctl', '-qw', `net.ipv4.conf.${spec.port}.arp_ignore=8`],
        { timeout: 10_000 },
      )
    }
    return made
  }

  /**
   * Runs `work` once every start or stop of `group`'s relay asked for before it has ended:
   * two at once would each find no relay running and start one, and only one is known.
   */
  private serial<T>(group: string, work: () => Promise<T>): Promise<T> {
    const run = (this.busy.get(group) ?? Promise.resolve()).then(work, work)
    const settled = run.catch(() => undefined)
    this.busy.set(group, settled)
    void settled.then(() => {
      if (this.busy.get(group) === settled) this.busy.delete(group)
    })
    return run
  }

  /** Runs the group's relay with exactly `spec`, restarting it if it differs or died. */
  ensure(spec: RelaySpec): Promise<void> {
    return this.serial(spec.group, () => this.ensureNow(spec))
  }

  private async ensureNow(spec: RelaySpec): Promise<void> {
    const current = this.relays.get(spec.group)
    if (
      current?.daemon.running &&
      current.spec.port === spec.port &&
      current.spec.dhcpServer === spec.dhcpServer &&
      current.spec.address === spec.address &&
      current.spec.uplinkAddress === spec.uplinkAddress &&
      JSON.stringify(current.spec.downstream) === JSON.stringify(spec.downstream)
    ) {
      return
    }
    if (current) await this.stopNow(spec.group)
    await this.plumb(spec)
    const ns = this.namespaceOf(spec.port)
    const setAddress = async (dev: string, address: string | undefined) => {
      await exec('ip', ['-n', ns, 'addr', 'flush', 'dev', dev], { timeout: 10_000 })
      if (address) await exec('ip', ['-n', ns, 'addr', 'add', address, 'dev', dev])
    }
    await setAddress(spec.port, spec.address)
    await setAddress(RELAY_UPLINK, spec.uplinkAddress)
    const { runDir, log } = this.place
    const pidFile = this.pidFile(spec.port)
    if (await stopLeftover(pidFile, 'dhcrelay')) log(`stopped a leftover relay on ${spec.port}`)
    const daemon = await startDaemon({
      name: `dhcrelay(${spec.group})`,
      command: 'dhcrelay',
      args: [
        '-4',
        '-d',
        '-a',
        '-m',
        'replace',
        '-pf',
        pidFile,
        '-id',
        spec.port,
        '-iu',
        RELAY_UPLINK,
        '-U',
        RELAY_UPLINK,
        spec.dhcpServer,
      ],
      netns: ns,
      logFile: join(runDir, `dhcrelay-${spec.port}.out`),
      // dhcrelay exits at once on a bad interface; give it a moment to show that.
      ready: async () => {
        await sleep(300)
        return true
      },
    })
    if (!daemon.running) {
      const exit = await daemon.exited
      throw new Error(`dhcrelay for ${spec.group} exited: ${exit.logTail}`)
    }
    this.relays.set(spec.group, { spec, daemon })
    log(
      `dhcrelay for group ${spec.group} in ${ns}: ${spec.port} ${spec.address ?? '(no address)'}` +
        ` → ${spec.dhcpServer} from ${spec.uplinkAddress}`,
    )
  }

  /** Stops the group's relay (if this agent runs it). */
  stop(group: string): Promise<boolean> {
    return this.serial(group, () => this.stopNow(group))
  }

  private async stopNow(group: string): Promise<boolean> {
    const relay = this.relays.get(group)
    if (!relay) return false
    this.relays.delete(group)
    await relay.daemon.stop()
    return true
  }

  /** Removes the relay's namespace, and with it both veths. True when there was one. */
  async unplumb(port: string): Promise<boolean> {
    await stopLeftover(this.pidFile(port), 'dhcrelay')
    return exec('ip', ['netns', 'del', this.namespaceOf(port)], { timeout: 10_000 }).then(
      () => true,
      () => false,
    )
  }

  async stopAll(): Promise<void> {
    for (const group of [...this.relays.keys()]) await this.stop(group)
  }
}

/**
 * The relay's namespace routes nothing. A new namespace takes its IPv4 settings from the
 * DPU's own, and a DPU that forwards would make it a router between the fabric (uplink)
 * and the tenant's network (the relay port): a way in and out of the group past its NAT
 * and its hosts' access level. It answers ARP on each side for that side's address only
 * (not for its fabric address to the tenant, nor the other way), and has no IPv6 (no
 * SLAAC addresses from the group's or the fabric's router advertisements). Set on every
 * plumb: a namespace that exists is kept.
 */
async function relayNamespaceGuards(ns: string): Promise<void> {
  const off = [
    'net.ipv4.conf.all.forwarding=0',
    'net.ipv4.conf.default.forwarding=0',
    'net.ipv6.conf.all.forwarding=0',
    'net.ipv6.conf.default.forwarding=0',
    'net.ipv4.conf.all.arp_ignore=1',
    'net.ipv4.conf.all.arp_announce=2',
    'net.ipv6.conf.all.disable_ipv6=1',
    'net.ipv6.conf.default.disable_ipv6=1',
  ]
  await exec('ip', ['netns', 'exec', ns, 'sysctl', '-q', '-w', ...off], { timeout: 10_000 })
}

async function txOff(dev: string, netns: string | undefined): Promise<void> {
  const argv = ['-K', dev, 'tx', 'off']
  await exec(
    netns ? 'ip' : 'ethtool',
    netns ? ['netns', 'exec', netns, 'ethtool', ...argv] : argv,
    {
      timeout: 10_000,
    },
  ).catch(() => undefined)
}
