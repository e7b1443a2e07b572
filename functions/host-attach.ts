import type { Job } from 'bullmq'
import type { ConfigureAck } from '../lib/agent-protocol/index.ts'
import { HydrazineError } from '../lib/errors.ts'
import { HostJob } from '../lib/jobs/index.ts'
import { topologyNames } from '../lib/ovn/index.ts'
import { attemptOf } from '../lib/state/attempts.ts'
import {
  cidrContains,
  type ManagedResource,
  type ManagedResourceStatus,
  type ResourceGroup,
} from '../lib/state/objects.ts'
import {
  addConfigure,
  boundOnDpu,
  clearIsolatedStaleBindings,
  configureAck,
  isolateStaleBindings,
} from './internal/agent-jobs.ts'
import type { ChildRef, HandlerDeps } from './internal/deps.ts'
import { AwaitingAck, failOrRetry, NotReady } from './internal/errors.ts'
import { optionalHostPort } from './internal/host-port.ts'
import { oneAtATime, parsePayload, stepOf, stillWaiting, waitForChildren } from './internal/job.ts'
import { relayMacOf, relayOwnerOf, relayPortNameOf } from './internal/network.ts'
import {
  addPublicIpAllocate,
  addPublicIpRelease,
  publicIpAllocated,
} from './internal/public-ip-jobs.ts'
import { setHostStatus } from './internal/status.ts'

/** The host as this job works on it: its stored object and the attempt the job is. */
type Attempt = ManagedResource & { readonly attempt: number }

export interface HostAttachResult {
  readonly host: string
  readonly phase: ManagedResourceStatus['phase']
  readonly observedVersion: number
  readonly skipped?: string
}

/**
 * `host.attach`: puts a host on its group's network.
 *
 * 1. converge — allocate its addresses (owner-keyed, so a retry takes no second one),
 *    apply the group's whole topology to NB, report `Configuring`, then signal its DPU
 *    agent (`configure`) and, for PublicAccess, FRR (`publicip.allocate`), and wait;
 * 2. await — read the acks and report the host Ready with `configsSynced`.
 *
 * While the agent has not acked, the host stays `Configuring` with a condition naming the
 * DPU; when the agent answers, even much later, the job resumes and the host turns Ready.
 */
export function createHostAttach(deps: HandlerDeps) {
  return async function hostAttach(job: Job, token?: string): Promise<HostAttachResult> {
    const { host: name, attempt = 1 } = parsePayload(HostJob, job)
    return oneAtATime(deps.store, { job, token }, 'mr', name, () =>
      attach(deps, job, token, name, attempt),
    )
  }
}

/** The attach of one host, run while no other step (its detach) works on it. */
async function attach(
  deps: HandlerDeps,
  job: Job,
  token: string | undefined,
  name: string,
  attempt: number,
): Promise<HostAttachResult> {
  const found = await deps.store.getHost(name)
  if (!found) return { host: name, phase: 'Failed', observedVersion: 0, skipped: 'not found' }
  if (found.deletion) {
    return { host: name, phase: 'Detaching', observedVersion: 0, skipped: 'being detached' }
  }
  if (attemptOf(found.status) > attempt) {
    const skipped = `superseded by attempt ${attemptOf(found.status)}`
    return { host: name, phase: found.status.phase, observedVersion: 0, skipped }
  }
  const host: Attempt = { ...found, attempt }

  if (stepOf(job) === 'converge') {
    const group = await groupReadyFor(deps, host)
    await dpuFollowsOneGroup(deps, host)
    const addresses = await allocateAddresses(deps, host, group)
    await deps.checkpoint('attach:allocated')
    const { endpoints } = await deps.groups.apply(group.name)
    await deps.checkpoint('attach:topology-applied')
    await reportConfiguring(deps, host, addresses.hostIp)
    await deps.checkpoint('attach:status-configuring')
    const children = [
      ...(await signalAgent(deps, host, group, endpoints.sb, addresses.relayIp)),
      ...(await signalPublicIp(deps, host)),
    ]
    await deps.checkpoint('attach:children-added')
    await waitForChildren(job, token, deps.children, children)
  } else {
    await stillWaiting(job, token, deps.children)
  }
  return reportAttached(deps, host)
}

/**
 * With a central per group, a DPU's ovn-controller follows one group's SB: the DPU serves
 * one group at a time. A host for another group waits (retried, saying why) until the
 * DPU's hosts of the other group are detached. A host holds the DPU once it is past
 * `Attaching`; of two still attaching, the one whose name sorts first goes ahead (so two
 * requests at once never wait for each other).
 */
