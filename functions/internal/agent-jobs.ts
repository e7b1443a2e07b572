/**
 * Signalling DPU agents: the `configure` and `isolate` child jobs a handler adds on a
 * DPU's queue, in the protocol version that DPU's agent speaks, and reading their acks.
 * Job ids are deterministic (action, DPU, host, spec version), so adding twice is
 * harmless and an ack is always read from its own job.
 */
import {
  AgentJobName,
  agentJobId,
  agentQueueName,
  buildConfigurePayload,
  buildIsolatePayload,
  ConfigureAck,
  type ConfigureInput,
  IsolateAck,
  type IsolatePayloadV1,
} from '../../lib/agent-protocol/index.ts'
import type { HandlerDeps } from './deps.ts'
import { readAck } from './errors.ts'

type Parent = { id: string; queue: string }
type IsolateInput = Omit<IsolatePayloadV1, 'protocolVersion'>
interface AckKey {
  readonly dpuId: string
  readonly host: string
  readonly specVersion: number
}

/** Asks the host's DPU to bind it (`configure`), waited on by `parent`. */
export async function addConfigure(
  deps: Pick<HandlerDeps, 'children' | 'agents'>,
  parent: Parent,
  input: ConfigureInput,
): Promise<void> {
  const payload = buildConfigurePayload(await deps.agents.protocolFor(input.dpuId), input)
  await deps.children.add(agentQueueName(input.dpuId), AgentJobName.configure, payload, {
    jobId: agentJobId('configure', payload),
    parent,
  })
}

/** Asks a DPU to unbind a host (`isolate`), waited on by `parent`. */
export async function addIsolate(
  deps: Pick<HandlerDeps, 'children' | 'agents'>,
  parent: Parent,
  input: IsolateInput,
): Promise<void> {
  const payload = buildIsolatePayload(await deps.agents.protocolFor(input.dpuId), input)
  await deps.children.add(agentQueueName(input.dpuId), AgentJobName.isolate, payload, {
    jobId: agentJobId('isolate', payload),
    parent,
  })
}

/** The DPU's `configure` ack for the host at this spec version, once it answered. */
export function configureAck(
  deps: Pick<HandlerDeps, 'children'>,
  key: AckKey,
): Promise<ConfigureAck | undefined> {
  return readAck(deps.children, ConfigureAck, agentQueueName(key.dpuId), ackId('configure', key))
}

/** The DPU's `isolate` ack for the host at this spec version, once it answered. */
export function isolateAck(
  deps: Pick<HandlerDeps, 'children'>,
  key: AckKey,
): Promise<IsolateAck | undefined> {
  return readAck(deps.children, IsolateAck, agentQueueName(key.dpuId), ackId('isolate', key))
}

function ackId(name: 'configure' | 'isolate', key: AckKey): string {
  return agentJobId(name, {
    dpuId: key.dpuId,
    host: { name: key.host },
    specVersion: key.specVersion,
  })
}

/**
 * Isolation before reuse (seed 003): hosts force-detached from this DPU while its agent
 * was away may still be bound there; the agent unbinds them before it serves `except`.
 */
export async function isolateStaleBindings(
  deps: Pick<HandlerDeps, 'children' | 'agents' | 'store'>,
  parent: Parent,
  dpuId: string,
  except: string,
): Promise<void> {
  for (const stale of await deps.store.dpuNeedsIsolation(dpuId)) {
    if (stale.host === except) continue
    await addIsolate(deps, parent, {
      dpuId,
      specVersion: stale.specVersion,
      group: { name: stale.group },
      host: {
        name: stale.host,
        logicalPort: stale.logicalPort,
        ...(stale.hostPort ? { hostPort: stale.hostPort } : {}),
      },
    })
  }
}

/** Stale bindings this DPU's agent acked as unbound no longer need isolation. */
export async function clearIsolatedStaleBindings(
  deps: Pick<HandlerDeps, 'children' | 'store'>,
  dpuId: string,
): Promise<void> {
  for (const stale of await deps.store.dpuNeedsIsolation(dpuId)) {
    const ack = await isolateAck(deps, { dpuId, host: stale.host, specVersion: stale.specVersion })
    if (ack?.unbound) await deps.store.clearDpuNeedsIsolation(dpuId, stale.host)
  }
}
