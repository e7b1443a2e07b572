/**
 * Signalling DPU agents: the `configure` and `isolate` child jobs a handler adds on a
 * DPU's queue, in the protocol version that DPU's agent speaks, and reading their acks.
 * Job ids are deterministic (action, DPU, host, spec version, attempt), so adding twice is
 * harmless and an ack is always read from its own job.
 */
import {
  AgentJobName,
  agentJobId,
  agentQueueName,
  buildConfigurePayload,
  buildFabricConfigurePayload,
  buildFabricIsolatePayload,
  buildIsolatePayload,
  ConfigureAck,
  type ConfigureInput,
  FabricConfigureAck,
  type FabricConfigureInput,
  FabricIsolateAck,
  type FabricIsolateInput,
  IsolateAck,
  type IsolatePayloadV1,
} from '../../lib/agent-protocol/index.ts'
import type { ManagedResource } from '../../lib/model/objects.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import {
  heldList,
  parseIsolationHoldOwner,
  releaseIsolationHold,
} from '../../lib/state/isolation-holds.ts'
import type { ChildRef, HandlerDeps } from './deps.ts'
import { recordDpuEvent } from './dpu-events.ts'
import { type Ack, AwaitingAck, readAck } from './errors.ts'
import { optionalHostPort } from './host-port.ts'

type IsolateInput = Omit<IsolatePayloadV1, 'protocolVersion'>
interface AckKey {
  readonly dpuId: string
  readonly host: string
  readonly specVersion: number
  /** The attempt at this spec version whose job it is (default 1). */
  readonly attempt?: number
}

/** A job on its DPU's queue, its id from the payload and the attempt (the same on a re-run). */
function addAgentJob(
  deps: Pick<HandlerDeps, 'children'>,
  name: AgentJobName,
  payload: { dpuId: string; host: { name: string }; specVersion: number },
  attempt: number,
): Promise<ChildRef> {
  return deps.children.add(agentQueueName(payload.dpuId), name, payload, {
    jobId: agentJobId(name, payload, attempt),
  })
}

/** Asks the host's DPU to bind it (`configure`). */
export async function addConfigure(
  deps: Pick<HandlerDeps, 'children' | 'agents'>,
  input: ConfigureInput,
  attempt = 1,
): Promise<ChildRef> {
  const payload = buildConfigurePayload(await deps.agents.protocolFor(input.dpuId), input)
  return addAgentJob(deps, AgentJobName.configure, payload, attempt)
}

/** Asks a DPU to unbind a host (`isolate`). */
export async function addIsolate(
  deps: Pick<HandlerDeps, 'children' | 'agents'>,
  input: IsolateInput,
  attempt = 1,
): Promise<ChildRef> {
  const payload = buildIsolatePayload(await deps.agents.protocolFor(input.dpuId), input)
  return addAgentJob(deps, AgentJobName.isolate, payload, attempt)
}

/**
 * An `isolate` sent earlier and not yet finished takes `input` instead of what it carried
 * (the group's SB credentials, replaced since): its next attempt runs with it. False when
 * there is none waiting (never sent, or finished).
 */
export async function renewIsolate(
  deps: Pick<HandlerDeps, 'children' | 'agents'>,
  input: IsolateInput,
  attempt = 1,
): Promise<boolean> {
  const payload = buildIsolatePayload(await deps.agents.protocolFor(input.dpuId), input)
  return deps.children.renew(isolateRef(input, attempt), payload)
}

/** Where the `isolate` of `target` (this attempt) is, whether or not it was sent. */
export function isolateRef(target: Omit<IsolateInput, 'group'>, attempt = 1): ChildRef {
  const { dpuId, specVersion } = target
  return agentRef('isolate', { dpuId, host: target.host.name, specVersion, attempt })
}

/** What an Overlay host's `isolate` names: its DPU, spec version, and port. */
export function isolateTarget(host: ManagedResource): Omit<IsolateInput, 'group'> {
  const { spec } = host
  return {
    dpuId: spec.dpu.id,
    specVersion: host.specVersion,
    host: {
      name: host.name,
      logicalPort: topologyNames.hostPort(spec.resourceGroup, host.name),
      ...optionalHostPort(spec),
    },
  }
}