async function dpuFollowsOneGroup(deps: HandlerDeps, host: Attempt): Promise<void> {
  const { resourceGroup: group, dpu } = host.spec
  if (!(await deps.ovn.ensure(group)).group) return
  for (const name of await deps.store.dpuHostNames(dpu.id)) {
    if (name === host.name) continue
    const holder = await deps.store.getHost(name)
    const other = holder?.spec.resourceGroup
    if (!holder || other === group) continue
    if (holder.status.phase === 'Attaching' && name > host.name) continue
    const message = `DPU ${dpu.id} serves ${name} in group ${other}; with a central per group a DPU serves one group at a time`
    await setHostStatus(deps, host.name, host.specVersion, {
      attempt: host.attempt,
      phase: 'Attaching',
      condition: { type: 'Attached', status: 'False', reason: 'DpuServesAnotherGroup', message },
    })
    throw new NotReady(message)
  }
}

/**
 * The DPU's chassis now follows this group's own central: the central it followed before
 * loses its `Chassis` row, so no SB keeps a chassis that is not there. The new central is
 * recorded only once the old one let go: a removal that failed is tried again.
 */
async function leavePreviousCentral(deps: HandlerDeps, dpuId: string, group: string) {
  if (!(await deps.ovn.ensure(group)).group) return
  const previous = await deps.store.dpuCentral(dpuId)
  if (previous === group) return
  if (previous && (await deps.ovn.groups()).includes(previous)) {
    const central = await deps.ovn.ensure(previous)
    await deps.southbound.removeChassis(central.sbController, dpuId)
  }
  await deps.store.setDpuCentral(dpuId, group)
}

/** The host's group, once it exists and is provisioned; Failed or retry later otherwise. */
async function groupReadyFor(deps: HandlerDeps, host: Attempt): Promise<ResourceGroup> {
  const name = host.spec.resourceGroup
  const group = await deps.store.getGroup(name)
  if (!group || group.deletion) {
    return failOrRetry(new GroupUnavailable(name), (error) =>
      setHostStatus(deps, host.name, host.specVersion, {
        attempt: host.attempt,
        phase: 'Failed',
        condition: {
          type: 'Attached',
          status: 'False',
          reason: 'GroupMissing',
          message: error.message,
        },
      }),
    )
  }
  if (group.status.observedVersion === 0) {
    throw new NotReady(`resource group ${name} is still provisioning`)
  }
  return group
}

/**
 * The host's address, its group's relay address on its DPU (dhcrelay ignores an
 * interface without one: one per group and DPU, kept while the group lives there) and,
 * for PublicAccess, a public IP. A refusal that cannot change (a taken or foreign
 * address, an exhausted pool) makes the host Failed.
 */
async function allocateAddresses(
  deps: HandlerDeps,
  host: Attempt,
  group: ResourceGroup,
): Promise<{ hostIp: string; relayIp?: string }> {
  const failed = (error: HydrazineError) =>
    setHostStatus(deps, host.name, host.specVersion, {
      attempt: host.attempt,
      phase: 'Failed',
      condition: { type: 'Attached', status: 'False', reason: error.code, message: error.message },
    })
  const orFail = (error: unknown) => failOrRetry(error, failed)
  const { spec } = host
  // A host reached from the fabric is NATed, and OVN NATs IPv4 only.
  const family = spec.hostAccess === 'None' ? {} : { version: 4 as const }
  const address = await deps.ipam
    .allocate(group.name, host.name, spec.hostIP ? { ip: spec.hostIP } : family)
    .catch(orFail)
  // dhcrelay relays IPv4 DHCP: its address is an IPv4 one.
  const relay = group.spec.dhcpServer
    ? await deps.ipam.allocate(group.name, relayOwnerOf(spec.dpu.id), { version: 4 }).catch(orFail)
    : undefined
  if (spec.hostAccess === 'PublicAccess') await deps.ipam.allocatePublicIp(host.name).catch(orFail)
  return { hostIp: address.ip, ...(relay ? { relayIp: relay.ip } : {}) }
}

