/**
 * The DPU agent: converges its DPU's OVS to what `configure` / `isolate` jobs ask, runs
 * ovn-controller and the groups' DHCP relays, and reports what it observes.
 *
 * Every step re-reads the database and applies only the difference, so a job may run
 * twice, or be cut off at any line by a crash and run again, and leave one host port,
 * one relay port per group and one ovn-controller. What it throws is in `errors.ts`;
 * how it tells ovn-controller has installed or released a port, in `port-binding.ts`.
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
import type { AgentConfig } from './config.ts'
import { DhcpRelays, OvnController, type RelaySpec, relayUplinkPortName } from './daemons.ts'
import {
  NoHostPort,
  NoRelayUplink,
  PortNotInstalled,
  PortNotReleased,
  SouthboundConflict,
  WrongDpu,
} from './errors.ts'
import { Key, LocalOvs, type OwnedPort } from './ovs.ts'
import { portInstalled, southboundReleased, waitFor } from './port-binding.ts'

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

    const installed = await waitFor(() => portInstalled(this.ovs, hostPort), c.installTimeoutMs)
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

    const unbound = await waitFor(
      () =>
        southboundReleased({
          remote: snap.ovnRemote,
          logicalPort: job.host.logicalPort,
          systemId: c.systemId,
          log: this.log,
        }),
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
