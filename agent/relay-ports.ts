/**
 * The OVS side of a group's DHCP relay on this DPU: the relay port on the integration
 * bridge and its uplink on the uplink bridge. Which ports and addresses a `configure`
 * makes is decided here before anything is written (`relayPlan`, pure); a restarted
 * agent brings a relay back from its port's records (`relaySpecOf`); `removeRelay` takes
 * one down. The `dhcrelay` process itself is `daemons.ts`'s.
 */
import { type ConfigureRequest, relayPortName } from '../lib/agent-protocol/index.ts'
import type { AgentConfig } from './config.ts'
import { type DhcpRelays, type RelaySpec, relayUplinkPortName } from './daemons.ts'
import { NoRelayUplink } from './errors.ts'
import { Key, type LocalOvs, type OvsSnapshot, type OwnedPort, type PortSpec } from './ovs.ts'

/** The relay ports a `configure` makes for its group: decided before anything is written. */
export interface RelayPlan {
  readonly spec: RelaySpec
  readonly port: PortSpec
  readonly uplink: PortSpec
}

/** The relay an agent-owned relay port describes (after a restart), if it is one. */
export function relaySpecOf(p: OwnedPort): RelaySpec | undefined {
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

/**
 * The group's relay: its port name (the controller's `relay.portName`, else the hashed
 * fallback), addresses, and the two OVS ports it needs. Undefined when the group relays
 * no DHCP.
 */
export function relayPlan(
  c: AgentConfig,
  job: ConfigureRequest,
  before: OvsSnapshot,
): RelayPlan | undefined {
  const { group } = job
  if (!group.relay || !group.dhcpServer) return undefined
  const name = group.relay.portName ?? relayPortName(group.name)
  const spec: RelaySpec = {
    group: group.name,
    port: name,
    dhcpServer: group.dhcpServer,
    mac: group.relay.mac,
    ...(group.relay.ip ? { address: `${group.relay.ip}/${group.relay.prefixLength ?? 32}` } : {}),
    uplinkAddress: relayUplinkFor(c, group.name, before.owned),
  }
  return {
    spec,
    port: {
      bridge: c.integrationBridge,
      name,
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
      owner: [Key.group],
    },
    uplink: {
      bridge: c.uplinkBridge,
      name: relayUplinkPortName(name),
      type: '',
      externalIds: { [Key.role]: 'dhcp-relay-uplink', [Key.group]: group.name },
      owner: [Key.group],
    },
  }
}

/**
 * The fabric address of the group's relay uplink: the one it has, else the first of
 * `--relay-uplink-ips` no other group's relay holds (an Overlay relay's port records its
 * address, a Fabric relay's uplink port its own: `fabric-relay.ts`).
 */
export function relayUplinkFor(c: AgentConfig, group: string, owned: readonly OwnedPort[]): string {
  const relays = owned.filter(
    (p) =>
      (p.role === 'dhcp-relay' || p.role === 'dhcp-relay-uplink') && p.externalIds[Key.relayUplink],
  )
  const held = relays.find((p) => p.group === group)?.externalIds[Key.relayUplink]
  if (held && c.relayUplinkIps.includes(held)) return held
  const taken = new Set(relays.map((p) => p.externalIds[Key.relayUplink]))
  const free = c.relayUplinkIps.find((a) => !taken.has(a))
  if (!free) throw new NoRelayUplink(c.dpuId, group, c.relayUplinkIps.length)
  return free
}

/**
 * Stops the group's relay and removes its ports and namespaces, as the agent's own
 * records (`owned`) show them — except the relay port `keep`. Returns the first relay
 * port removed, if anything was there.
 */
export async function removeRelay(
  place: { readonly ovs: LocalOvs; readonly relays: DhcpRelays },
  group: string,
  owned: readonly OwnedPort[],
  keep?: string,
): Promise<string | undefined> {
  const relayPorts = owned.filter(
    (p) => p.role === 'dhcp-relay' && p.group === group && p.name !== keep,
  )
  const uplinks = owned.filter(
    (p) =>
      p.role === 'dhcp-relay-uplink' &&
      p.group === group &&
      (keep === undefined || p.name !== relayUplinkPortName(keep)),
  )
  const running = place.relays.list().find((r) => r.group === group)
  const hadRelay = running && running.port !== keep ? await place.relays.stop(group) : false
  // Namespaces before ports: a crash in between leaves ports, which the next run finds.
  for (const p of relayPorts) await place.relays.unplumb(p.name)
  for (const p of [...relayPorts, ...uplinks]) {
    if (p.bridge) await place.ovs.deletePort(p.name, p.bridge)
  }
  if (relayPorts[0]) return relayPorts[0].name
  return hadRelay ? running?.port : undefined
}
