/**
 * The agent's Fabric side: `configure` and `isolate` of a Fabric group's host (protocol
 * 3). Configure builds the group's VRF (`vrf.ts`) if this DPU has none yet, puts the host
 * port on its group interface `vlan<N>` with the group's gateway(s) and the host's /32
 * (/128), runs the group's DHCP relay there when the group has a DHCP server
 * (`fabric-relay.ts`), configures the VRF in the DPU's FRR (`evpn.ts`) and acks once FRR
 * holds the host's prefixes for EVPN. A leaking host's routes are marked for the fabric's
 * border and its source let out of the group (`vrf.ts`). Isolate deletes the host's
 * routes, its public IP's too (FRR withdraws them), waits until FRR no longer announces
 * them, takes the port out of the VRF, and removes the VRF (and its relay) when no port
 * is left in it.
 *
 * The DPU's FRR dies with the agent; the VRFs, their ports and host routes stay in the
 * kernel. A restarted agent (`resume`) starts FRR again and configures every VRF it finds
 * (the fabric's AS is kept in the OVS database, `FABRIC_ASN_KEY`), so that each host route
 * is announced again, and brings each group's relay back.
 *
 * A host port holds one host: a port in another VRF, or bound in OVS, is refused.
 */

import { isIPv4 } from 'node:net'
import type {
  FabricConfigureAck,
  FabricConfigurePayload,
  FabricIsolateAck,
  FabricIsolatePayload,
  ObservedVrf,
} from '../lib/agent-protocol/index.ts'
import { type AgentConfig, hostPortOf } from './config.ts'
import type { DhcpRelays } from './daemons.ts'
import { HostPortBound, PortNotInstalled, PortNotReleased, WrongDpu } from './errors.ts'
import { EvpnSpeaker, type EvpnVrf, waitUntil } from './evpn.ts'
import { ensureFabricRelay, fabricRelaySpecOf, removeFabricRelay } from './fabric-relay.ts'
import { type JobOrder, UNORDERED, watchLaterQueued } from './job-order.ts'
import type { LocalOvs } from './ovs.ts'
import {
  kernelVrfBackend,
  netnsVrfBackend,
  type VrfBackend,
  type VrfSpec,
  type VrfState,
  vrfNames,
} from './vrf.ts'

const prefixOf = (a: string) => `${a}/${a.includes(':') ? 128 : 32}`

/** What a VRF was made and configured from, with the FRR it was configured in. Pure. */
const vrfMadeAs = (spec: VrfSpec, evpn: EvpnVrf, frrGeneration: number) =>
  JSON.stringify([
    spec.vni,
    spec.vlan,
    spec.group,
    spec.vtep,
    evpn.asn,
    evpn.routeTarget,
    frrGeneration,
  ])

/** The Open_vSwitch row's key holding the fabric's AS the DPU's VRFs were configured in. */
export const FABRIC_ASN_KEY = 'hydrazine:fabric-asn'

export class FabricAgent {
  private prepared = false
  private readonly vtep: string
  /** The AS each VRF was configured in (to remove its instance). */
  private asn: number | undefined
  /**
   * Each VRF this agent made and configured in FRR, by VNI, as it made it (`vrfMadeAs`):
   * a host's configure makes it again only when that changed, the daemons were started
   * again, or the DPU no longer shows it as made. A VRF's ~17 programs and its vtysh run
   * cost more of the agent's CPU than the host's own steps; the first configure after a
   * restart of the agent makes each VRF again, whole.
   */
  private readonly vrfsMade = new Map<number, string>()

  constructor(
    private readonly log: (line: string) => void,
    readonly config: AgentConfig,
    readonly backend: VrfBackend,
    readonly speaker: EvpnSpeaker,
    /** The DPU's OVS: the host ports it holds (a Fabric host may not take one), relay uplinks. */
    readonly ovs: LocalOvs,
    /** The DPU's DHCP relays, Overlay and Fabric groups' alike. */
    readonly relays: DhcpRelays,
  ) {
    this.vtep = config.vtepIp ?? config.fabricIps[0] ?? ''
  }

  static create(
    config: AgentConfig,
    ovs: LocalOvs,
    relays: DhcpRelays,
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
    return new FabricAgent(log, config, backend, speaker, ovs, relays)
  }

  /** Host ports OVS holds bound: a Fabric host may not take one. */
  private async boundInOvs(): Promise<ReadonlySet<string>> {
    const { owned } = await this.ovs.snapshot()
    return new Set(owned.filter((p) => p.role === 'host').map((p) => p.name))
  }

