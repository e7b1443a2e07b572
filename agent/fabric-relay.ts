/**
 * A Fabric group's DHCP relay on this DPU: the same isc `dhcrelay` in a namespace of its own
 * as an Overlay group's (`daemons.ts`), hung off the group's interface `vlan<N>` in its VRF
 * instead of br-int. Its downstream interface is named `vlan<N>`, so option 82 carries the
 * circuit id `vlan<N>` Carbide reads; the other end of that veth (`hzd<VNI>`) is a member of
 * the group interface, so the hosts' broadcasts reach it. Its address there is the group's
 * gateway (the link selection the server picks the subnet by), which the VRF, never the
 * relay, answers ARP for. Its uplink is a veth into the uplink bridge with a fabric address
 * of `--relay-uplink-ips`, as an Overlay relay's.
 *
 * The uplink's OVS port records the relay (server, MAC, addresses, VNI), so that a
 * restarted agent brings it back (`fabricRelaySpecOf`), and no two relays take one uplink
 * address (`relayUplinkFor`).
 */
import type { AgentConfig } from './config.ts'
import type { DhcpRelays, RelaySpec } from './daemons.ts'
import { relayUplinkPortName } from './daemons.ts'
import { RelayPortConflict } from './errors.ts'
import { claimOf, Key, type LocalOvs, type OwnedPort, type PortSpec } from './ovs.ts'
import { claimPort, granted } from './port-claims.ts'
import { relayUplinkFor } from './relay-ports.ts'
import { groupInterfaceOf, type VrfBackend, vrfNames } from './vrf.ts'

/** The uplink port's key naming the VNI of the Fabric group it relays for. */
export const RELAY_VNI_KEY = 'hydrazine:relay-vni'

/** What the relay of one Fabric group on this DPU needs. */
export interface FabricRelayWanted {
  readonly group: string
  readonly vni: number
  readonly vlan: number
  readonly dhcpServer: string
  /** The group's IPv4 gateway: the relay's address on `vlan<N>`. */
  readonly gateway: string
}

export interface FabricRelayPlace {
  readonly config: AgentConfig
  readonly ovs: LocalOvs
  readonly relays: DhcpRelays
  readonly backend: VrfBackend
}

/**
 * The relay's MAC on `vlan<N>`: locally administered, from the VNI (unique per group; the
 * group interface is local to the DPU, so DPUs may share it), never the gateway's
 * (`gatewayMacOf`). Pure.
 *
 * @example fabricRelayMac(10000) // '02:68:7a:00:27:10'
 */
export function fabricRelayMac(vni: number): string {
  const bytes = [(vni >> 16) & 255, (vni >> 8) & 255, vni & 255]
  return ['02', '68', '7a', ...bytes.map((b) => b.toString(16).padStart(2, '0'))].join(':')
}

/** The relay a Fabric group's relay uplink port describes (after a restart), if it is one. */
export function fabricRelaySpecOf(
  p: OwnedPort,
  namespaceOf: (vni: number) => string | undefined,
): RelaySpec | undefined {
  const vni = Number(p.externalIds[RELAY_VNI_KEY])
  const server = p.externalIds[Key.dhcpServer]
  const mac = p.externalIds[Key.relayMac]
  const address = p.externalIds[Key.relayAddress]
  const uplinkAddress = p.externalIds[Key.relayUplink]
  const port = p.name.endsWith('u') ? p.name.slice(0, -1) : ''
  if (p.role !== 'dhcp-relay-uplink' || !(vni > 0) || !/^vlan\d+$/.test(port)) return undefined
  if (!server || !mac || !address || !uplinkAddress) return undefined
  return {
    group: p.group,
    port,
    dhcpServer: server,
    mac,
    address,
    uplinkAddress,
    downstream: { name: vrfNames(vni).relayLink, netns: namespaceOf(vni) },
  }
}

/**
 * Runs the group's relay on `vlan<N>` of its VRF (the VRF and its group interface exist):
 * its namespace, both veths, the uplink's port on the uplink bridge and `dhcrelay`.
 * Idempotent. Returns the circuit id it sends.
 */
