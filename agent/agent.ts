/**
 * The DPU agent: converges its DPU's OVS to what `configure` / `isolate` jobs ask, runs
 * ovn-controller and the groups' DHCP relays, and reports what it observes.
 *
 * Every step re-reads the database and applies only the difference, so a job may run
 * twice, or be cut off at any line by a crash and run again, and leave one host port,
 * one relay port per group and one ovn-controller.
 */
import { mkdir } from 'node:fs/promises'
import {
  type ConfigureAck,
  type ConfigureRequest,
  type IsolateAck,
  type IsolateRequest,
  type ObservedState,
  relayPortName,
} from '../lib/agent-protocol/index.ts'
import { HydrazineError } from '../lib/errors.ts'
import { Database, OvsdbClient, type SbTables, sbSchema } from '../lib/ovn/index.ts'
import type { AgentConfig } from './config.ts'
import { DhcpRelays, OvnController, type RelaySpec, relayUplinkPortName } from './daemons.ts'
import { Key, LocalOvs, type OwnedPort } from './ovs.ts'

const SB = new Database<SbTables>(sbSchema)
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

/** ovn-controller did not mark the port installed in time; retrying may succeed. */
export class PortNotInstalled extends HydrazineError {
  constructor(
    readonly dpuId: string,
    readonly port: string,
    readonly timeoutMs: number,
  ) {
    super(
      'AGENT_PORT_NOT_INSTALLED',
      `DPU ${dpuId}: ovn-controller did not mark ${port} ovn-installed within ${timeoutMs} ms`,
      { retryable: true },
    )
  }
}

/** ovn-controller still binds the port on this chassis after it left br-int. */
export class PortNotReleased extends HydrazineError {
  constructor(
    readonly dpuId: string,
    readonly logicalPort: string,
    readonly timeoutMs: number,
  ) {
    super(
      'AGENT_PORT_NOT_RELEASED',
      `DPU ${dpuId}: the SB still binds ${logicalPort} to this chassis after ${timeoutMs} ms`,
      { retryable: true },
    )
  }
}

/** The job names no host port and the agent has no default. */
export class NoHostPort extends HydrazineError {
  constructor(
    readonly dpuId: string,
    readonly host: string,
  ) {
    super('AGENT_NO_HOST_PORT', `DPU ${dpuId}: no host port for ${host}`)
  }
}

/**
 * A DPU runs a single ovn-controller, so all its hosts must use the same Southbound.
 * Re-pointing it for one group would cut off another group's hosts on this DPU.
 */
export class SouthboundConflict extends HydrazineError {
  constructor(
    readonly dpuId: string,
    readonly wanted: string,
    readonly inUse: string,
    readonly byGroup: string,
  ) {
    super(
      'AGENT_SB_CONFLICT',
      `DPU ${dpuId}: group ${byGroup} uses southbound ${inUse} here; cannot also follow ${wanted}`,
    )
  }
}

/** Every relay uplink address of this DPU is in use (or none was configured). */
export class NoRelayUplink extends HydrazineError {
  constructor(
    readonly dpuId: string,
    readonly group: string,
    readonly configured: number,
  ) {
    super(
      'AGENT_NO_RELAY_UPLINK',
      `DPU ${dpuId}: no free relay uplink address for group ${group} ` +
        `(${configured} configured with --relay-uplink-ips)`,
    )
  }
}

/** The relay an agent-owned relay port describes (after a restart), if it is one. */
function relaySpecOf(p: OwnedPort): RelaySpec | undefined {
  const server = p.externalIds[Key.dhcpServer]
  const mac = p.externalIds[Key.relayMac]
  const uplinkAddress = p.externalIds[Key.relayUplink]
  if (p.role !== 'dhcp-relay' || !server || !mac || !uplinkAddress) return undefined
  const address = p.externalIds[Key.relayAddress]
  return {
    group: p.group,
    port: p.name,
    dhcpServer: server,
    mac,
    uplinkAddress,
    ...(address ? { address } : {}),
  }
}

/** The job is for another DPU: it was put on the wrong queue. */
export class WrongDpu extends HydrazineError {
  constructor(
    readonly dpuId: string,
    readonly jobDpu: string,
  ) {
    super('AGENT_WRONG_DPU', `job for DPU ${jobDpu} reached the agent of ${dpuId}`)
  }
}

export class Agent {
  private constructor(
    readonly config: AgentConfig,
    readonly ovs: LocalOvs,
    readonly ovnController: OvnController,
    readonly relays: DhcpRelays,
    private readonly log: (line: string) => void,
  ) {}

  /**
   * Connects to the local OVS database and brings back what it describes: if a
   * previous run configured the chassis, ovn-controller; each relay port's relay.
   */
  static async create(config: AgentConfig, log: (line: string) => void): Promise<Agent> {
    await mkdir(config.runDir, { recursive: true })
    const ovs = await LocalOvs.connect(config.ovsDb)
    const place = {
      runDir: config.runDir,
      ovsRunDir: config.ovsRunDir,
      log,
      ...(config.netns ? { netns: config.netns } : {}),
    }
    const agent = new Agent(
      config,
      ovs,
      new OvnController(place, config.ovsDb),
      new DhcpRelays(place),
      log,
    )
    try {
      await agent.resume()
    } catch (err) {
      await agent.close()
      throw err
    }
    return agent
  }

