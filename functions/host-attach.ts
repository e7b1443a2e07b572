/**
 * `host.attach` (see `createHostAttach`). The mechanics its steps use live in
 * `internal/`: the DPU's central (`dpu-central.ts`), the host's addresses
 * (`host-addresses.ts`) and its `configure` request and condition (`host-configure.ts`).
 */
import { isIP } from 'node:net'
import type { Job } from 'bullmq'
import { HydrazineError } from '../lib/errors.ts'
import { CONTROLLER_QUEUE, HostJob, jobId } from '../lib/jobs/index.ts'
import { attemptOf } from '../lib/model/attempts.ts'
import { implementationOf } from '../lib/model/network-implementation.ts'
import type { ManagedResource, ManagedResourceStatus, ResourceGroup } from '../lib/model/objects.ts'
import { topologyNames } from '../lib/ovn/index.ts'
import type { KeptObject } from '../lib/state/object-records.ts'
import {
  addConfigure,
  boundOnDpu,
  clearIsolatedStaleBindings,
  configureAck,
  isolatedBeforeServing,
  isolateStaleBindings,
} from './internal/agent-jobs.ts'
import { holdCentral } from './internal/central-demand.ts'
import type { ChildRef, GroupApplied, HandlerDeps } from './internal/deps.ts'
import {
  chassisCertificateFor,
  controllerKeepsUpWithNorthd,
  dpuFollowsOneGroup,
  leavePreviousCentral,
  southboundCaFor,
} from './internal/dpu-central.ts'
import { AwaitingAck, DpuIdentityAwaited, failOrRetry, NotReady } from './internal/errors.ts'
import { convergeFabricHost, reportFabricAttached } from './internal/fabric-host.ts'
import {
  allocateAddresses,
  type HostAddresses,
  sameMemberSettings,
} from './internal/host-addresses.ts'
import { agentConfigured, configureRequestOf } from './internal/host-configure.ts'
import {
  oneAtATime,
  parsePayload,
  readFinishedOnce,
  stepOf,
  stillWaiting,
  waitForChildren,
} from './internal/job.ts'
import { ParkedWork } from './internal/parked-work.ts'
import {
  addPublicIpAllocate,
  natIp6Of,
  publicIpAllocated,
  publicIpv6Via,
  releaseHeldPublicIps,
} from './internal/public-ip-jobs.ts'
import { type HostAttempt, setHostStatus } from './internal/status.ts'

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
 *    start the group's central if it does not run (centrals on demand: its first host),
 *    apply the group's whole topology to NB, report `Configuring`, then signal its DPU
 *    agent (`configure`) and, for PublicAccess, FRR (`publicip.allocate`), and wait.
 *    With `parkForCommit`, while the apply waits for the pace of the group's commits, the
 *    job parks (step `applied`), its worker slot free, and goes on from the apply's result
 *    once the commit is in;
 * 2. await — read the acks and report the host Ready with `configsSynced`.
 *
 * While the agent has not acked, the host stays `Configuring` with a condition naming the
 * DPU; when the agent answers, even much later, the job resumes and the host turns Ready.
 */
export function createHostAttach(deps: HandlerDeps) {
  // Attaches parked while their group's commit waits for its pace, by job.
  const parked = deps.parkForCommit ? new ParkedWork<Converged>() : undefined
  return async function hostAttach(job: Job, token?: string): Promise<HostAttachResult> {
    const { host: name, attempt = 1 } = parsePayload(HostJob, job)
    // The await step reads its finished children once: its look at them and their acks.
    const run = { ...deps, children: readFinishedOnce(deps.children) }
    return oneAtATime(deps.store, { job, token }, 'mr', name, () =>
      attach(run, parked, job, token, name, attempt),
    )
  }
}