  /**
   * After a restart: FRR again, every VRF the kernel still holds configured in it (its
   * host routes are then announced again), every Fabric relay running again. What cannot
   * be brought back is logged: the controller sees it missing and sends `configure` again.
   */
  async resume(): Promise<void> {
    const vrfs = await this.backend.list()
    const snap = await this.ovs.snapshot()
    const asn = Number(snap.chassisIds[FABRIC_ASN_KEY])
    if (vrfs.length > 0 && Number.isInteger(asn) && asn > 0) {
      await this.backend.prepare()
      this.prepared = true
      await this.speaker.ensure(asn, this.vtep)
      this.asn = asn
      for (const v of vrfs) {
        await this.speaker
          .addVrf({ vni: v.vni, asn, routeTarget: `${asn}:${v.vni}`, vtep: this.vtep })
          .then(() => this.log(`VRF ${v.vrf} of ${v.group} configured in FRR again`))
          .catch((error: unknown) => this.log(`VRF ${v.vrf} not restored: ${String(error)}`))
      }
      // Before the first heartbeat: a beat taken while FRR still learns the routes would
      // show them missing, and the controller would send each host's configure again.
      const announcedAgain = await waitUntil(async () => {
        const announced = await this.speaker.announcedIn(vrfs.map((v) => v.vni))
        return vrfs.every((v) => v.hostRoutes.every((r) => announced.get(v.vni)?.includes(r)))
      }, this.config.installTimeoutMs)
      if (!announcedAgain) this.log('not every host route was announced again in time')
    } else if (vrfs.length > 0) {
      this.log(
        `${vrfs.length} VRF(s) found, but no fabric AS recorded: not announced until configured`,
      )
    }
    for (const p of snap.owned) {
      const spec = fabricRelaySpecOf(p, (vni) => this.backend.namespaceOf(vni))
      if (!spec) continue
      await this.relays
        .ensure(spec)
        .catch((error: unknown) =>
          this.log(`relay of ${spec.group} not restored: ${String(error)}`),
        )
    }
  }

  async configure(
    job: FabricConfigurePayload,
    order: JobOrder = UNORDERED,
  ): Promise<FabricConfigureAck> {
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
    // Admitted: from here on this job changes the DPU (`job-order.ts`).
    await order.record()
    if (!this.prepared) {
      await this.backend.prepare()
      this.prepared = true
    }
    await this.speaker.ensure(group.asn, this.vtep)
    this.asn = group.asn
    await this.ovs.setChassisIds({ [FABRIC_ASN_KEY]: String(group.asn) })
    const spec = { vni: group.vni, vlan: group.vlan, group: group.name, vtep: this.vtep }
    const evpn = { vni: group.vni, asn: group.asn, routeTarget: group.routeTarget, vtep: this.vtep }
    const madeAs = vrfMadeAs(spec, evpn, this.speaker.generation)
    const shown = vrfs.find((v) => v.vni === group.vni)
    if (
      this.vrfsMade.get(group.vni) !== madeAs ||
      shown?.vlan !== group.vlan ||
      shown.group !== group.name
    ) {
      this.vrfsMade.delete(group.vni)
      await this.backend.ensureVrf(spec)
      await this.speaker.addVrf(evpn)
      this.vrfsMade.set(group.vni, madeAs)
    }
    await this.backend.attach({
      vni: group.vni,
      vlan: group.vlan,
      port,
      gateways: group.gateways,
      addresses: host.addresses,
      mtu: host.mtu,
      access: host.access,
      publicIp: host.publicIp,
    })
    const gateway4 = group.gateways.find((g) => isIPv4(g.address))?.address
    const relay =
      group.dhcpServer && gateway4
        ? await ensureFabricRelay(this, {
            group: group.name,
            vni: group.vni,
            vlan: group.vlan,
            dhcpServer: group.dhcpServer,
            gateway: gateway4,
          })
        : undefined
    // The group relays no DHCP (any more): a relay it had here goes.
    if (!relay) await removeFabricRelay(this, group.name)
    // A public IP the host no longer has (its access lowered): its route goes.
    const gone = host.withdrawPublicIp ? [host.withdrawPublicIp] : []
    if (gone.length > 0) {
      await this.backend.withdraw({ vni: group.vni, addresses: gone, vlan: group.vlan })
    }
    const wanted = [...host.addresses, ...(host.publicIp ? [host.publicIp] : [])].map(prefixOf)
    // Acked once FRR announces the host's routes. A job of this host sent later and queued
    // behind this one (its detach's isolate, or a configure with what changed since) ends
    // the wait: it redoes or undoes the host, and the DPU's other hosts do not wait out the
    // install timeout behind a FRR that does not announce.
    const later = watchLaterQueued(order)
    let all = false
    await waitUntil(async () => {
      const announced = await this.speaker.announced(group.vni, group.routeTarget)
      all =
        wanted.every((p) => announced.includes(p)) &&
        !gone.map(prefixOf).some((p) => announced.includes(p))
      return all || later.seen !== undefined
    }, c.installTimeoutMs).finally(() => later.stop())
    if (!all) {
      throw (
        later.seen ??
        new PortNotInstalled(
          c.dpuId,
          `${port} (${wanted.join(', ')} in ${vrf})`,
          c.installTimeoutMs,
        )
      )
    }
    return {
      dpuId: c.dpuId,
      specVersion: job.specVersion,
      protocolVersion: job.protocolVersion,
      hostPort: port,
      vrf,
      announced: wanted,
      ...(relay ? { relay } : {}),
      chassis: c.systemId,
    }
  }