export async function ensureFabricRelay(
  place: FabricRelayPlace,
  wanted: FabricRelayWanted,
): Promise<{ port: string; circuitId: string }> {
  const { config: c, ovs, relays, backend } = place
  const port = groupInterfaceOf(wanted.vlan)
  const name = relayUplinkPortName(port)
  // The relay of a group gone from this DPU that had this VLAN id (a removal cut short)
  // goes first; any other holder of the uplink's name is refused before anything is written.
  const held = (await ovs.snapshot()).owned.find((p) => p.name === name)
  const heldVni = Number(held?.externalIds[RELAY_VNI_KEY])
  if (held && held.group !== wanted.group && heldVni > 0) {
    if (!(await backend.list()).some((v) => v.vni === heldVni)) {
      await removeFabricRelay(place, held.group)
    }
  }
  const before = await ovs.snapshot()
  const spec: RelaySpec = {
    group: wanted.group,
    port,
    dhcpServer: wanted.dhcpServer,
    mac: fabricRelayMac(wanted.vni),
    address: `${wanted.gateway}/32`,
    uplinkAddress: relayUplinkFor(c, wanted.group, before.owned),
    downstream: { name: vrfNames(wanted.vni).relayLink, netns: backend.namespaceOf(wanted.vni) },
  }
  const uplink: PortSpec = {
    bridge: c.uplinkBridge,
    name,
    type: '',
    externalIds: {
      [Key.role]: 'dhcp-relay-uplink',
      [Key.group]: wanted.group,
      [Key.dhcpServer]: spec.dhcpServer,
      [Key.relayMac]: spec.mac,
      [Key.relayAddress]: spec.address ?? '',
      [Key.relayUplink]: spec.uplinkAddress,
      [RELAY_VNI_KEY]: String(wanted.vni),
    },
    owner: [Key.group],
  }
  const claim = claimPort(before.ports.get(name), claimOf(uplink))
  if (!granted(claim)) {
    const holder =
      claim.verdict === 'other-owner'
        ? `${claim.key}=${claim.holder}`
        : `a port of ${claim.existing.bridge ?? 'no bridge'}`
    throw new RelayPortConflict(c.dpuId, name, wanted.group, holder)
  }
  await ovs.ensureBridges([
    {
      name: c.uplinkBridge,
      datapathType: c.datapathType,
      ports: c.uplinkInterface ? [c.uplinkInterface] : [],
    },
  ])
  // The veths first: OVS adds the uplink's DPU-side end as a system interface. A relay
  // running on a veth made again (its VRF was made again) listens on nothing: restarted.
  if (await relays.plumb(spec)) await relays.stop(spec.group)
  await backend.joinRelayLink({ vni: wanted.vni, vlan: wanted.vlan })
  if (!granted(await ovs.ensurePort(uplink))) {
    throw new RelayPortConflict(c.dpuId, uplink.name, wanted.group, 'another port (meanwhile)')
  }
  await relays.ensure(spec)
  return { port, circuitId: port }
}

/**
 * Stops the group's Fabric relay and removes its namespace (both veths with it) and its
 * uplink port, as the agent's own records show them. True when there was one.
 */
export async function removeFabricRelay(
  place: Pick<FabricRelayPlace, 'ovs' | 'relays'>,
  group: string,
): Promise<boolean> {
  const { ovs, relays } = place
  const uplinks = (await ovs.snapshot()).owned.filter(
    (p) => p.role === 'dhcp-relay-uplink' && p.group === group && p.externalIds[RELAY_VNI_KEY],
  )
  const running = relays.list().find((r) => r.group === group && r.downstream)
  if (running) await relays.stop(group)
  const ports = new Set([
    ...uplinks.map((p) => p.name.slice(0, -1)),
    ...(running ? [running.port] : []),
  ])
  for (const port of ports) await relays.unplumb(port)
  for (const p of uplinks) if (p.bridge) await ovs.deletePort(p.name, p.bridge)
  return ports.size > 0
}