/** The attach of one host, run while no other step (its detach) works on it. */
async function attach(
  deps: HandlerDeps,
  parked: ParkedWork<Converged> | undefined,
  job: Job,
  token: string | undefined,
  name: string,
  attempt: number,
): Promise<HostAttachResult> {
  // Read once for this run, with its revision: its status writes start from this read.
  const stored = await deps.store.hosts.getKept(name)
  if (!stored) return { host: name, phase: 'Failed', observedVersion: 0, skipped: 'not found' }
  const found = stored.object
  if (found.deletion) {
    return { host: name, phase: 'Detaching', observedVersion: 0, skipped: 'being detached' }
  }
  if (attemptOf(found.status) > attempt) {
    const skipped = `superseded by attempt ${attemptOf(found.status)}`
    return { host: name, phase: found.status.phase, observedVersion: 0, skipped }
  }
  const host: HostAttempt = { ...found, attempt }
  // The host's group, read once for this run: its kind, and whether it is ready.
  const read = await deps.store.groups.get(host.spec.resourceGroup)
  if (read && implementationOf(read.spec) === 'Fabric') {
    return attachToFabric(deps, job, token, host, read)
  }

  const step = stepOf(job)
  if (step !== 'await') {
    // Resumed once the group's commit is in (`applied`): this run takes what the parked
    // one left. Without it (another process parked it, or a restart), converge again,
    // waiting for the apply here: allocation and apply are idempotent.
    const kept = step === 'applied' ? await parked?.resume(job, token) : undefined
    const { group, addresses, applied } =
      kept ??
      (await allocateAndApply(
        deps,
        job,
        token,
        host,
        read,
        step === 'converge' ? parked : undefined,
      ))
    // Settings changed since the group was read (a moved network6, whose old addresses the
    // group's change gave back): this run's addresses and configure would be stale. The
    // apply read the group after the allocation, so its read tells.
    sameMemberSettings(group, applied.state.group)
    await deps.checkpoint('attach:topology-applied', host.name)
    await reportConfiguring(deps, host, addresses, stored)
    await deps.checkpoint('attach:status-configuring', host.name)
    const children = [
      ...(await signalAgent(deps, host, group, applied.endpoints.sb, addresses.relayIp)),
      ...(await signalPublicIp(deps, host, addresses)),
    ]
    await deps.checkpoint('attach:children-added', host.name)
    await waitForChildren(job, token, deps.children, children)
  } else {
    await stillWaiting(job, token, deps.children)
  }
  return reportAttached(deps, host, stored)
}

/** What the attach's converge step computed before it signals the DPU. */
interface Converged {
  /** The group as the allocation read it. */
  readonly group: ResourceGroup
  readonly addresses: HostAddresses
  /** The apply that committed the host's port. */
  readonly applied: GroupApplied
}

/**
 * The converge step up to the host's port in NB: its group ready, its DPU free for it,
 * the group's central running, its addresses allocated, then the group's apply. With
 * `parked`, while that apply waits for its central's commit pace the job parks (`applied`
 * step) and gives its worker slot back; its next run takes the result from `parked`.
 */
async function allocateAndApply(
  deps: HandlerDeps,
  job: Job,
  token: string | undefined,
  host: HostAttempt,
  read: ResourceGroup | undefined,
  parked: ParkedWork<Converged> | undefined,
): Promise<Converged> {
  const group = await groupReadyFor(deps, job, token, host, read)
  await deps.checkpoint('attach:group-read', host.name)
  await dpuFollowsOneGroup(deps, host)
  // Centrals on demand: the group's first host starts its central (the ensure below).
  await holdCentral(deps, group.name)
  // Before anything is written for the host: a DPU its group's northd is too new for.
  await controllerKeepsUpWithNorthd(
    deps,
    await deps.ovn.ensure(group.name),
    group.name,
    host.spec.dpu.id,
  ).catch(refuseDpu(deps, host))
  const addresses = await allocateAddresses(deps, host, group)
  await deps.checkpoint('attach:allocated', host.name)
  if (!parked) return { group, addresses, applied: await deps.groups.apply(group.name) }
  // The apply covers the allocation above: it reads the group's members when it starts.
  const request = deps.groups.request(group.name)
  const converged = request.applied.then((applied) => ({ group, addresses, applied }))
  // An apply that starts at once takes a transaction's time: not worth parking for.
  if (!request.waits) return converged
  return parked.park(job, token, converged, {
    record: () => job.updateData({ ...(job.data as object), step: 'applied' }),
    parkedAt: () => deps.checkpoint('attach:parked', host.name),
  })
}

/**
 * The attach of a Fabric group's host (`internal/fabric-host.ts`): no OVN, no central;
 * `configure` on its DPU puts it in the group's VRF and announces its prefixes, and the
 * host is Ready on that ack.
 */
