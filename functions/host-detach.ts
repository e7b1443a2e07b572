import type { Job } from 'bullmq'
import { HydrazineError } from '../lib/errors.ts'
import { ipv6OwnerOf } from '../lib/ipam/group-network.ts'
import { deletionVersion, HostDetachJob, jobId } from '../lib/jobs/index.ts'
import { implementationOf } from '../lib/model/network-implementation.ts'
import type { ManagedResource } from '../lib/model/objects.ts'
import { topologyNames } from '../lib/ovn/index.ts'
import {
  heldList,
  holdUntilIsolated,
  type IsolationHold,
  isolationHoldOwner,
  releaseIsolationHold,
} from '../lib/state/isolation-holds.ts'
import {
  addIsolate,
  boundOnDpu,
  fabricIsolateAck,
  isolateAck,
  isolateTarget,
  renewIsolate,
} from './internal/agent-jobs.ts'
import { centralMayStop } from './internal/central-demand.ts'
import { leaveGroupSouthbound, rotateForLeavers } from './internal/chassis-credentials.ts'
import type { ChildRef, HandlerDeps } from './internal/deps.ts'
import { isolateCredentialsFor, southboundCaFor } from './internal/dpu-central.ts'
import { recordDpuEvent } from './internal/dpu-events.ts'
import { AwaitingAck, failOrRetry } from './internal/errors.ts'
import { isolateFabricHost } from './internal/fabric-host.ts'
import { GroupGone } from './internal/group-apply.ts'
import { oneAtATime, parsePayload, stepOf, stillWaiting, waitForChildren } from './internal/job.ts'
import { ParkedWork } from './internal/parked-work.ts'
import { publicIpReleased, releaseHeldPublicIps } from './internal/public-ip-jobs.ts'
import { setHostStatus } from './internal/status.ts'

export interface HostDetachResult {
  readonly host: string
  readonly phase: 'Isolated' | 'Detaching'
  /** True when the DPU agent acked that the host port is unbound. */
  readonly agentAcked: boolean
  readonly releasedIp: string | null
  /**
   * Forced, its DPU silent (a Fabric host): the leaked addresses and public IPs held until
   * that DPU confirms the host isolated.
   */
  readonly heldUntilIsolated?: readonly string[]
  readonly skipped?: string
}

/**
 * `host.detach`: takes a host off its group's network, isolating it before its addresses
 * are given back.
 *
 * 1. converge — report `Detaching`, drop the host's rows from NB (the group's topology
 *    without it; with `parkForCommit`, parked while that commit waits for its pace),
 *    ask its DPU agent to `isolate` it and FRR to withdraw its public IP, and wait for
 *    both acks;
 * 2. await — only once the agent acked that the port is unbound: release its addresses
 *    (last) and remove the object. The host is reported `Isolated` in the job result. The
 *    group's last host schedules its central's stop (centrals on demand). When it was its
 *    DPU's last host of the group, the group's SB stops admitting that DPU
 *    (`leaveGroupSouthbound`).
 *
 * `force` does not wait for an agent that is gone: the DPU is marked as needing
 * isolation before it may serve another tenant (a Fabric host's: its port out of its
 * group's VRF and its prefixes withdrawn). A Fabric host's DPU announces the host's
 * addresses itself: what it leaked at the border and its public IPs stay held by that
 * DPU's pending isolation until the DPU confirms it (`lib/state/isolation-holds.ts`).
 */
export function createHostDetach(deps: HandlerDeps) {
  // Detaches parked while their group's commit waits for its pace, by job.
  const parked = deps.parkForCommit ? new ParkedWork<true>() : undefined
  return async function hostDetach(job: Job, token?: string): Promise<HostDetachResult> {
    const { host: name, force } = parsePayload(HostDetachJob, job)
    return oneAtATime(deps.store, { job, token }, 'mr', name, () =>
      detach(deps, parked, job, token, name, force),
    )
  }
}