/** Asks the DPU of a Fabric group's host to put it in the group's VRF (`configure`, protocol 3). */
export async function addFabricConfigure(
  deps: Pick<HandlerDeps, 'children'>,
  input: FabricConfigureInput,
  attempt = 1,
): Promise<ChildRef> {
  const payload = buildFabricConfigurePayload(input)
  return addAgentJob(deps, AgentJobName.configure, payload, attempt)
}

/** Asks the DPU of a Fabric group's host to withdraw it and take it out of the VRF (`isolate`). */
export async function addFabricIsolate(
  deps: Pick<HandlerDeps, 'children'>,
  input: FabricIsolateInput,
  attempt = 1,
): Promise<ChildRef> {
  const payload = buildFabricIsolatePayload(input)
  return addAgentJob(deps, AgentJobName.isolate, payload, attempt)
}

/** The DPU's `configure` ack for a Fabric group's host at this spec version. */
export async function fabricConfigureAck(
  deps: Pick<HandlerDeps, 'children'>,
  key: AckKey,
): Promise<Ack<FabricConfigureAck>> {
  return fromItsDpu(
    key,
    await readAck(deps.children, FabricConfigureAck, agentRef('configure', key)),
  )
}

/** The DPU's `isolate` ack for a Fabric group's host at this spec version. */
export async function fabricIsolateAck(
  deps: Pick<HandlerDeps, 'children'>,
  key: AckKey,
): Promise<Ack<FabricIsolateAck>> {
  return fromItsDpu(key, await readAck(deps.children, FabricIsolateAck, agentRef('isolate', key)))
}

/** The DPU's `configure` ack for the host at this spec version. */
export async function configureAck(
  deps: Pick<HandlerDeps, 'children'>,
  key: AckKey,
): Promise<Ack<ConfigureAck>> {
  return fromItsDpu(key, await readAck(deps.children, ConfigureAck, agentRef('configure', key)))
}

/** The DPU's `isolate` ack for the host at this spec version. */
export async function isolateAck(
  deps: Pick<HandlerDeps, 'children'>,
  key: AckKey,
): Promise<Ack<IsolateAck>> {
  return fromItsDpu(key, await readAck(deps.children, IsolateAck, agentRef('isolate', key)))
}

/**
 * An ack counts only when it speaks for the DPU the job was sent to, at the job's spec
 * version, from the chassis named after that DPU (the name its certificate carries, which
 * OVN RBAC holds it to); anything else is refused as a failed ack, saying what was wrong.
 */
function fromItsDpu<T extends { dpuId: string; specVersion: number; chassis: string }>(
  key: AckKey,
  ack: Ack<T>,
): Ack<T> {
  if (ack.state !== 'acked') return ack
  const { dpuId, specVersion, chassis } = ack.value
  const wrong = [
    dpuId !== key.dpuId ? `dpuId ${dpuId}` : '',
    specVersion !== key.specVersion ? `specVersion ${specVersion}` : '',
    chassis !== key.dpuId ? `chassis ${chassis}` : '',
  ].filter(Boolean)
  if (wrong.length === 0) return ack
  return {
    state: 'failed',
    reason: `the ack for ${key.host} names ${wrong.join(', ')}; expected DPU and chassis ${key.dpuId} at specVersion ${key.specVersion}`,
  }
}

/**
 * Whether the group's Southbound binds the host's logical port to the DPU's chassis: what
 * a DPU's ack says is believed only when the SB agrees.
 */
export async function boundOnDpu(
  deps: Pick<HandlerDeps, 'ovn' | 'southbound'>,
  group: string,
  logicalPort: string,
  dpuId: string,
): Promise<boolean> {
  const { sbController } = await deps.ovn.ensure(group)
  return (await deps.southbound.boundChassis(sbController, logicalPort)) === dpuId
}

function agentRef(name: 'configure' | 'isolate', key: AckKey): ChildRef {
  return {
    queue: agentQueueName(key.dpuId),
    jobId: agentJobId(
      name,
      { dpuId: key.dpuId, host: { name: key.host }, specVersion: key.specVersion },
      key.attempt,
    ),
  }
}

/**
 * Isolation before reuse: hosts force-detached from this DPU while its agent was away may
 * still be bound there (an Overlay host) or in their group's VRF (a Fabric host's port and
 * announced prefixes); the agent unbinds them before it serves `attaching`. Only a binding
 * of that same host in that same group is left to its new `configure`, which replaces it;
 * one of the same host name in another group (another logical port, another VRF) is
 * isolated too.
 */
