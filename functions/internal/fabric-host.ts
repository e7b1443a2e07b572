/**
 * A Fabric group's host on its DPU: what `host.attach` and `host.detach` do instead of
 * OVN writes when the host's group is a Fabric group. A Fabric group has no central: the
 * attach allocates the host's addresses, sends `configure` (protocol 3: the group's VNI,
 * gateway(s), route target and the host's addresses; 3.1 its access level and public IP)
 * and turns Ready on the agent's ack that the host's prefixes are announced; the detach
 * sends `isolate` first and releases the addresses only once the agent acked them
 * withdrawn.
 *
 * A leaking host (FabricAccess, PublicAccess) holds the addresses it leaks at the fabric's
 * border (`store.fabricLeaks`): claimed before its DPU marks them, given back once its DPU
 * no longer does (a lowered access after the ack, a detach after the isolate). Its public
 * IP comes from the operator's pool, routed by its DPU (no NAT, no FRR job of the
 * controller's).
 */
import { isIPv4 } from 'node:net'
import type { FabricConfigureAck, FabricConfigureInput } from '../../lib/agent-protocol/index.ts'
import { HydrazineError } from '../../lib/errors.ts'
import type { FabricIds } from '../../lib/ipam/index.ts'
import type { ManagedResource, ResourceGroup } from '../../lib/model/objects.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { parseIsolationHoldOwner } from '../../lib/state/isolation-holds.ts'
import {
  addFabricConfigure,
  addFabricIsolate,
  clearIsolatedStaleBindings,
  fabricConfigureAck,
  isolatedBeforeServing,
  isolateStaleBindings,
} from './agent-jobs.ts'
import type { ChildRef, HandlerDeps } from './deps.ts'
import { AwaitingAck, failOrRetry } from './errors.ts'
import { routeTargetOf } from './fabric-group.ts'
import { allocateAddresses } from './host-addresses.ts'
import { optionalHostPort } from './host-port.ts'
import { type HostAttempt, setHostStatus } from './status.ts'

/** The host's DPU takes no Fabric jobs (its agent does not speak protocol 3). */
export class DpuCannotDoFabric extends HydrazineError {
  constructor(readonly dpuId: string) {
    super(
      'DPU_CANNOT_DO_FABRIC',
      `DPU ${dpuId} cannot build Fabric groups' VRFs: its agent does not advertise protocol 3.0 (it needs --evpn-peers); attach the host through another DPU, or put it in an Overlay group`,
    )
  }
}

/**
 * The host's DPU has no live heartbeat: whether its agent builds Fabric groups' VRFs is
 * not known. Retry: the attach goes on once it is heard from.
 */
export class AgentNotHeard extends HydrazineError {
  constructor(readonly dpuId: string) {
    super(
      'AGENT_NOT_HEARD',
      `DPU ${dpuId}'s agent has no live heartbeat: whether it builds Fabric groups' VRFs (protocol 3.0) is not known; the attach waits for it`,
      { retryable: true },
    )
  }
}

/** The host leaks, and its DPU's agent cannot mark routes for the border (it lacks 3.1). */
export class FabricAccessNotAvailable extends HydrazineError {
  constructor(
    readonly host: string,
    readonly access: string,
    readonly dpuId: string,
  ) {
    super(
      'FABRIC_ACCESS_NOT_AVAILABLE',
      `host ${host} asks for ${access}, and DPU ${dpuId}'s agent does not advertise protocol 3.1 (it cannot mark the host's routes for the fabric's border); upgrade the agent, or use hostAccess None`,
    )
  }
}

/**
 * Another host leaks an address this host would leak: the border's table holds one of each.
 * `heldFor`: a force-detached host leaked it, and its DPU has not confirmed it withdrew it.
 */
export class LeakedAddressHeld extends HydrazineError {
  constructor(
    readonly host: string,
    readonly address: string,
    readonly heldFor?: { readonly dpuId: string },
  ) {
    super(
      'CONFLICT',
      heldFor
        ? `host ${host} would leak ${address} at the fabric's border, which is held until the DPU that announced it confirms isolation of the host that leaked it (detached without its DPU's ack: that DPU may still announce it); choose another hostIP, or use hostAccess None`
        : `host ${host} would leak ${address} at the fabric's border, where another host leaks it already; a leaked address must be unique in the fabric: choose another hostIP, or use hostAccess None`,
    )
  }
}