/** The detach of one host, run while no other step (its attach) works on it. */
async function detach(
  deps: HandlerDeps,
  parked: ParkedWork<true> | undefined,
  job: Job,
  token: string | undefined,
  name: string,
  force: boolean,
): Promise<HostDetachResult> {
  const host = await deps.store.hosts.get(name)
  if (!host) {
    return {
      host: name,
      phase: 'Isolated',
      agentAcked: false,
      releasedIp: null,
      skipped: 'not found',
    }
  }
  const group = await deps.store.groups.get(host.spec.resourceGroup)
  const fabric = group !== undefined && implementationOf(group.spec) === 'Fabric'
  const step = stepOf(job)
  if (step !== 'await') {
    // Resumed once the group's commit without the host is in (`applied`). Without the
    // parked run's word (another process parked it, or a restart), converge again,
    // waiting for the apply here: every part of it is idempotent.
    const left = step === 'applied' ? await parked?.resume(job, token) : undefined
    if (!left) {
      await reportDetaching(deps, host, force)
      await detachInterfaces(deps, host, force)
      if (fabric) await deps.store.objects.requestDeletion('mr', host.name, force)
      else
        await leaveTopology(deps, job, token, host, force, step === 'converge' ? parked : undefined)
    }
    const isolating = fabric
      ? await isolateFabricHost(deps, host, force)
      : await isolate(deps, host, force)
    const withdrawing = fabric ? [] : await withdrawPublicIp(deps, host)
    await deps.checkpoint('detach:children-added')
    // Forced: the isolate is sent, but nobody waits for an agent that may be gone.
    await waitForChildren(job, token, deps.children, [
      ...(force ? [] : [isolating]),
      ...withdrawing,
    ])
  } else {
    await stillWaiting(job, token, deps.children)
  }
  return releaseWhenIsolated(deps, host, force, fabric)
}

/**
 * The host's interfaces go with it, however its detach came (its DELETE, its group's
 * deletion): each still its own is marked for deletion and its `host.detach` enqueued.
 */
async function detachInterfaces(deps: HandlerDeps, host: ManagedResource, force: boolean) {
  for (const { name } of host.spec.interfaces ?? []) {
    const own = await deps.store.hosts.get(`${host.name}-${name}`)
    if (!own || own.spec.interfaceOf !== host.name) continue
    await deps.store.objects.requestDeletion('mr', own.name, force)
    await deps.jobs.add(
      'host.detach',
      { host: own.name, specVersion: own.specVersion, force },
      jobId('host.detach', own.name, deletionVersion(own.specVersion, force)),
    )
  }
}

/** The agent could not isolate the host (its `isolate` failed for good). */
class IsolationFailed extends HydrazineError {
  constructor(dpuId: string, host: string, why: string) {
    super(
      'ISOLATION_FAILED',
      `DPU ${dpuId} could not isolate host ${host}: ${why}; it keeps its addresses: DELETE it again once the agent can, or with ?force=true (its DPU then isolates it before serving anyone else)`,
    )
  }
}

/** FRR could not withdraw the host's public IP: it is kept, not handed to another host. */
class PublicIpNotWithdrawn extends HydrazineError {
  constructor(host: string, why: string) {
    super('PUBLIC_IP_NOT_WITHDRAWN', `the public IP of ${host} could not be withdrawn: ${why}`)
  }
}

async function reportDetaching(deps: HandlerDeps, host: ManagedResource, force: boolean) {
  const dpuId = host.spec.dpu.id
  await setHostStatus(deps, host, {
    phase: 'Detaching',
    condition: {
      type: 'Isolated',
      status: 'False',
      reason: force ? 'ForceDetaching' : 'AwaitingAgent',
      message: force
        ? `detaching without waiting for DPU ${dpuId}`
        : `waiting for DPU ${dpuId} to unbind the host port`,
    },
  })
}

/**
 * The deletion mark is what takes the host out of its group's topology; the producer
 * sets it, and so does this step, for a job enqueued some other way. Then the group's
 * apply; with `parked`, while it waits for the pace of its central's commits the job
 * parks (step `applied`), its worker slot free.
 */
async function leaveTopology(
  deps: HandlerDeps,
  job: Job,
  token: string | undefined,
  host: ManagedResource,
  force: boolean,
  parked: ParkedWork<true> | undefined,
): Promise<void> {
  await deps.store.objects.requestDeletion('mr', host.name, force)
  const request = deps.groups.request(host.spec.resourceGroup)
  const left = request.applied.then(
    () => true as const,
    (error: unknown) => {
      if (error instanceof GroupGone) return true as const
      throw error
    },
  )
  if (!parked || !request.waits) {
    await left
    return
  }
  await parked.park(job, token, left, {
    record: () => job.updateData({ ...(job.data as object), step: 'applied' }),
    parkedAt: () => deps.checkpoint('detach:parked'),
  })
}

