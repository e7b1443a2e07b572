import { type Job, WaitingChildrenError } from 'bullmq'
import * as v from 'valibot'
import {
  AgentJobName,
  agentJobId,
  agentQueueName,
  buildIsolatePayload,
  IsolateAck,
} from '../lib/agent-protocol/index.ts'
import { CONTROLLER_QUEUE, HostDetachJob, jobId } from '../lib/jobs/index.ts'
import { type HandlerDeps, parentOf, parsePayload, stepOf } from './deps.ts'
import { applyGroup, logicalPortOf } from './group-state.ts'
import { setHostStatus } from './host-attach.ts'
import { optionalHostPort } from './host-port.ts'

export interface HostDetachResult {
  readonly host: string
  readonly phase: 'Isolated' | 'Detaching'
  /** True when the DPU agent acked that the host port is unbound. */
  readonly agentAcked: boolean
  readonly releasedIp: string | null
  readonly skipped?: string
}

/**
 * `host.detach`: takes a host off its group's network (seed 003 teardown order).
 *
 * 1. converge — report `Detaching`, drop the host's rows from NB (the group's topology
 *    without it), ask its DPU agent to `isolate` it and FRR to withdraw its public IP,
 *    and wait for both acks;
 * 2. await — only once the agent acked that the port is unbound: release its addresses
 *    (last) and remove the object. The host is reported `Isolated` in the job result.
 *
 * `force` does not wait for an agent that is gone: the DPU is marked as needing
 * isolation before it may serve another tenant.
 */
export function createHostDetach(deps: HandlerDeps) {
  return async function hostDetach(job: Job, token?: string): Promise<HostDetachResult> {
    const { host: name, force } = parsePayload(HostDetachJob, job)
    const host = await deps.store.getHost(name)
    if (!host) {
      return {
        host: name,
        phase: 'Isolated',
        agentAcked: false,
        releasedIp: null,
        skipped: 'not found',
      }
    }
    const spec = host.spec
    const dpuId = spec.dpu.id
    const natIp = spec.dpu.ips[1]

    if (stepOf(job) === 'converge') {
      await setHostStatus(deps, name, host.specVersion, {
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
      // The deletion mark is what takes the host out of its group's topology; the
      // producer sets it, and so does this handler, for a job enqueued some other way.
      await deps.store.requestDeletion('mr', name, force)
      const group = await deps.store.getGroup(spec.resourceGroup)
      if (group) await applyGroup(deps, group)

      const parent = parentOf(job)
      if (force) {
        await deps.store.markDpuNeedsIsolation(dpuId, {
          group: spec.resourceGroup,
          host: name,
          logicalPort: logicalPortOf(spec.resourceGroup, name),
          ...optionalHostPort(spec),
          specVersion: host.specVersion,
        })
      } else {
        const payload = buildIsolatePayload(await deps.agents.protocolFor(dpuId), {
          dpuId,
          specVersion: host.specVersion,
          group: { name: spec.resourceGroup },
          host: {
            name,
            logicalPort: logicalPortOf(spec.resourceGroup, name),
            ...optionalHostPort(spec),
          },
        })
        await deps.children.add(agentQueueName(dpuId), AgentJobName.isolate, payload, {
          jobId: agentJobId('isolate', payload),
          parent,
        })
      }
      const hasPublicIp = (await deps.ipam.listPublicIps()).some((p) => p.allocatedTo === name)
      if (hasPublicIp && natIp) {
        await deps.children.add(
          CONTROLLER_QUEUE,
          'publicip.release',
          { host: name, specVersion: host.specVersion, natIp },
          { jobId: jobId('publicip.release', name, host.specVersion), parent },
        )
      }
      await job.updateData({ ...(job.data as object), step: 'await' })
      if (token && (await job.moveToWaitingChildren(token))) throw new WaitingChildrenError()
    }

    const ack = v.safeParse(
      IsolateAck,
      await deps.children.result(
        agentQueueName(dpuId),
        agentJobId('isolate', { dpuId, host: { name }, specVersion: host.specVersion }),
      ),
    )
    const acked = ack.success && ack.output.unbound
    if (!force && !acked) throw new Error(`DPU ${dpuId} did not ack that ${name} is unbound`)

    // Addresses go last, once the host can no longer use them.
    deps.checkpoint('detach:acked')
    await deps.ipam.releasePublicIp(name)
    const releasedIp = (await deps.ipam.release(spec.resourceGroup, name)) ?? null
    deps.checkpoint('detach:released')
    await deps.store.purgeHost(name, spec.resourceGroup)
    return { host: name, phase: 'Isolated', agentAcked: acked, releasedIp }
  }
}