export async function isolateStaleBindings(
  deps: Pick<HandlerDeps, 'children' | 'agents' | 'store'>,
  dpuId: string,
  attaching: { readonly host: string; readonly group: string },
): Promise<ChildRef[]> {
  const refs: ChildRef[] = []
  for (const stale of await deps.store.dpus.needsIsolation(dpuId)) {
    if (stale.host === attaching.host && stale.group === attaching.group) continue
    const hostPort = stale.hostPort ? { hostPort: stale.hostPort } : {}
    refs.push(
      stale.fabric
        ? await addFabricIsolate(deps, {
            dpuId,
            specVersion: stale.specVersion,
            group: { name: stale.group, vni: stale.fabric.vni },
            host: { name: stale.host, ...hostPort, addresses: [...stale.fabric.addresses] },
          })
        : await addIsolate(deps, {
            dpuId,
            specVersion: stale.specVersion,
            group: { name: stale.group },
            host: { name: stale.host, logicalPort: stale.logicalPort, ...hostPort },
          }),
    )
  }
  return refs
}

/**
 * Waits (`AwaitingAck`) while this DPU's agent has not finished the `isolate` of a stale
 * binding, other than the one `attaching`'s configure replaces (`isolateStaleBindings`):
 * a host is not reported Ready on the DPU before, whichever run of its attach reads its
 * ack (an older job of a host of the same name, woken by its own child, reads the current
 * spec too).
 */
export async function isolatedBeforeServing(
  deps: Pick<HandlerDeps, 'children' | 'store'>,
  dpuId: string,
  attaching: { readonly host: string; readonly group: string },
): Promise<void> {
  const under: string[] = []
  for (const stale of await deps.store.dpus.needsIsolation(dpuId)) {
    if (stale.host === attaching.host && stale.group === attaching.group) continue
    const key = { dpuId, host: stale.host, specVersion: stale.specVersion }
    const outcome = await deps.children.outcome(agentRef('isolate', key))
    if (outcome.state === 'pending') under.push(`${stale.host} (group ${stale.group})`)
  }
  if (under.length > 0) {
    throw new AwaitingAck(
      `DPU ${dpuId} has not isolated ${under.join(', ')} yet: it serves ${attaching.host} after`,
    )
  }
}

/**
 * Stale bindings this DPU's agent acked as unbound (withdrawn) no longer need isolation.
 * What a Fabric host's forced detach left held for the DPU's isolation (its leaked
 * addresses, its public IPs: `isolation-holds.ts`) is given back first, each hold once its
 * own `isolate` is acked withdrawn, and recorded as an event of the DPU.
 */
export async function clearIsolatedStaleBindings(
  deps: Pick<HandlerDeps, 'children' | 'store' | 'ipam'>,
  dpuId: string,
): Promise<void> {
  const pending = await deps.store.dpus.needsIsolation(dpuId)
  for (const { owner } of await deps.store.dpus.isolationHolds(dpuId)) {
    const named = parseIsolationHoldOwner(owner)
    if (!named) continue
    const ack = await fabricIsolateAck(deps, named)
    if (ack.state !== 'acked' || !ack.value.withdrawn) continue
    const released = await releaseIsolationHold(deps, dpuId, owner)
    // Another run (an attach, admin sync, dpu.health) gave this hold back at the same time:
    // the one that dropped its record says so, once.
    if (!released.dropped) continue
    // The event is the held host's tenant's (its group's), not the DPU's next tenant's.
    const group = pending.find(
      (p) => p.host === named.host && p.specVersion === named.specVersion,
    )?.group
    await recordDpuEvent(
      deps.store,
      dpuId,
      {
        type: 'Normal',
        reason: 'IsolationConfirmed',
        message: `DPU ${dpuId} confirmed it withdrew host ${named.host}${group ? ` of group ${group}` : ''}: ${heldList(released)} given back`,
      },
      group ? { group } : {},
    )
  }
  for (const stale of pending) {
    const key = { dpuId, host: stale.host, specVersion: stale.specVersion }
    const done = stale.fabric
      ? await fabricIsolateAck(deps, key).then((a) => a.state === 'acked' && a.value.withdrawn)
      : await isolateAck(deps, key).then((a) => a.state === 'acked' && a.value.unbound)
    if (done) await deps.store.dpus.clearNeedsIsolation(dpuId, stale.mark)
  }
}