/**
 * `isolate` on the host's DPU, sent at once. Forced, the DPU is also marked: until its
 * agent acks the isolate, it must isolate the host before it serves anyone else.
 */
async function isolate(deps: HandlerDeps, host: ManagedResource, force: boolean) {
  const target = isolateTarget(host)
  const group = host.spec.resourceGroup
  if (force) {
    await deps.store.dpus.markNeedsIsolation(target.dpuId, {
      group,
      host: host.name,
      logicalPort: target.host.logicalPort,
      ...(target.host.hostPort ? { hostPort: target.host.hostPort } : {}),
      specVersion: host.specVersion,
    })
  }
  // The DPU still serves the host (its own rotation comes after this isolate is acked):
  // the credentials let it reach its group's SB if the chassis CA was replaced meanwhile.
  let credentials = await isolateCredentialsFor(deps, group, target.dpuId)
  await deps.checkpoint('detach:isolate-credentials', host.name)
  const ref = await addIsolate(deps, { ...target, group: { name: group, ...credentials } })
  // Another DPU leaving the group may replace its CA while this is sent. Read after the
  // send, the CA is the one sent, or the isolate is renewed with the new one; a CA
  // replaced later renews the isolate itself (`leaveGroupSouthbound`).
  for (let tries = 0; credentials.sbCa !== undefined && tries < 3; tries++) {
    if ((await southboundCaFor(deps, group)) === credentials.sbCa) break
    credentials = await isolateCredentialsFor(deps, group, target.dpuId)
    await renewIsolate(deps, { ...target, group: { name: group, ...credentials } })
  }
  return ref
}

async function withdrawPublicIp(deps: HandlerDeps, host: ManagedResource): Promise<ChildRef[]> {
  return releaseHeldPublicIps(deps, host)
}

