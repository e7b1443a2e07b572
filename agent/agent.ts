/**
 * The DPU agent: converges its DPU's OVS to what `configure` / `isolate` jobs ask, runs
 * ovn-controller and the groups' DHCP relays, and reports what it observes.
 *
 * Every step re-reads the database and applies only the difference, so a job may run
 * twice, or be cut off at any line by a crash and run again, and leave one host port,
 * one relay port per group and one ovn-controller. What it throws is in `errors.ts`;
 * how it tells ovn-controller has installed or released a port, in `port-binding.ts`;
 * the ports of a group's DHCP relay, in `relay-ports.ts`.
 */
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import type {
  AgentJob,
  ConfigureAck,
  ConfigureRequest,
  FabricConfigureAck,
  FabricConfigurePayload,
  FabricIsolateAck,
  FabricIsolatePayload,
  IsolateAck,
  IsolateRequest,
  ObservedState,
} from '../lib/agent-protocol/index.ts'
import { type AgentConfig, hostPortOf } from './config.ts'
import { DhcpRelays, OvnController } from './daemons.ts'
import {
  FabricNotConfigured,
  GeneveIpsecNeedsTls,
  HostPortBound,
  HostPortNotOurs,
  PortNotInstalled,
  PortNotReleased,
  RelayPortConflict,
  SouthboundConflict,
  SouthboundNeedsTls,
  WrongDpu,
} from './errors.ts'
import { FabricAgent } from './fabric.ts'
import { GeneveIpsec } from './geneve-ipsec.ts'
import {
  admitJob,
  type JobOrder,
  type QueuedJobs,
  UNORDERED,
  watchLaterQueued,
} from './job-order.ts'
import {
  claimOf,
  Key,
  LocalOvs,
  type OvsSnapshot,
  type OwnedPort,
  type PortSpec,
  releasingKey,
  SB_CA_KEY,
  SB_CERTIFICATE_KEY,
  sbCaKeyOf,
  sbCertificateKeyOf,
} from './ovs.ts'
import {
  parseRemotes,
  releasedEverywhere,
  southboundsToAsk,
  waitFor,
  waitInstalled,
} from './port-binding.ts'
import { type Claim, claimPort, granted, type Refusal } from './port-claims.ts'
import { relayPlan, relaySpecOf, removeRelay } from './relay-ports.ts'
import { type AgentTls, SouthboundCertificate } from './tls.ts'

/**
 * The Open_vSwitch key telling a starting ovn-controller how long to keep the flows it
 * finds before clearing them (OVN's `ovn-ofctrl-wait-before-clear`), and how long a
 * restart for a new Southbound certificate sets: time to reconnect to the SB and compute
 * the flows again (a DPU's few hosts take well under a second).
 */
const WAIT_BEFORE_CLEAR = 'ovn-ofctrl-wait-before-clear'
const RESTART_WAIT_BEFORE_CLEAR_MS = 3000
/** Whether the DPU has a host port: ovn-controller's flows carry some host's traffic. */
const servesHosts = (snap: Pick<OvsSnapshot, 'owned'>) => snap.owned.some((p) => p.role === 'host')

/** Who holds a port the agent may not take, in words for an error. */
function holderOf(claim: Refusal): string {
  const { existing } = claim
  switch (claim.verdict) {
    case 'other-bridge':
      return `a port of ${existing.bridge ?? 'no bridge'}`
    case 'not-ours':
      return `a port of ${existing.bridge ?? 'no bridge'} with role ${existing.role ?? '(none)'}`
    case 'other-owner':
      return `${claim.key}=${claim.holder}`
  }
}

export class Agent {
  private constructor(
    readonly config: AgentConfig,
    readonly ovs: LocalOvs,
    readonly ovnController: OvnController,
    readonly relays: DhcpRelays,
    private readonly log: (line: string) => void,
    /** What it presents to `ssl:` Southbounds, when it has a TLS identity. */
    private readonly sbCertificate: SouthboundCertificate | undefined,
    /** Fabric groups' VRFs and the DPU's FRR, when it has EVPN peers (`fabric.ts`). */
    readonly fabric?: FabricAgent,
    /** OVS's IPsec PKI for the Geneve tunnels, when it has a TLS identity. */
    private readonly ipsec?: GeneveIpsec,
  ) {}