async function attachToFabric(
  deps: HandlerDeps,
  job: Job,
  token: string | undefined,
  host: HostAttempt,
  read: ResourceGroup,
): Promise<HostAttachResult> {
  if (stepOf(job) !== 'await') {
    const group = await groupReadyFor(deps, job, token, host, read)
    await deps.checkpoint('attach:group-read', host.name)
    const children = await convergeFabricHost(deps, host, group)
    await deps.checkpoint('attach:children-added', host.name)
    await waitForChildren(job, token, deps.children, children)
  } else {
    await stillWaiting(job, token, deps.children)
  }
  const phase = await reportFabricAttached(deps, host)
  return { host: host.name, phase, observedVersion: host.specVersion }
}

/**
 * The host's group (`group`: as this run read it), once it exists and is provisioned;
 * Failed or retry later otherwise. While the group's first `group.create` runs, the attach
 * parks as that job's waiter: it resumes the moment the group turns Ready, not when a
 * retry's backoff ends (seconds later, for a group whose central is being made).
 */
async function groupReadyFor(
  deps: HandlerDeps,
  job: Job,
  token: string | undefined,
  host: HostAttempt,
  group: ResourceGroup | undefined,
): Promise<ResourceGroup> {
  const name = host.spec.resourceGroup
  if (!group || group.deletion) {
    return failOrRetry(new GroupUnavailable(name), (error) =>
      setHostStatus(deps, host, {
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
    const create = jobId('group.create', name, group.specVersion, attemptOf(group.status))
    if (token) await deps.children.park(job, token, [{ queue: CONTROLLER_QUEUE, jobId: create }])
    throw new NotReady(`resource group ${name} is still provisioning`)
  }
  return group
}

/** `stored`: the host as this run read it (`setHostStatus`' `read`). */
async function reportConfiguring(
  deps: HandlerDeps,
  host: HostAttempt,
  addresses: { readonly hostIp: string; readonly hostIpv6?: string },
  stored: KeptObject<ManagedResource>,
): Promise<void> {
  const { spec } = host
  const natIp = natIpOf(host)
  const natIp6 = natIp6Of(deps, host.spec, addresses.hostIpv6)
  await setHostStatus(
    deps,
    host,
    {
      attempt: host.attempt,
      phase: 'Configuring',
      hostAccessIPs: {
        hostIP: addresses.hostIp,
        ...(addresses.hostIpv6 ? { hostIPv6: addresses.hostIpv6 } : {}),
        ...(natIp ? { fabricIP: natIp } : {}),
        ...(natIp6 ? { fabricIPv6: natIp6 } : {}),
      },
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
    },
    stored,
  )
}

/** Why a DPU cannot be configured for its group, as the host's condition says it. */
const REFUSED_REASONS: Readonly<Record<string, string>> = {
  CHASSIS_IDENTITY_REFUSED: 'ChassisIdentityRefused',
  OVN_CONTROLLER_TOO_OLD: 'OvnControllerTooOld',
}

/**
 * A DPU its group's central cannot take (an ovn-controller older than its northd, no
 * identity its SB admits): a permanent error fails the host, saying why; others retry.
 */
function refuseDpu(deps: HandlerDeps, host: HostAttempt) {
  return (error: unknown) =>
    failOrRetry(error, (e) =>
      setHostStatus(deps, host, {
        attempt: host.attempt,
        phase: 'Failed',
        condition: {
          type: 'AgentConfigured',
          status: 'False',
          reason: REFUSED_REASONS[e.code] ?? e.code,
          message: e.message,
        },
      }),
    )
}

/**
 * A DPU whose identity its group's SB needs and which is not on record yet (its agent is
 * older than the controller): the host says so, and its attach is retried.
 */
function awaitIdentity(deps: HandlerDeps, host: HostAttempt) {
  return async (error: unknown): Promise<never> => {
    if (error instanceof DpuIdentityAwaited) {
      await setHostStatus(deps, host, {
        attempt: host.attempt,
        phase: 'Configuring',
        condition: {
          type: 'AgentConfigured',
          status: 'False',
          reason: 'DpuIdentityAwaited',
          message: error.message,
        },
      })
    }
    throw error
  }
}

/** `configure` on the host's DPU, after isolating what a forced detach left bound there. */
async function signalAgent(
  deps: HandlerDeps,
  host: HostAttempt,
  group: ResourceGroup,
  sbRemote: string,
  relayIp: string | undefined,
): Promise<ChildRef[]> {
  const dpuId = host.spec.dpu.id
  const sbCertificate = await chassisCertificateFor(deps, group.name, dpuId)
    .catch(awaitIdentity(deps, host))
    .catch(refuseDpu(deps, host))
  const sbCa = await southboundCaFor(deps, group.name)
  const stale = await isolateStaleBindings(deps, dpuId, {
    host: host.name,
    group: host.spec.resourceGroup,
  })
  const relayId = group.spec.dhcpServer ? await deps.store.groups.relayIdOf(group.name) : undefined
  const request = configureRequestOf(host, group, {
    sbRemote,
    sbCertificate,
    sbCa,
    relayIp,
    relayId,
    geneveIpsec: deps.geneveIpsec,
  })
  const configure = await addConfigure(deps, request, host.attempt)
  return [...stale, configure]
}

/**
 * PublicAccess: `publicip.allocate` (DNAT and the FRR announcement; a public IPv6 too
 * when the host's IPv6 leaves its group). Access lowered while a public IP is held:
 * `publicip.release` (the DNAT is already gone from the topology; FRR withdraws the
 * prefixes and the addresses go back to their pools).
 */
async function signalPublicIp(
  deps: HandlerDeps,
  host: HostAttempt,
  addresses: { readonly hostIp: string; readonly hostIpv6?: string },
): Promise<ChildRef[]> {
  // An IPv6-only host has no IPv4 to take a public IPv4 to.
  const natIp = isIP(addresses.hostIp) === 4 ? natIpOf(host) : undefined
  const natIp6 = natIp6Of(deps, host.spec, addresses.hostIpv6)
  if (host.spec.hostAccess === 'PublicAccess') {
    const public6 = await publicIpv6Via(deps, natIp, natIp6)
    const families = [...(natIp ? [4 as const] : []), ...(public6 ? [6 as const] : [])]
    const allocate =
      families.length > 0
        ? [await addPublicIpAllocate(deps, host.name, host.specVersion, families, host.attempt)]
        : []
    // IPv6 no longer leaves (the fabric or the group lost it): its public IPv6 goes.
    const dropped = public6 ? [] : await releaseHeldPublicIps(deps, host, [6])
    return [...allocate, ...dropped]
  }
  return releaseHeldPublicIps(deps, host)
}

/**
 * The await step: Ready with `configsSynced` once OVN (applied in converge), the agent
 * (port installed) and, for PublicAccess, FRR (the /32 announced) all reflect this spec
 * version and no newer one exists; else still `Configuring`.
 */
async function reportAttached(
  deps: HandlerDeps,
  host: HostAttempt,
  stored: KeptObject<ManagedResource>,
): Promise<HostAttachResult> {
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
  const publicIp6 = announced?.announced ? (announced.publicIp6 ?? undefined) : undefined
  // Every other binding's isolate finished first: then each acked one is cleared before Ready.
  await isolatedBeforeServing(deps, dpuId, { host: host.name, group: spec.resourceGroup })
  await clearIsolatedStaleBindings(deps, dpuId)
  await deps.checkpoint('attach:acked', host.name)

  const logicalPort = topologyNames.hostPort(spec.resourceGroup, host.name)
  // The DPU's word is checked against the Southbound: its chassis must hold the binding.
  const bound = ack.ovnInstalled && (await boundOnDpu(deps, spec.resourceGroup, logicalPort, dpuId))
  // Before Ready: a host Ready in its new group leaves no chassis in the old one's SB.
  if (bound) await leavePreviousCentral(deps, dpuId, spec.resourceGroup)
  const geneveIpsec = deps.geneveIpsec === true
  const inPlace =
    bound &&
    (!geneveIpsec || ack.geneveIpsec === true) &&
    (spec.hostAccess !== 'PublicAccess' || announced?.announced === true)
  // Synced only while no newer spec exists: judged on the host as the status write reads it.
  let synced = false
  await setHostStatus(
    deps,
    host,
    (current) => {
      synced = inPlace && current.specVersion === host.specVersion
      return {
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
        ...(publicIp6 !== undefined ? { publicIp6 } : {}),
        ...(spec.hostAccess !== 'PublicAccess' ? { clearPublicIp: true } : {}),
        ...(announced?.announced && !announced.publicIp6 ? { clearPublicIp6: true } : {}),
        condition: agentConfigured(ack, bound, dpuId, logicalPort, geneveIpsec),
      }
    },
    stored,
  )
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
function failed(
  deps: HandlerDeps,
  host: HostAttempt,
  reason: string,
  message: string,
): Promise<never> {
  return failOrRetry(new ChildFailed(message), (error) =>
    setHostStatus(deps, host, {
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
