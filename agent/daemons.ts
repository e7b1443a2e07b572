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

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Stops a leftover daemon named by `pidFile` (from an agent that died), if any. */
export async function stopLeftover(pidFile: string, command: string): Promise<boolean> {
  const pid = Number((await readFile(pidFile, 'utf8').catch(() => '')).trim())
  if (!Number.isInteger(pid) || pid <= 0 || !alive(pid)) return false
  const cmdline = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')
  if (!cmdline.includes(command)) return false
  process.kill(pid, 'SIGTERM')
  for (let i = 0; i < 50 && alive(pid); i++) await sleep(50)
  if (alive(pid)) process.kill(pid, 'SIGKILL')
  await rm(pidFile, { force: true })
  return true
}

/** The single ovn-controller of this DPU. It follows `ovn-remote` changes live. */
export class OvnController {
  private daemon: Daemon | undefined
  private starting: Promise<Daemon> | undefined

  constructor(
    private readonly place: DaemonPlace,
    private readonly ovsDb: string,
  ) {}

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
    const daemon = await startDaemon({
      name: 'ovn-controller',
      command: 'ovn-controller',
      args: [
        this.ovsDb,
        `--pidfile=${this.pidFile}`,
        `--log-file=${join(runDir, 'ovn-controller.log')}`,
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
  /** Internal port the relay listens on; its name is the circuit id (`-a`). */
  readonly port: string
  readonly dhcpServer: string
}

interface RunningRelay {
  readonly spec: RelaySpec
  readonly daemon: Daemon
}

/**
 * One isc `dhcrelay` per group: `-a` adds the relay agent information option whose
 * circuit id is the receiving interface's name (the group's relay port), `-U` the
 * uplink (RFC 3527 link selection), so that giaddr is the uplink address rather than
 * a tenant address that may overlap across groups.
 */
export class DhcpRelays {
  private readonly relays = new Map<string, RunningRelay>()

  constructor(
    private readonly place: DaemonPlace,
    /** The uplink interface (with the fabric address) towards DHCP servers. */
    private readonly uplink: string,
  ) {}

  pidFile(port: string): string {
    return join(this.place.runDir, `dhcrelay-${port}.pid`)
  }

  isRunning(group: string): boolean {
    return this.relays.get(group)?.daemon.running ?? false
  }

  list(): RelaySpec[] {
    return [...this.relays.values()].map((r) => r.spec)
  }

  /**
   * Sets the relay's internal port administratively up (OVS creates it down), waiting
   * for ovs-vswitchd to have created it. One `ip link` call per relay start.
   */
  private async linkUp(port: string): Promise<void> {
    const { netns } = this.place
    const argv = [...(netns ? ['-n', netns] : []), 'link', 'set', 'dev', port, 'up']
    let last: unknown
    for (let i = 0; i < 50; i++) {
      try {
        await exec('ip', argv, { timeout: 5000 })
        return
      } catch (err) {
        last = err
        await sleep(100)
      }
    }
    throw new Error(
      `cannot set ${port} up: ${String((last as { stderr?: string }).stderr ?? last)}`,
    )
  }

  /** Runs the group's relay with exactly `spec`, restarting it if it differs or died. */
  async ensure(spec: RelaySpec): Promise<void> {
    const current = this.relays.get(spec.group)
    if (
      current?.daemon.running &&
      current.spec.port === spec.port &&
      current.spec.dhcpServer === spec.dhcpServer
    ) {
      return
    }
    if (current) await this.stop(spec.group)
    await this.linkUp(spec.port)
    const { runDir, netns, log } = this.place
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
        this.uplink,
        '-U',
        this.uplink,
        spec.dhcpServer,
      ],
      ...(netns ? { netns } : {}),
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
    log(`dhcrelay for group ${spec.group} on ${spec.port} → ${spec.dhcpServer}`)
  }

  async stop(group: string): Promise<boolean> {
    const relay = this.relays.get(group)
    if (!relay) return false
    this.relays.delete(group)
    await relay.daemon.stop()
    return true
  }

  async stopAll(): Promise<void> {
    for (const group of [...this.relays.keys()]) await this.stop(group)
  }
}