  /** The DPU's queue, read for jobs queued behind the one under way (`queued-jobs.ts`). */
  private queued: QueuedJobs | undefined

  /** Reads `queued` for jobs that end a configure's wait (the runtime's queue). */
  watchQueue(queued: QueuedJobs): void {
    this.queued = queued
  }

  /**
   * Connects to the local OVS database and brings back what it describes: if a
   * previous run configured the chassis, ovn-controller; each relay port's relay; the
   * Fabric groups' VRFs in the DPU's FRR (`FabricAgent.resume`).
   * `tls` is the DPU's identity (`loadAgentTls`), for `ssl:` Southbound remotes.
   */
  static async create(
    config: AgentConfig,
    log: (line: string) => void,
    tls?: AgentTls,
  ): Promise<Agent> {
    await mkdir(config.runDir, { recursive: true })
    const ovs = await LocalOvs.connect(config.ovsDb, config.integrationBridge)
    const place = {
      runDir: config.runDir,
      ovsRunDir: config.ovsRunDir,
      log,
      ...(config.netns ? { netns: config.netns } : {}),
    }
    const { chassisIds } = await ovs.snapshot()
    const relays = new DhcpRelays(place)
    const sbCertificate = tls
      ? await SouthboundCertificate.open(
          tls,
          config.runDir,
          chassisIds[SB_CERTIFICATE_KEY],
          chassisIds[SB_CA_KEY],
        )
      : undefined
    const agent = new Agent(
      config,
      ovs,
      tls && sbCertificate
        ? new OvnController(
            place,
            config.ovsDb,
            { key: sbCertificate.keyFile, cert: sbCertificate.file, ca: sbCertificate.caFile },
            () => `${sbCertificate.current}${sbCertificate.currentCa}`,
          )
        : new OvnController(place, config.ovsDb),
      relays,
      log,
      sbCertificate,
      (config.evpnPeers?.length ?? 0) > 0
        ? FabricAgent.create(config, ovs, relays, log)
        : undefined,
      tls && sbCertificate
        ? new GeneveIpsec(join(config.runDir, 'ipsec'), tls, sbCertificate.keyFile)
        : undefined,
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
    // Fabric groups' VRFs announced again: what fails is logged, and the controller, seeing
    // it missing from the heartbeat, sends `configure` again.
    await this.fabric
      ?.resume()
      .catch((error: unknown) => this.log(`Fabric VRFs not resumed: ${String(error)}`))
  }

  /**
   * Runs one job of this DPU's queue, sent by the controller at `sentAt` (BullMQ's
   * `timestamp`): a `configure` sent before a later job of the same binding that already
   * ran here is refused, `JobSuperseded`, touching nothing (`job-order.ts`).
   */
  async run(
    job: AgentJob,
    sentAt?: number,
  ): Promise<ConfigureAck | IsolateAck | FabricConfigureAck | FabricIsolateAck> {
    const { dpuId } = this.config
    if (job.payload.dpuId !== dpuId) throw new WrongDpu(dpuId, job.payload.dpuId)
    const order = await admitJob(this.ovs, dpuId, job, sentAt, this.queued)
    switch (job.name) {
      case 'configure':
        return this.configure(job.payload, order)
      case 'isolate':
        return this.isolate(job.payload, order)
      case 'fabric-configure':
        return this.configureFabric(job.payload, order)
      case 'fabric-isolate':
        return this.isolateFabric(job.payload, order)
    }
  }

  /**
   * Binds the job's host on this DPU: bridges, chassis settings, ovn-controller, the
   * group's relay, the host port; then waits until ovn-controller installed the port.
   *
   * Every refusal is decided from one read of the database before anything is written,
   * so a refused job leaves the DPU as it was: a host port that is not on `--host-ports`,
   * that exists and is not a Hydrazine host port (a port of another bridge, or one
   * someone else made), or that is bound to another host's logical port; a relay port
   * name another group or anything else holds. A host port is never rebound in place:
   * the old host's `isolate` removes it, then `configure` binds the new one.
   */
  async configure(job: ConfigureRequest, order: JobOrder = UNORDERED): Promise<ConfigureAck> {
    const c = this.config
    if (job.dpuId !== c.dpuId) throw new WrongDpu(c.dpuId, job.dpuId)
    const hostPort = hostPortOf(this.config, job.host)
    const { group, host } = job
    if (group.sbRemote.startsWith('ssl:') && !this.sbCertificate) {
      throw new SouthboundNeedsTls(c.dpuId, group.sbRemote)
    }
    const geneveIpsec = group.geneveIpsec === true
    if (geneveIpsec && !(this.ipsec && this.sbCertificate)) throw new GeneveIpsecNeedsTls(c.dpuId)

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
    const hostSpec: PortSpec = {
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
      owner: [Key.ifaceId],
    }
    this.mustClaimHostPort(claimPort(before.ports.get(hostPort), claimOf(hostSpec)), job)
    const inVrf = (await this.fabric?.backend.list())?.find((v) => v.ports.includes(hostPort))
    if (inVrf) throw new HostPortBound(c.dpuId, hostPort, `VRF ${inVrf.vrf}`, host.logicalPort)
    const relay = relayPlan(c, job, before)
    if (relay) {
      for (const spec of [relay.port, relay.uplink]) {
        this.mustClaimRelayPort(claimPort(before.ports.get(spec.name), claimOf(spec)), spec, job)
      }
    }

    // The group's SB may admit only its own chassis: this is the certificate it takes
    // (refused, changing nothing, when it is not this DPU's).
    await this.sbCertificate?.use(group.sbCertificate, group.sbCa)
    const presented = this.presentedIds(group.sbRemote)

    await this.ovs.ensureBridges([
      { name: c.integrationBridge, datapathType: c.datapathType, failMode: 'secure' },
      {
        name: c.uplinkBridge,
        datapathType: c.datapathType,
        ports: c.uplinkInterface ? [c.uplinkInterface] : [],
      },
    ])
    // Admitted: from here on this job changes what the DPU does for its host
    // (`job-order.ts`; noted on the integration bridge, made just now if it was not there).
    await order.record()
    await this.ovs.setChassisIds({
      'system-id': c.systemId,
      hostname: c.systemId,
      'ovn-remote': group.sbRemote,
      'ovn-encap-type': 'geneve',
      'ovn-encap-ip': c.fabricIps[0] ?? '',
      'ovn-bridge': c.integrationBridge,
      'ovn-bridge-mappings': c.bridgeMappings,
      'ovn-bridge-datapath-type': c.datapathType,
      // The group's SB whole: no port is marked installed before its datapaths' flows.
      'ovn-monitor-all': c.ovnMonitorAll,
      ...presented,
    })
    // IPsec on the tunnels: OVS gets the certificate that authenticates this chassis to its
    // group's other chassis (before ovn-controller names them on the tunnel ports).
    if (geneveIpsec && this.ipsec && this.sbCertificate) {
      const { current, currentCa } = this.sbCertificate
      await this.ipsec.use(this.ovs, { cert: current, ca: currentCa })
    } else await this.ipsec?.stop(this.ovs)
    // ovn-controller reads its certificate and CA when it starts: new ones need a new start
    // (also when an earlier try of this job wrote it and failed before restarting). Told
    // to wait before it clears the flows it finds, the restarted one keeps the hosts'
    // traffic flowing until it has computed its own from the SB (a renewed or rotated
    // chassis certificate costs no traffic); a first start, or a restart with no host port
    // here (the group's first host on this DPU since the others left), has no flows to keep
    // and does not wait.
    await this.startOvnController(servesHosts(before))

    if (relay) {
      // The group's relay under another name (the controller allocated a new one, or an
      // older controller's hashed name): removed before the new one is made.
      await removeRelay(this, group.name, before.owned, relay.spec.port)
      // The veths first: OVS adds their DPU-side ends as system interfaces.
      await this.relays.plumb(relay.spec)
      this.mustClaimRelayPort(await this.ovs.ensurePort(relay.port), relay.port, job)
      this.mustClaimRelayPort(await this.ovs.ensurePort(relay.uplink), relay.uplink, job)
      await this.relays.ensure(relay.spec)
    } else {
      // The group relays no DHCP (any more): a relay it had here goes.
      await removeRelay(this, group.name, before.owned)
    }

    this.mustClaimHostPort(await this.ovs.ensurePort(hostSpec), job)
    // Bound again: an isolate of this logical port that was still waiting is over.
    await this.ovs.removeNotes([releasingKey(host.logicalPort)])

    // Acked only once ovn-controller says the port's flows are in: Ready never comes
    // before the host's traffic flows.
    // A job of this host sent later and queued behind this one (new credentials after its
    // group's CA was replaced, or its detach) ends the wait: it redoes or undoes the host.
    const later = watchLaterQueued(order)
    const installed = await waitInstalled(
      this.ovs,
      hostPort,
      host.logicalPort,
      c.installTimeoutMs,
      later.found,
    ).finally(() => later.stop())
    if (!installed) throw later.seen ?? new PortNotInstalled(c.dpuId, hostPort, c.installTimeoutMs)
    const observed = await this.observe()
    return {
      dpuId: c.dpuId,
      specVersion: job.specVersion,
      protocolVersion: job.protocolVersion,
      hostPort,
      ...(relay ? { relayPort: relay.spec.port } : {}),
      ovnInstalled: installed,
      ...(geneveIpsec ? { geneveIpsec: (await this.ipsec?.inUse(this.ovs)) === true } : {}),
      chassis: observed.chassis,
      observed,
    }
  }

  /**
   * Starts ovn-controller, or restarts it when its certificate or CA changed since it
   * started (it reads them only then). A restart while the DPU serves hosts (`hostsServed`:
   * it has host ports) is told to keep the flows it finds until it computed its own, so that
   * their traffic goes on; one with none to serve (a group's first host here since its
   * earlier ones left) has nothing to keep, and waiting would only hold the new host's
   * flows back by `RESTART_WAIT_BEFORE_CLEAR_MS`.
   */
  private async startOvnController(hostsServed: boolean): Promise<void> {
    if (this.ovnController.stale) {
      if (hostsServed) {
        this.log('southbound certificate changed: restarting ovn-controller, keeping its flows')
        await this.ovs.setChassisIds({ [WAIT_BEFORE_CLEAR]: String(RESTART_WAIT_BEFORE_CLEAR_MS) })
      } else {
        this.log('southbound certificate changed: restarting ovn-controller (no host to keep)')
        await this.ovs.removeChassisIds([WAIT_BEFORE_CLEAR])
      }
      await this.ovnController.stop()
    } else if (!this.ovnController.running) {
      await this.ovs.removeChassisIds([WAIT_BEFORE_CLEAR])
    }
    await this.ovnController.ensure()
  }

  /**
   * Takes a renewed identity (`loadAgentTls` checked it; the caller runs no job meanwhile):
   * the Southbound is shown it where the identity itself was presented, and ovn-controller
   * restarts with it, keeping its flows, when what it reads changed. A chassis certificate
   * for the earlier key stays in use, with that key, until `configure` brings one for the
   * new key (the controller certifies it once the heartbeat presents it).
   */
  async useIdentity(tls: AgentTls): Promise<void> {
    if (!this.sbCertificate || !(await this.sbCertificate.adopt(tls))) return
    const snap = await this.ovs.snapshot()
    await this.ovs.setChassisIds(this.presentedIds(snap.ovnRemote))
    // OVS's IPsec reads the same key file: its certificate follows.
    if (this.ipsec && (await this.ipsec.inUse(this.ovs))) {
      const { current, currentCa } = this.sbCertificate
      await this.ipsec.use(this.ovs, { cert: current, ca: currentCa })
    }
    if (this.ovnController.running && this.ovnController.stale) {
      await this.startOvnController(servesHosts(snap))
    }
  }

  /**
   * An `isolate` carrying the group's current SB credentials (`group.sbCertificate`,
   * `group.sbCa`), its host bound through the SB ovn-controller follows: the DPU presents
   * them from now on, as a `configure` would have it, and ovn-controller restarts with them
   * when they changed (the group's chassis CA was replaced since its last `configure`), so
   * that it can reach the SB again and release the host's port there. A retry whose ports
   * an earlier attempt removed counts the SBs that attempt remembered for the port (its
   * payload may bring credentials renewed since). Returns the remote they are for, or
   * undefined when nothing was taken.
   */
  private async takeIsolateCredentials(
    job: IsolateRequest,
    snap: OvsSnapshot,
    targets: readonly OwnedPort[],
  ): Promise<string | undefined> {
    const { sbCertificate: pem, sbCa } = job.group
    const remote = snap.ovnRemote
    if (!this.sbCertificate || pem === undefined || !remote) return undefined
    const boundThrough = targets.some((p) => p.externalIds[Key.sbRemote] === remote)
    const releasing = parseRemotes(snap.notes[releasingKey(job.host.logicalPort)])
    if (!boundThrough && !releasing.includes(remote)) return undefined
    await this.sbCertificate.use(pem, sbCa)
    await this.ovs.setChassisIds(this.presentedIds(remote))
    if (this.ovnController.running && this.ovnController.stale) {
      await this.startOvnController(servesHosts(snap))
    }
    return remote
  }

  /**
   * What the OVS database keeps of the certificate and CA presented to the SB: the current
   * ones, and the same under `remote` (the SB they are for, when one is followed). Nothing
   * without a TLS identity.
   */
  private presentedIds(remote: string | null | undefined): Record<string, string> {
    if (!this.sbCertificate) return {}
    const { current, currentCa } = this.sbCertificate
    return {
      [SB_CERTIFICATE_KEY]: current,
      [SB_CA_KEY]: currentCa,
      ...(remote ? { [sbCertificateKeyOf(remote)]: current, [sbCaKeyOf(remote)]: currentCa } : {}),
    }
  }

  private mustClaimHostPort(claim: Claim, job: ConfigureRequest): void {
    if (granted(claim)) return
    const { dpuId } = this.config
    if (claim.verdict === 'other-owner') {
      throw new HostPortBound(dpuId, claim.existing.name, claim.holder, job.host.logicalPort)
    }
    throw new HostPortNotOurs(dpuId, claim.existing.name, claim.existing.bridge)
  }

  private mustClaimRelayPort(claim: Claim, spec: PortSpec, job: ConfigureRequest): void {
    if (granted(claim)) return
    throw new RelayPortConflict(this.config.dpuId, spec.name, job.group.name, holderOf(claim))
  }

  /**
   * Unbinds the job's host from this DPU: removes every host port bound to its logical
   * port, the group's relay when no other host of the group is left here, then waits
   * until every Southbound it may be bound in — the one each removed port was bound
   * through, and the one ovn-controller follows — shows the logical port released from
   * this chassis. The ack says `unbound` only then: an SB that could not be asked fails
   * the job, retryably (`AGENT_PORT_NOT_RELEASED`). With no SB at all (the DPU was never
   * configured) nothing can be bound.
   *
   * A port not on `--host-ports` fails the job and touches nothing. The named port is
   * removed only when it is bound to this job's logical port: another host's binding is
   * not this job's to undo.
   */
  async isolate(job: IsolateRequest, order: JobOrder = UNORDERED): Promise<IsolateAck> {
    const c = this.config
    if (job.dpuId !== c.dpuId) throw new WrongDpu(c.dpuId, job.dpuId)
    const named = hostPortOf(this.config, job.host)
    await order.record()
    const snap = await this.ovs.snapshot()
    const targets = snap.owned.filter(
      (p) => p.role === 'host' && p.logicalPort === job.host.logicalPort,
    )
    const held = snap.owned.find(
      (p) => p.role === 'host' && p.name === named && p.logicalPort !== job.host.logicalPort,
    )
    if (held) {
      this.log(`isolate ${job.host.logicalPort}: ${named} is bound to ${held.logicalPort}, kept`)
    }
    // Before the ports go: which SBs must say the port is released (a retry asks them too).
    const remotes = await southboundsToAsk(this.ovs, snap, targets, job.host.logicalPort)
    // Before the ports go: the credentials the job brings, for ovn-controller to release them.
    const renewed = await this.takeIsolateCredentials(job, snap, targets)
    for (const p of targets) if (p.bridge) await this.ovs.deletePort(p.name, p.bridge)

    let relayStopped: string | undefined
    const stillNeeded = snap.owned.some(
      (p) => p.role === 'host' && p.group === job.group.name && !targets.includes(p),
    )
    if (!stillNeeded) relayStopped = await removeRelay(this, job.group.name, snap.owned)

    const told = new Set<string>()
    // What to present to each SB, decided once, not on every poll: the certificate last
    // presented there, else the current one.
    const { sbCertificate } = this
    const tlsOf = new Map(
      remotes.map((r) => [
        r,
        r === renewed
          ? sbCertificate?.ovsdbTls()
          : sbCertificate?.ovsdbTls(
              snap.chassisIds[sbCertificateKeyOf(r)],
              snap.chassisIds[sbCaKeyOf(r)],
            ),
      ]),
    )
    const unbound = await waitFor(
      () =>
        releasedEverywhere({
          remotes,
          logicalPort: job.host.logicalPort,
          systemId: c.systemId,
          ...(sbCertificate
            ? { tls: (remote: string) => tlsOf.get(remote) ?? sbCertificate.ovsdbTls() }
            : {}),
          // Once per job and SB, not once per poll.
          log: (remote, line) => {
            if (!told.has(remote)) this.log(line)
            told.add(remote)
          },
        }),
      c.installTimeoutMs,
    )
    if (!unbound) throw new PortNotReleased(c.dpuId, job.host.logicalPort, c.installTimeoutMs)
    await this.ovs.removeNotes([releasingKey(job.host.logicalPort)])
    await this.forgetSouthboundCertificates()
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
   * Forgets the certificates kept for SBs nothing may still ask: not the one ovn-controller
   * follows, none a port is bound through, none an isolate still waits on.
   */
  private async forgetSouthboundCertificates(): Promise<void> {
    const snap = await this.ovs.snapshot()
    const inUse = new Set<string>([snap.ovnRemote ?? ''])
    for (const p of snap.owned) inUse.add(p.externalIds[Key.sbRemote] ?? '')
    for (const [key, value] of Object.entries(snap.notes)) {
      if (key.startsWith(releasingKey(''))) for (const r of parseRemotes(value)) inUse.add(r)
    }
    const prefixes = [sbCertificateKeyOf(''), sbCaKeyOf('')]
    const stale = Object.keys(snap.chassisIds).filter((key) =>
      prefixes.some((prefix) => key.startsWith(prefix) && !inUse.has(key.slice(prefix.length))),
    )
    if (stale.length > 0) await this.ovs.removeChassisIds(stale)
  }

  /** `configure` of a Fabric group's host (protocol 3): its port in the group's VRF. */
  async configureFabric(
    job: FabricConfigurePayload,
    order: JobOrder = UNORDERED,
  ): Promise<FabricConfigureAck> {
    if (!this.fabric) throw new FabricNotConfigured(this.config.dpuId)
    return this.fabric.configure(job, order)
  }

  /** `isolate` of a Fabric group's host: its routes withdrawn, its port out of the VRF. */
  async isolateFabric(
    job: FabricIsolatePayload,
    order: JobOrder = UNORDERED,
  ): Promise<FabricIsolateAck> {
    if (!this.fabric) throw new FabricNotConfigured(this.config.dpuId)
    return this.fabric.isolate(job, order)
  }

  /** What is on the DPU now: heartbeats, acks and gRPC `GetStatus` report this. */
  async observe(): Promise<ObservedState> {
    // Asked side by side: a busy ovn-controller answers its control socket late, and the
    // configure ack waits for both.
    const [snap, connected, vrfs] = await Promise.all([
      this.ovs.snapshot(),
      this.ovnController.connected(),
      this.fabric?.observe(),
    ])
    return {
      chassis: snap.systemId ?? this.config.systemId,
      bridges: [...snap.bridges],
      ovnRemote: snap.ovnRemote,
      ovnController: {
        running: this.ovnController.running,
        connected,
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
      ...(vrfs ? { vrfs } : {}),
    }
  }

  /** Stops the daemons and closes the database connection. */
  async close(): Promise<void> {
    await this.relays.stopAll()
    await this.fabric?.close()
    await this.ovnController.stop()
    await this.ovs.close()
  }
}
