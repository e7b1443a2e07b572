/**
 * The agent's Fabric side: `configure` and `isolate` of a Fabric group's host (protocol
 * 3). Configure builds the group's VRF (`vrf.ts`) if this DPU has none yet, puts the host
 * port in it with the group's gateway(s) and the host's /32 (/128), configures the VRF in
 * the DPU's FRR (`evpn.ts`) and acks once FRR holds the host's prefixes for EVPN. Isolate
 * deletes the host's routes (FRR withdraws them), waits until FRR no longer announces
 * them, takes the port out of the VRF, and removes the VRF when no port is left in it.
 *
 * A host port holds one host: a port in another VRF, or bound in OVS, is refused.
 */
import type {
  FabricConfigureAck,
  FabricConfigurePayload,
  FabricIsolateAck,
  FabricIsolatePayload,
  ObservedVrf,
} from '../lib/agent-protocol/index.ts'
import { type AgentConfig, hostPortOf } from './config.ts'
import { HostPortBound, PortNotInstalled, PortNotReleased, WrongDpu } from './errors.ts'
import { EvpnSpeaker, waitUntil } from './evpn.ts'
import { kernelVrfBackend, netnsVrfBackend, type VrfBackend, vrfNames } from './vrf.ts'

const prefixOf = (a: string) => `${a}/${a.includes(':') ? 128 : 32}`

export class FabricAgent {
  private prepared = false
  private readonly vtep: string
  /** The AS each VRF was configured in (to remove its instance). */
  private asn: number | undefined

  constructor(
    private readonly log: (line: string) => void,
    private readonly config: AgentConfig,
    readonly backend: VrfBackend,
    readonly speaker: EvpnSpeaker,
    /** Host ports OVS holds: a Fabric host may not take one. */
    private readonly boundInOvs: () => Promise<ReadonlySet<string>>,
  ) {
    this.vtep = config.vtepIp ?? config.fabricIps[0] ?? ''
  }

  static create(
    config: AgentConfig,
    boundInOvs: () => Promise<ReadonlySet<string>>,
    log: (line: string) => void,
  ): FabricAgent {
    const netnsDir = config.vrfNetnsDir ?? `${config.runDir}/vrfs`
    const backend =
      config.vrfBackend === 'netns'
        ? netnsVrfBackend({ underlay: config.netns, dir: netnsDir })
        : kernelVrfBackend()
    const speaker = new EvpnSpeaker(
      {
        dir: `${config.runDir}/evpn`,
        pathspace: `hz${config.dpuId}`.replace(/[^A-Za-z0-9]/g, '').slice(0, 30),
        netns: config.netns,
        netnsDir: config.vrfBackend === 'netns' ? netnsDir : undefined,
        vtep: config.vtepIp ?? config.fabricIps[0] ?? '',
        log,
      },
      config.evpnPeers ?? [],
    )
    return new FabricAgent(log, config, backend, speaker, boundInOvs)
  }

  async configure(job: FabricConfigurePayload): Promise<FabricConfigureAck> {
    const c = this.config
    if (job.dpuId !== c.dpuId) throw new WrongDpu(c.dpuId, job.dpuId)
    const port = hostPortOf(this.config, job.host)
    const { group, host } = job
    const { vrf } = vrfNames(group.vni)
    // Refused before anything changes: the port in another group's VRF, or OVS's.
    const vrfs = await this.backend.list()
    const elsewhere = vrfs.find((v) => v.vni !== group.vni && v.ports.includes(port))
    if (elsewhere) throw new HostPortBound(c.dpuId, port, `VRF ${elsewhere.vrf}`, host.name)
    if ((await this.boundInOvs()).has(port)) {
      throw new HostPortBound(c.dpuId, port, 'an Overlay host (OVS)', host.name)
    }
    if (!this.prepared) {
      await this.backend.prepare()
      this.prepared = true
    }
    await this.speaker.ensure(group.asn, this.vtep)
    this.asn = group.asn
    await this.backend.ensureVrf({ vni: group.vni, group: group.name, vtep: this.vtep })
    await this.speaker.addVrf({
      vni: group.vni,
      asn: group.asn,
      routeTarget: group.routeTarget,
      vtep: this.vtep,
    })
    await this.backend.attach({
      vni: group.vni,
      port,
      gateways: group.gateways,
      addresses: host.addresses,
      mtu: host.mtu,
    })
    const wanted = host.addresses.map(prefixOf)
    let announced: string[] = []
    const all = await waitUntil(async () => {
      announced = await this.speaker.announced(group.vni, group.routeTarget)
      return wanted.every((p) => announced.includes(p))
    }, c.installTimeoutMs)
    if (!all)
      throw new PortNotInstalled(
        c.dpuId,
        `${port} (${wanted.join(', ')} in ${vrf})`,
        c.installTimeoutMs,
      )
    return {
      dpuId: c.dpuId,
      specVersion: job.specVersion,
      protocolVersion: job.protocolVersion,
      hostPort: port,
      vrf,
      announced: wanted,
      chassis: c.systemId,
    }
  }

  async isolate(job: FabricIsolatePayload): Promise<FabricIsolateAck> {
    const c = this.config
    if (job.dpuId !== c.dpuId) throw new WrongDpu(c.dpuId, job.dpuId)
    const port = hostPortOf(this.config, job.host)
    const vni = job.group.vni
    const state = (await this.backend.list()).find((v) => v.vni === vni)
    if (state) {
      await this.backend.detach({ vni, port, gateways: [], addresses: job.host.addresses })
      const gone = job.host.addresses.map(prefixOf)
      const withdrawn = await waitUntil(async () => {
        const announced = await this.speaker.announced(vni)
        return !gone.some((p) => announced.includes(p))
      }, c.installTimeoutMs)
      if (!withdrawn) throw new PortNotReleased(c.dpuId, gone.join(', '), c.installTimeoutMs)
      const after = (await this.backend.list()).find((v) => v.vni === vni)
      if (after && after.ports.length === 0) {
        // The host is isolated already: what cannot be tidied is logged, not a failed job.
        if (this.asn !== undefined && this.speaker.running) {
          await this.speaker
            .removeVrf(vni, this.asn)
            .catch((error: unknown) => this.log(`FRR keeps VRF ${after.vrf}: ${String(error)}`))
        }
        await this.backend
          .removeVrf(vni)
          .catch((error: unknown) =>
            this.log(`VRF ${after.vrf} is empty but stays: ${String(error)}`),
          )
      }
    }
    return {
      dpuId: c.dpuId,
      specVersion: job.specVersion,
      protocolVersion: job.protocolVersion,
      hostPort: port,
      withdrawn: true,
      chassis: c.systemId,
    }
  }

  /** The VRFs on the DPU, their ports and what FRR announces from each. */
  async observe(): Promise<ObservedVrf[]> {
    const vrfs = await this.backend.list()
    const announced = await this.speaker.announcedIn(vrfs.map((v) => v.vni))
    return vrfs.map((v) => ({
      group: v.group,
      vrf: v.vrf,
      vni: v.vni,
      ports: [...v.ports],
      announced: announced.get(v.vni) ?? [],
    }))
  }

  async close(): Promise<void> {
    await this.speaker.stop()
  }
}