/** The await step: addresses go last, once the host can no longer use them. */
async function releaseWhenIsolated(
  deps: HandlerDeps,
  host: ManagedResource,
  force: boolean,
  fabric: boolean,
): Promise<HostDetachResult> {
  const { spec } = host
  const key = { dpuId: spec.dpu.id, host: host.name, specVersion: host.specVersion }
  const logicalPort = topologyNames.hostPort(spec.resourceGroup, host.name)
  // A Fabric host: its prefixes withdrawn and its port out of the VRF, as its DPU says.
  const ack = fabric ? await fabricIsolateAck(deps, key) : await isolateAck(deps, key)
  // An "unbound" ack counts only when the Southbound agrees.
  const acked =
    ack.state === 'acked' &&
    ('withdrawn' in ack.value
      ? ack.value.withdrawn
      : ack.value.unbound &&
        !(await boundOnDpu(deps, spec.resourceGroup, logicalPort, spec.dpu.id).catch(
          (error: unknown) => {
            if (force) return false
            throw error
          },
        )))
  if (!force && ack.state === 'failed') {
    // The host cannot be shown isolated: it stays Detaching, saying why; a forced delete
    // finishes it (and its DPU isolates it before its next use).
    return failOrRetry(new IsolationFailed(spec.dpu.id, host.name, ack.reason), (error) =>
      setHostStatus(deps, host, {
        phase: 'Detaching',
        condition: {
          type: 'Isolated',
          status: 'False',
          reason: 'AgentFailed',
          message: error.message,
        },
      }),
    )
  }
  if (!force && !acked) {
    throw new AwaitingAck(`DPU ${spec.dpu.id} did not ack that ${host.name} is unbound`)
  }
  const released = await publicIpReleased(deps, host)
  if (released.state === 'failed') {
    return failOrRetry(new PublicIpNotWithdrawn(host.name, released.reason), (error) =>
      setHostStatus(deps, host, {
        phase: 'Detaching',
        condition: {
          type: 'Isolated',
          status: 'False',
          reason: 'WithdrawFailed',
          message: error.message,
        },
      }),
    )
  }
  await deps.checkpoint('detach:acked')
  // Forced, a Fabric host's DPU that did not ack may still announce what the host leaked
  // and its public IP: they stay held for that DPU's isolation, not given back. (An
  // Overlay host's public IP is a NAT rule of its group's NB, gone with the apply above,
  // and announced by Hydrazine's FRR, whose withdraw was waited for: its DPU announces
  // nothing of it, so it goes back to the pool at once.)
  const held = fabric && !acked ? await holdForIsolation(deps, host) : undefined
  if (!held) {
    // What a Fabric host leaked at the border: its DPU no longer marks it.
    await deps.store.fabricLeaks.release(host.name)
    await deps.ipam.releasePublicIp(host.name)
    await deps.ipam.releasePublicIp(host.name, 6)
    // A run cut after it held them, its DPU's ack come since: given back as well (a hold
    // is recorded before anything moves to it, so one that is not holds nothing).
    const owner = isolationHoldOwner(spec.dpu.id, host.name, host.specVersion)
    if (fabric && (await deps.store.dpus.holdsIsolation(spec.dpu.id, owner))) {
      await releaseIsolationHold(deps, spec.dpu.id, owner)
    }
  }
  const releasedIp = (await deps.ipam.release(spec.resourceGroup, host.name)) ?? null
  await deps.ipam.release(spec.resourceGroup, ipv6OwnerOf(host.name))
  await deps.checkpoint('detach:released')
  // Its DPU's last host of the group: the group's SB stops admitting the DPU. Before the
  // purge, so that a run cut in between does it again.
  const left = await leaveGroupSouthbound(deps, {
    dpuId: spec.dpu.id,
    group: spec.resourceGroup,
    leaving: host.name,
  })
  await deps.checkpoint('detach:left-southbound')
  await deps.store.hosts.purge(host.name, spec.resourceGroup, spec.dpu.id)
  // Last hosts of a group detached side by side on several DPUs each left replacing the
  // group's chassis CA to another: once its host is gone, the last of them to get here
  // replaces it (a group with a host still being detached is left as it is). What fails
  // here, reconcile does.
  if (left.deferred) await rotateForLeavers(deps, spec.resourceGroup).catch(() => undefined)
  void deps.groupHosts?.touch(spec.resourceGroup)
  // Its group's last host: the central stops after the grace period (centrals on demand).
  await centralMayStop(deps, spec.resourceGroup)
  return {
    host: host.name,
    phase: 'Isolated',
    agentAcked: acked,
    releasedIp,
    ...(held ? { heldUntilIsolated: [...new Set([...held.addresses, ...held.publicIps])] } : {}),
  }
}

/**
 * A forced detach of a Fabric host whose DPU did not ack its `isolate`: the addresses it
 * leaked and its public IPs are handed to the DPU's pending isolation (`isolation-holds.ts`),
 * given back once the DPU confirms it (`clearIsolatedStaleBindings`) or leaves the
 * inventory; recorded as an event of the DPU. Undefined when nothing needs holding (it
 * leaked nothing, or its DPU acked in the meantime).
 */
async function holdForIsolation(
  deps: HandlerDeps,
  host: ManagedResource,
): Promise<IsolationHold | undefined> {
  const dpuId = host.spec.dpu.id
  const hold = await holdUntilIsolated(deps, dpuId, host.name, host.specVersion)
  const key = { dpuId, host: host.name, specVersion: host.specVersion }
  // Its ack may have come, and been seen by a confirmation run before the hold was
  // recorded: nobody would give it back then.
  const ack = await fabricIsolateAck(deps, key)
  const confirmed = ack.state === 'acked' && ack.value.withdrawn
  if (confirmed || (hold.addresses.length === 0 && hold.publicIps.length === 0)) {
    await releaseIsolationHold(deps, dpuId, hold.owner)
    return undefined
  }
  await recordDpuEvent(
    deps.store,
    dpuId,
    {
      type: 'Warning',
      reason: 'HeldUntilIsolated',
      message: `host ${host.name} was detached without DPU ${dpuId}'s ack: ${heldList(hold)} held until DPU ${dpuId} confirms isolation of ${host.name} (or leaves the inventory)`,
    },
    { group: host.spec.resourceGroup },
  )
  return hold
}