/** Whether a host's access level leaks it at the fabric's border. */
export const leaks = (access: string) => access === 'FabricAccess' || access === 'PublicAccess'

/** A Fabric group without its identifiers or the fabric's AS: it was never made Ready. */
class FabricGroupNotReady extends HydrazineError {
  constructor(group: string) {
    super('FABRIC_GROUP_NOT_READY', `Fabric group ${group} holds no VNI or no AS is configured`, {
      retryable: true,
    })
  }
}

/** The address and prefix length of each of the group's gateways (IPv4 first). */
export function gatewaysOf(group: ResourceGroup): { address: string; prefixLength: number }[] {
  const { network, network6 } = group.spec
  return [network, network6].flatMap((n) =>
    n ? [{ address: n.gateway, prefixLength: Number(n.cidr.split('/')[1]) }] : [],
  )
}

/** The prefix a host address is announced as: a /32 or a /128. */
export function hostPrefixOf(address: string): string {
  return `${address}/${isIPv4(address) ? 32 : 128}`
}

/** The `configure` request for a Fabric group's host. Pure. */
export function fabricConfigureRequestOf(
  host: ManagedResource,
  group: ResourceGroup,
  ids: FabricIds,
  asn: number,
  addresses: readonly string[],
  publicIp?: string,
  /** A public IP the host holds and its access no longer wants: its DPU withdraws it. */
  withdrawPublicIp?: string,
): FabricConfigureInput {
  const access = host.spec.hostAccess
  return {
    dpuId: host.spec.dpu.id,
    specVersion: host.specVersion,
    group: {
      name: group.name,
      vni: ids.vni,
      vlan: ids.vlan,
      asn,
      routeTarget: routeTargetOf(asn, ids.vni),
      gateways: gatewaysOf(group),
      ...(group.spec.dhcpServer ? { dhcpServer: group.spec.dhcpServer } : {}),
    },
    host: {
      name: host.name,
      mac: host.spec.hostMAC,
      ...optionalHostPort(host.spec),
      addresses: [...addresses],
      access,
      ...(access === 'PublicAccess' && publicIp ? { publicIp } : {}),
      ...(withdrawPublicIp && withdrawPublicIp !== publicIp ? { withdrawPublicIp } : {}),
    },
  }
}

/** The group's identifiers and the fabric's AS, or a retry later. */
async function fabricOf(
  deps: Pick<HandlerDeps, 'ipam' | 'fabricAsn'>,
  group: string,
): Promise<{ ids: FabricIds; asn: number }> {
  const ids = await deps.ipam.fabricIdsOf(group)
  if (!ids || deps.fabricAsn === undefined) throw new FabricGroupNotReady(group)
  return { ids, asn: deps.fabricAsn }
}

/**
 * The converge step of a Fabric host's attach: refuses what Fabric mode cannot build (a
 * DPU whose agent takes no Fabric jobs, an access level beyond None), allocates the
 * host's addresses, reports Configuring and sends `configure`, after an `isolate` of each
 * host a forced detach left on the DPU. Returns the children to wait for.
 */