  async isolate(job: FabricIsolatePayload, order: JobOrder = UNORDERED): Promise<FabricIsolateAck> {
    const c = this.config
    if (job.dpuId !== c.dpuId) throw new WrongDpu(c.dpuId, job.dpuId)
    const port = hostPortOf(this.config, job.host)
    await order.record()
    const vni = job.group.vni
    const state = (await this.backend.list()).find((v) => v.vni === vni)
    if (state) {
      // Only a port of this VRF leaves it; a port elsewhere (another host's, an empty VRF's
      // isolate naming any port) is left where it is, and only the routes named go.
      const addresses = [...job.host.addresses, ...(job.host.publicIp ? [job.host.publicIp] : [])]
      const vlan = state.vlan
      if (state.ports.includes(port)) {
        await this.backend.detach({ vni, port, addresses, vlan })
      } else await this.backend.withdraw({ vni, addresses, vlan })
      const gone = addresses.map(prefixOf)
      const withdrawn = await waitUntil(async () => {
        const announced = await this.speaker.announced(vni)
        return !gone.some((p) => announced.includes(p))
      }, c.installTimeoutMs)
      if (!withdrawn) throw new PortNotReleased(c.dpuId, gone.join(', '), c.installTimeoutMs)
      const after = (await this.backend.list()).find((v) => v.vni === vni)
      if (after && after.ports.length === 0) await this.removeEmptyVrf(after)
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

  /**
   * An empty VRF goes, with its relay: the host is isolated already, so what cannot be
   * tidied is logged, not a failed job.
   */
  private async removeEmptyVrf(vrf: VrfState): Promise<void> {
    this.vrfsMade.delete(vrf.vni)
    await removeFabricRelay(this, vrf.group).catch((error: unknown) =>
      this.log(`the relay of ${vrf.group} stays: ${String(error)}`),
    )
    if (this.asn !== undefined && this.speaker.running) {
      await this.speaker
        .removeVrf(vrf.vni, this.asn)
        .catch((error: unknown) => this.log(`FRR keeps VRF ${vrf.vrf}: ${String(error)}`))
    }
    await this.backend
      .removeVrf({ vni: vrf.vni, vlan: vrf.vlan })
      .catch((error: unknown) => this.log(`VRF ${vrf.vrf} is empty but stays: ${String(error)}`))
  }

  /** The VRFs on the DPU, their ports, what FRR announces from each, and their relays. */
  async observe(): Promise<ObservedVrf[]> {
    const vrfs = await this.backend.list()
    const announced = await this.speaker.announcedIn(vrfs.map((v) => v.vni))
    const relays = this.relays.list()
    return vrfs.map((v) => {
      const relay = relays.find((r) => r.group === v.group && r.downstream)
      return {
        group: v.group,
        vrf: v.vrf,
        vni: v.vni,
        ports: [...v.ports],
        announced: announced.get(v.vni) ?? [],
        ...(relay
          ? {
              relay: {
                circuitId: relay.port,
                dhcpServer: relay.dhcpServer,
                running: this.relays.isRunning(v.group),
              },
            }
          : {}),
      }
    })
  }

  async close(): Promise<void> {
    await this.speaker.close()
  }
}