  private async resume(): Promise<void> {
    const snap = await this.ovs.snapshot()
    if (snap.ovnRemote && snap.systemId === this.config.systemId) await this.ovnController.ensure()
    for (const p of snap.owned) {
      const spec = relaySpecOf(p)
      if (spec) await this.relays.ensure(spec)
    }
  }

  async configure(job: ConfigureRequest): Promise<ConfigureAck> {
    const c = this.config
    if (job.dpuId !== c.dpuId) throw new WrongDpu(c.dpuId, job.dpuId)
    const hostPort = job.host.hostPort ?? c.defaultHostPort
    if (!hostPort) throw new NoHostPort(c.dpuId, job.host.name)
    const { group, host } = job

    const before = await this.ovs.snapshot()
    const other = before.owned.find(
      (p) =>
        p.role === 'host' &&
        p.group !== group.name &&
        p.name !== hostPort &&
        p.externalIds[Key.sbRemote] !== group.sbRemote,
    )
    if (other) {
      throw new SouthboundConflict(
        c.dpuId,
        group.sbRemote,
        other.externalIds[Key.sbRemote] ?? '?',
        other.group,
      )
    }

    await this.ovs.ensureBridges([
      { name: c.integrationBridge, datapathType: c.datapathType, failMode: 'secure' },
      {
        name: c.uplinkBridge,
        datapathType: c.datapathType,
        ports: c.uplinkInterface ? [c.uplinkInterface] : [],
      },
    ])
    await this.ovs.setChassisIds({
      'system-id': c.systemId,
      hostname: c.systemId,
      'ovn-remote': group.sbRemote,
      'ovn-encap-type': 'geneve',
      'ovn-encap-ip': c.fabricIps[0] ?? '',
      'ovn-bridge': c.integrationBridge,
      'ovn-bridge-mappings': c.bridgeMappings,
      'ovn-bridge-datapath-type': c.datapathType,
    })
    await this.ovnController.ensure()

    let relayPort: string | undefined
    if (group.relay && group.dhcpServer) {
      relayPort = relayPortName(group.name)
      const spec: RelaySpec = {
        group: group.name,
        port: relayPort,
        dhcpServer: group.dhcpServer,
        mac: group.relay.mac,
        ...(group.relay.ip
          ? { address: `${group.relay.ip}/${group.relay.prefixLength ?? 32}` }
          : {}),
        uplinkAddress: this.relayUplinkFor(group.name, before.owned),
      }
      // The veths first: OVS adds their DPU-side ends as system interfaces.
      await this.relays.plumb(spec)
      await this.ovs.ensurePort({
        bridge: c.integrationBridge,
        name: relayPort,
        type: '',
        externalIds: {
          [Key.role]: 'dhcp-relay',
          [Key.group]: group.name,
          [Key.ifaceId]: group.relay.logicalPort,
          [Key.dhcpServer]: group.dhcpServer,
          [Key.sbRemote]: group.sbRemote,
          [Key.relayMac]: spec.mac,
          [Key.relayAddress]: spec.address ?? '',
          [Key.relayUplink]: spec.uplinkAddress,
        },
      })
      await this.ovs.ensurePort({
        bridge: c.uplinkBridge,
        name: relayUplinkPortName(relayPort),
        type: '',
        externalIds: { [Key.role]: 'dhcp-relay-uplink', [Key.group]: group.name },
      })
      await this.relays.ensure(spec)
    }

    await this.ovs.ensurePort({
      bridge: c.integrationBridge,
      name: hostPort,
      type: '',
      ...(host.mtu ? { mtu: host.mtu } : {}),
      externalIds: {
        [Key.role]: 'host',
        [Key.group]: group.name,
        [Key.host]: host.name,
        [Key.ifaceId]: host.logicalPort,
        [Key.attachedMac]: host.mac,
        [Key.sbRemote]: group.sbRemote,
      },
    })

    const installed = await this.waitFor(
      async () => (await this.ownedPort(hostPort))?.ovnInstalled === true,
      c.installTimeoutMs,
    )
    if (!installed) throw new PortNotInstalled(c.dpuId, hostPort, c.installTimeoutMs)
    const observed = await this.observe()
    return {
      dpuId: c.dpuId,
      specVersion: job.specVersion,
      protocolVersion: job.protocolVersion,
      hostPort,
      ...(relayPort ? { relayPort } : {}),
      ovnInstalled: installed,
      chassis: observed.chassis,
      observed,
    }
  }