export async function convergeFabricHost(
  deps: HandlerDeps,
  host: HostAttempt,
  group: ResourceGroup,
): Promise<ChildRef[]> {
  const { spec } = host
  const dpuId = spec.dpu.id
  const refuse = (error: HydrazineError, reason: string) =>
    failOrRetry(error, (e) =>
      setHostStatus(deps, host, {
        attempt: host.attempt,
        phase: 'Failed',
        condition: { type: 'AgentConfigured', status: 'False', reason, message: e.message },
      }),
    )
  // What the agent can build is read from its heartbeat: without one, it is not known yet.
  const fabric = await deps.agents.speaksFabric(dpuId)
  if (fabric === undefined) throw new AgentNotHeard(dpuId)
  if (!fabric) await refuse(new DpuCannotDoFabric(dpuId), 'DpuCannotDoFabric')
  if (leaks(spec.hostAccess)) {
    const access = await deps.agents.speaksFabricAccess(dpuId)
    if (access === undefined) throw new AgentNotHeard(dpuId)
    if (!access)
      await refuse(
        new FabricAccessNotAvailable(host.name, spec.hostAccess, dpuId),
        'AccessNotAvailable',
      )
  }
  const { ids, asn } = await fabricOf(deps, group.name)
  // The gateway is the DPU's: no relay address is taken from the group.
  const { dhcpServer: _relayedOnTheGateway, ...withoutRelay } = group.spec
  const addresses = await allocateAddresses(deps, host, { ...group, spec: withoutRelay })
  await deps.checkpoint('attach:allocated')
  const list = [addresses.hostIp, ...(addresses.hostIpv6 ? [addresses.hostIpv6] : [])]
  // allocateAddresses took it (an IPv4 host's). A lowered access still holding one has its
  // DPU withdraw it; it goes back to the pool once the DPU acked (`reportFabricAttached`).
  const held = await deps.ipam.publicIpOf(host.name)
  const publicIp = spec.hostAccess === 'PublicAccess' ? held : undefined
  const withdrawPublicIp = spec.hostAccess === 'PublicAccess' ? undefined : held
  const leaked = leaks(spec.hostAccess) ? [...list, ...(publicIp ? [publicIp] : [])] : []
  // What it leaked before stays held until its DPU acks the new marking.
  const claim = await deps.store.fabricLeaks.claim(host.name, [
    ...new Set([...(await deps.store.fabricLeaks.heldBy(host.name)), ...leaked]),
  ])
  if (!claim.ok) {
    const heldFor = parseIsolationHoldOwner(claim.holder)
    await refuse(new LeakedAddressHeld(host.name, claim.address, heldFor), 'LeakedAddressHeld')
  }
  await setHostStatus(deps, host, {
    attempt: host.attempt,
    phase: 'Configuring',
    hostAccessIPs: {
      hostIP: addresses.hostIp,
      ...(addresses.hostIpv6 ? { hostIPv6: addresses.hostIpv6 } : {}),
    },
    ...(publicIp ? { publicIp } : {}),
    condition: {
      type: 'AgentConfigured',
      status: 'False',
      reason: 'AwaitingAgent',
      message: `waiting for DPU ${dpuId} to put the host in VRF VNI ${ids.vni} and announce ${list.map(hostPrefixOf).join(', ')} (spec version ${host.specVersion})`,
    },
  })
  await deps.checkpoint('attach:status-configuring')
  // What a forced detach left on the DPU is isolated first (queued before the configure).
  const stale = await isolateStaleBindings(deps, dpuId, {
    host: host.name,
    group: host.spec.resourceGroup,
  })
  const configure = await addFabricConfigure(
    deps,
    fabricConfigureRequestOf(host, group, ids, asn, [...new Set(list)], publicIp, withdrawPublicIp),
    host.attempt,
  )
  return [...stale, configure]
}

/**
 * The await step of a Fabric host's attach: Ready with `configsSynced` once its DPU acked
 * this spec version with every address of the host announced; Failed when the agent
 * failed for good.
 */