async function reportConfiguring(deps: HandlerDeps, host: Attempt, hostIp: string): Promise<void> {
  const { spec } = host
  const natIp = natIpOf(host)
  await setHostStatus(deps, host.name, host.specVersion, {
    attempt: host.attempt,
    phase: 'Configuring',
    hostAccessIPs: { hostIP: hostIp, ...(natIp ? { fabricIP: natIp } : {}) },
    logicalPortReference: {
      logicalPort: topologyNames.hostPort(spec.resourceGroup, host.name),
      dpu: spec.dpu.id,
    },
    condition: {
      type: 'AgentConfigured',
      status: 'False',
      reason: 'AwaitingAgent',
      message: `waiting for DPU ${spec.dpu.id} to ack configure of spec version ${host.specVersion}`,
    },
  })
}

/** `configure` on the host's DPU, after isolating what a forced detach left bound there. */
async function signalAgent(
  deps: HandlerDeps,
  host: Attempt,
  group: ResourceGroup,
  sbRemote: string,
  relayIp: string | undefined,
): Promise<ChildRef[]> {
  const { spec } = host
  const dpuId = spec.dpu.id
  const stale = await isolateStaleBindings(deps, dpuId, host.name)
  const relayId = group.spec.dhcpServer ? await deps.store.relayIdOf(group.name) : undefined
  const configure = await addConfigure(
    deps,
    {
      dpuId,
      specVersion: host.specVersion,
      group: {
        name: group.name,
        sbRemote,
        ...(group.spec.dhcpServer
          ? {
              dhcpServer: group.spec.dhcpServer,
              relay: {
                logicalPort: topologyNames.relayPort(group.name, dpuId),
                mac: relayMacOf(group.name, dpuId),
                // Its circuit id: unique for ever, unlike a hash of the group's name.
                ...(relayId !== undefined ? { portName: relayPortNameOf(relayId) } : {}),
                ...(relayIp
                  ? {
                      ip: relayIp,
                      prefixLength: prefixLengthOf(group, relayIp),
                    }
                  : {}),
              },
            }
          : {}),
      },
      host: {
        name: host.name,
        logicalPort: topologyNames.hostPort(group.name, host.name),
        mac: spec.hostMAC,
        ...optionalHostPort(spec),
      },
    },
    host.attempt,
  )
  return [...stale, configure]
}

/**
 * PublicAccess: `publicip.allocate` (DNAT and the FRR announcement). Access lowered
 * while a public IP is held: `publicip.release` (the DNAT is already gone from the
 * topology; FRR withdraws the /32 and the address goes back to the pool).
 */
async function signalPublicIp(deps: HandlerDeps, host: Attempt): Promise<ChildRef[]> {
  const natIp = natIpOf(host)
  if (host.spec.hostAccess === 'PublicAccess' && natIp) {
    return [await addPublicIpAllocate(deps, host.name, host.specVersion, natIp, host.attempt)]
  }
  if (await deps.ipam.publicIpOf(host.name)) {
    return [await addPublicIpRelease(deps, host.name, host.specVersion, natIp)]
  }
  return []
}

/**
 * The await step: Ready with `configsSynced` once OVN (applied in converge), the agent
 * (port installed) and, for PublicAccess, FRR (the /32 announced) all reflect this spec
 * version and no newer one exists; else still `Configuring`.
 */