  async isolate(job: IsolateRequest): Promise<IsolateAck> {
    const c = this.config
    if (job.dpuId !== c.dpuId) throw new WrongDpu(c.dpuId, job.dpuId)
    const snap = await this.ovs.snapshot()
    const named = job.host.hostPort ?? c.defaultHostPort
    // The port named by the job, and any other port still bound to the logical port.
    const targets = snap.owned.filter(
      (p) => p.role === 'host' && (p.name === named || p.logicalPort === job.host.logicalPort),
    )
    for (const p of targets) await this.ovs.deletePort(p.name)

    let relayStopped: string | undefined
    const stillNeeded = snap.owned.some(
      (p) => p.role === 'host' && p.group === job.group.name && !targets.includes(p),
    )
    if (!stillNeeded) {
      const relayPort = relayPortName(job.group.name)
      const hadRelay = await this.relays.stop(job.group.name)
      const hadPort = await this.ovs.deletePort(relayPort)
      await this.ovs.deletePort(relayUplinkPortName(relayPort))
      const hadNamespace = await this.relays.unplumb(relayPort)
      if (hadRelay || hadPort || hadNamespace) relayStopped = relayPort
    }

    const unbound = await this.waitFor(
      () => this.southboundReleased(job.host.logicalPort, snap.ovnRemote),
      c.installTimeoutMs,
    )
    if (!unbound) throw new PortNotReleased(c.dpuId, job.host.logicalPort, c.installTimeoutMs)
    const observed = await this.observe()
    return {
      dpuId: c.dpuId,
      specVersion: job.specVersion,
      protocolVersion: job.protocolVersion,
      hostPort: targets[0]?.name ?? named,
      unbound,
      ...(relayStopped ? { relayStopped } : {}),
      chassis: observed.chassis,
      observed,
    }
  }

  /**
   * True when the SB `Port_Binding` of `logicalPort` is no longer on this chassis (or
   * the SB has no such port). An unreachable SB cannot hold a binding for us that
   * ovn-controller would act on, and the local port is gone already: that counts too.
   */
  private async southboundReleased(logicalPort: string, remote: string | null): Promise<boolean> {
    if (!remote) return true
    let client: OvsdbClient | undefined
    try {
      client = await OvsdbClient.connect(remote, {
        reconnect: false,
        connectTimeoutMs: 2000,
        echoIntervalMs: 0,
      })
      const [bindings, chassis] = await client.transact(SB.name, [
        SB.select('Port_Binding', [['logical_port', '==', logicalPort]], ['chassis']),
        SB.select('Chassis', [['name', '==', this.config.systemId]], ['_uuid']),
      ])
      const ours = SB.decodeRows('Chassis', chassis?.rows)[0]?._uuid
      const binding = SB.decodeRows('Port_Binding', bindings?.rows)[0]
      return !binding || binding.chassis === null || binding.chassis !== ours
    } catch (err) {
      this.log(`southbound ${remote} not reachable to confirm release: ${String(err)}`)
      return true
    } finally {
      await client?.close()
    }
  }

  /**
   * The fabric address of the group's relay uplink: the one it has, else the first of
   * `--relay-uplink-ips` no other group's relay holds.
   */
  private relayUplinkFor(group: string, owned: readonly OwnedPort[]): string {
    const relays = owned.filter((p) => p.role === 'dhcp-relay')
    const held = relays.find((p) => p.group === group)?.externalIds[Key.relayUplink]
    if (held && this.config.relayUplinkIps.includes(held)) return held
    const taken = new Set(relays.map((p) => p.externalIds[Key.relayUplink]))
    const free = this.config.relayUplinkIps.find((a) => !taken.has(a))
    if (!free) throw new NoRelayUplink(this.config.dpuId, group, this.config.relayUplinkIps.length)
    return free
  }

  private async ownedPort(name: string): Promise<OwnedPort | undefined> {
    return (await this.ovs.snapshot()).owned.find((p) => p.name === name)
  }

  private async waitFor(check: () => Promise<boolean>, timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs
    for (;;) {
      if (await check()) return true
      if (Date.now() > deadline) return false
      await sleep(200)
    }
  }

  /** What is on the DPU now: heartbeats, acks and gRPC `GetStatus` report this. */
  async observe(): Promise<ObservedState> {
    const snap = await this.ovs.snapshot()
    return {
      chassis: snap.systemId ?? this.config.systemId,
      bridges: [...snap.bridges],
      ovnRemote: snap.ovnRemote,
      ovnController: {
        running: this.ovnController.running,
        connected: await this.ovnController.connected(),
      },
      boundPorts: snap.owned
        .filter((p) => p.role === 'host')
        .map((p) => ({
          port: p.name,
          logicalPort: p.logicalPort,
          group: p.group,
          ovnInstalled: p.ovnInstalled,
        })),
      relays: snap.owned
        .filter((p) => p.role === 'dhcp-relay')
        .map((p) => ({
          group: p.group,
          port: p.name,
          dhcpServer: p.externalIds[Key.dhcpServer] ?? '',
          running: this.relays.isRunning(p.group),
        })),
    }
  }

  /** Stops the daemons and closes the database connection. */
  async close(): Promise<void> {
    await this.relays.stopAll()
    await this.ovnController.stop()
    await this.ovs.close()
  }
}