export async function reportFabricAttached(
  deps: HandlerDeps,
  host: HostAttempt,
): Promise<'Ready' | 'Configuring'> {
  const dpuId = host.spec.dpu.id
  const configured = await fabricConfigureAck(deps, {
    dpuId,
    host: host.name,
    specVersion: host.specVersion,
    attempt: host.attempt,
  })
  if (configured.state === 'failed') {
    return failOrRetry(new FabricConfigureFailed(dpuId, configured.reason), async (error) =>
      setHostStatus(deps, host, {
        attempt: host.attempt,
        phase: 'Failed',
        condition: {
          type: 'Attached',
          status: 'False',
          reason: 'AgentFailed',
          message: error.message,
        },
      }),
    )
  }
  if (configured.state === 'pending') {
    throw new AwaitingAck(`no configure ack from DPU ${dpuId} for ${host.name} yet`)
  }
  const ack = configured.value
  // Every other binding's isolate finished first: then each acked one is cleared before Ready.
  await isolatedBeforeServing(deps, dpuId, { host: host.name, group: host.spec.resourceGroup })
  await clearIsolatedStaleBindings(deps, dpuId)
  await deps.checkpoint('attach:acked')
  const current = await deps.store.hosts.get(host.name)
  const ips = current?.status.hostAccessIPs
  const own = [ips?.hostIP, ips?.hostIPv6].flatMap((a) => (a ? [a] : []))
  const publicIp = host.spec.hostAccess === 'PublicAccess' ? ips?.publicIP : undefined
  const wanted = [...own, ...(publicIp ? [publicIp] : [])].map(hostPrefixOf)
  const announced = wanted.every((p) => ack.announced.includes(p))
  const synced = current?.specVersion === host.specVersion && announced
  // Its DPU marks only what this spec leaks now: what it leaked before is given back.
  if (synced) {
    const leaked = leaks(host.spec.hostAccess) ? [...own, ...(publicIp ? [publicIp] : [])] : []
    await deps.store.fabricLeaks.claim(host.name, leaked)
  }
  // A lowered access: the DPU (3.1, which withdraws what `configure` names) withdrew the
  // public IP the host held, which goes back to the pool now, and from its status.
  const lowered =
    synced &&
    host.spec.hostAccess !== 'PublicAccess' &&
    (await deps.ipam.publicIpOf(host.name)) !== undefined &&
    (await deps.agents.speaksFabricAccess(dpuId)) === true
  if (lowered) await deps.ipam.releasePublicIp(host.name)
  await setHostStatus(deps, host, {
    attempt: host.attempt,
    phase: synced ? 'Ready' : 'Configuring',
    configsSynced: synced,
    ...(lowered ? { clearPublicIp: true } : {}),
    agent: {
      hostPort: ack.hostPort,
      ...(ack.relay ? { relayPort: ack.relay.port } : {}),
      ovnInstalled: false,
      specVersion: ack.specVersion,
      vrf: ack.vrf,
      announced: [...ack.announced],
    },
    condition: fabricConfigured(ack, announced, dpuId),
  })
  return synced ? 'Ready' : 'Configuring'
}

function fabricConfigured(ack: FabricConfigureAck, announced: boolean, dpuId: string) {
  const relay = ack.relay ? `, relaying DHCP with circuit id ${ack.relay.circuitId}` : ''
  return announced
    ? ({
        type: 'AgentConfigured',
        status: 'True',
        reason: 'RoutesAnnounced',
        message: `DPU ${dpuId} put ${ack.hostPort} in VRF ${ack.vrf} and announces ${ack.announced.join(', ')}${relay}`,
      } as const)
    : ({
        type: 'AgentConfigured',
        status: 'False',
        reason: 'RoutesNotAnnounced',
        message: `DPU ${dpuId} put ${ack.hostPort} in VRF ${ack.vrf} but announces only ${ack.announced.join(', ') || 'nothing'}`,
      } as const)
}

/** The agent could not configure a Fabric host (its `configure` failed for good). */
class FabricConfigureFailed extends HydrazineError {
  constructor(dpuId: string, why: string) {
    super('CHILD_FAILED', `DPU ${dpuId} could not put the host in its group's VRF: ${why}`)
  }
}

/**
 * `isolate` of a Fabric group's host on its DPU: its prefixes withdrawn and its port out
 * of the group's VRF. Its addresses go with it (still in status when the detach starts).
 * Forced, the DPU is also marked: until its agent acks the isolate, it must isolate the
 * host before it serves anyone else (`isolateStaleBindings`).
 */
export async function isolateFabricHost(
  deps: Pick<HandlerDeps, 'children' | 'ipam' | 'store'>,
  host: ManagedResource,
  force = false,
): Promise<ChildRef> {
  const { spec } = host
  const ids = await deps.ipam.fabricIdsOf(spec.resourceGroup)
  const ips = host.status.hostAccessIPs
  // A group that never got its VNI built no VRF: the agent finds none to leave.
  const vni = ids?.vni ?? 1
  const addresses = [ips?.hostIP, ips?.hostIPv6].flatMap((a) => (a ? [a] : []))
  const publicIp = ips?.publicIP
  if (force) {
    await deps.store.dpus.markNeedsIsolation(spec.dpu.id, {
      group: spec.resourceGroup,
      host: host.name,
      logicalPort: topologyNames.hostPort(spec.resourceGroup, host.name),
      ...optionalHostPort(spec),
      specVersion: host.specVersion,
      fabric: { vni, addresses },
    })
  }
  return addFabricIsolate(deps, {
    dpuId: spec.dpu.id,
    specVersion: host.specVersion,
    group: { name: spec.resourceGroup, vni },
    host: {
      name: host.name,
      ...optionalHostPort(spec),
      addresses,
      ...(publicIp ? { publicIp } : {}),
    },
  })
}