async function reportAttached(deps: HandlerDeps, host: Attempt): Promise<HostAttachResult> {
  const { spec } = host
  const dpuId = spec.dpu.id
  const configured = await configureAck(deps, {
    dpuId,
    host: host.name,
    specVersion: host.specVersion,
    attempt: host.attempt,
  })
  if (configured.state === 'failed') {
    return failed(
      deps,
      host,
      'AgentFailed',
      `DPU ${dpuId} could not bind the host: ${configured.reason}`,
    )
  }
  if (configured.state === 'pending') {
    throw new AwaitingAck(`no configure ack from DPU ${dpuId} for ${host.name} yet`)
  }
  const ack = configured.value
  const allocated =
    spec.hostAccess === 'PublicAccess'
      ? await publicIpAllocated(deps, host.name, host.specVersion, host.attempt)
      : undefined
  if (allocated?.state === 'failed') {
    return failed(
      deps,
      host,
      'PublicIpFailed',
      `the public IP was not announced: ${allocated.reason}`,
    )
  }
  const announced = allocated?.state === 'acked' ? allocated.value : undefined
  const publicIp = announced?.announced ? (announced.publicIp ?? undefined) : undefined
  await clearIsolatedStaleBindings(deps, dpuId)
  await deps.checkpoint('attach:acked')

  const current = await deps.store.getHost(host.name)
  const logicalPort = topologyNames.hostPort(spec.resourceGroup, host.name)
  // The DPU's word is checked against the Southbound: its chassis must hold the binding.
  const bound = ack.ovnInstalled && (await boundOnDpu(deps, spec.resourceGroup, logicalPort, dpuId))
  // Before Ready: a host Ready in its new group leaves no chassis in the old one's SB.
  if (bound) await leavePreviousCentral(deps, dpuId, spec.resourceGroup)
  const synced =
    current?.specVersion === host.specVersion &&
    bound &&
    (spec.hostAccess !== 'PublicAccess' || publicIp !== undefined)
  await setHostStatus(deps, host.name, host.specVersion, {
    attempt: host.attempt,
    phase: synced ? 'Ready' : 'Configuring',
    configsSynced: synced,
    agent: {
      hostPort: ack.hostPort,
      ...(ack.relayPort ? { relayPort: ack.relayPort } : {}),
      ovnInstalled: ack.ovnInstalled,
      specVersion: ack.specVersion,
    },
    ...(publicIp !== undefined ? { publicIp } : {}),
    ...(spec.hostAccess !== 'PublicAccess' ? { clearPublicIp: true } : {}),
    condition: agentConfigured(ack, bound, dpuId, logicalPort),
  })
  if (ack.ovnInstalled && !bound) {
    throw new AwaitingAck(`the Southbound does not bind ${logicalPort} to chassis ${dpuId} yet`)
  }
  return {
    host: host.name,
    phase: synced ? 'Ready' : 'Configuring',
    observedVersion: host.specVersion,
  }
}

/** A child failed for good: the host is Failed with why, and the job ends without retries. */
function failed(deps: HandlerDeps, host: Attempt, reason: string, message: string): Promise<never> {
  return failOrRetry(new ChildFailed(message), (error) =>
    setHostStatus(deps, host.name, host.specVersion, {
      attempt: host.attempt,
      phase: 'Failed',
      condition: { type: 'Attached', status: 'False', reason, message: error.message },
    }),
  )
}

/** A child job of this work (the agent's `configure`, the public IP) failed for good. */
class ChildFailed extends HydrazineError {
  constructor(message: string) {
    super('CHILD_FAILED', message)
  }
}

/** The DPU's NAT IP, when the host's access uses it. */
function natIpOf(host: ManagedResource): string | undefined {
  return host.spec.hostAccess !== 'None' ? host.spec.dpu.ips[1] : undefined
}

/** The host's group does not exist or is being deleted. */
class GroupUnavailable extends HydrazineError {
  constructor(readonly group: string) {
    super('GROUP_UNAVAILABLE', `resource group ${group} does not exist or is being deleted`)
  }
}

/** The `AgentConfigured` condition: the DPU's ack, as far as the Southbound bears it out. */
function agentConfigured(
  ack: Pick<ConfigureAck, 'ovnInstalled' | 'hostPort' | 'relayPort'>,
  bound: boolean,
  dpuId: string,
  logicalPort: string,
) {
  const relay = ack.relayPort ? ` and relay ${ack.relayPort}` : ''
  if (!ack.ovnInstalled) {
    return {
      type: 'AgentConfigured',
      status: 'False',
      reason: 'PortNotInstalled',
      message: `DPU ${dpuId} bound ${ack.hostPort}${relay} to ${logicalPort}; ovn-controller has not installed it`,
    } as const
  }
  if (!bound) {
    return {
      type: 'AgentConfigured',
      status: 'False',
      reason: 'NotBoundInSouthbound',
      message: `DPU ${dpuId} acked ${logicalPort}, but the Southbound does not bind it to chassis ${dpuId}`,
    } as const
  }
  return {
    type: 'AgentConfigured',
    status: 'True',
    reason: 'PortInstalled',
    message: `DPU ${dpuId} bound ${ack.hostPort}${relay} to ${logicalPort}`,
  } as const
}

/** The prefix length of the group subnet that holds `ip` (the primary one's if none does). */
function prefixLengthOf(group: ResourceGroup, ip: string): number {
  const subnets = [group.spec.network, ...(group.spec.extraSubnets ?? [])]
  const cidr = subnets.find((s) => cidrContains(s.cidr, ip))?.cidr ?? group.spec.network.cidr
  return Number(cidr.split('/')[1] ?? 32)
}
