import { type Job, UnrecoverableError, WaitingChildrenError } from 'bullmq'
import * as v from 'valibot'
import {
  AgentJobName,
  agentJobId,
  agentQueueName,
  buildConfigurePayload,
  buildIsolatePayload,
  ConfigureAck,
  IsolateAck,
} from '../lib/agent-protocol/index.ts'
import { CONTROLLER_QUEUE, HostJob, jobId } from '../lib/jobs/index.ts'
import { type ManagedResourceStatus, setCondition } from '../lib/state/objects.ts'
import { type HandlerDeps, parentOf, parsePayload, stepOf } from './deps.ts'
import {
  applyGroup,
  logicalPortOf,
  relayLogicalPortOf,
  relayMacOf,
  relayOwnerOf,
} from './group-state.ts'
import { optionalHostPort } from './host-port.ts'
import type { PublicIpResult } from './publicip-allocate.ts'

export interface HostAttachResult {
  readonly host: string
  readonly phase: ManagedResourceStatus['phase']
  readonly observedVersion: number
  readonly skipped?: string
}

/**
 * `host.attach`: puts a host on its group's network.
 *
 * 1. converge — allocate its address (owner-keyed, so a retry takes no second one), apply
 *    the group's whole topology to NB, then signal its DPU agent with a `configure` child
 *    job (and, for PublicAccess, a `publicip.allocate` child) and wait for them;
 * 2. await — read the acks and report the host Ready with `configsSynced`.
 *
 * While the agent has not acked, the host stays `Configuring` with a condition naming the
 * DPU; when the agent answers, even much later, the job resumes and the host turns Ready.
 */
export function createHostAttach(deps: HandlerDeps) {
  return async function hostAttach(job: Job, token?: string): Promise<HostAttachResult> {
    const { host: name } = parsePayload(HostJob, job)
    const host = await deps.store.getHost(name)
    if (!host) return { host: name, phase: 'Failed', observedVersion: 0, skipped: 'not found' }
    if (host.deletion) {
      return { host: name, phase: 'Detaching', observedVersion: 0, skipped: 'being detached' }
    }
    const spec = host.spec
    const dpuId = spec.dpu.id
    const logicalPort = logicalPortOf(spec.resourceGroup, name)

    if (stepOf(job) === 'converge') {
      const group = await deps.store.getGroup(spec.resourceGroup)
      if (!group || group.deletion) {
        await setHostStatus(deps, name, host.specVersion, {
          phase: 'Failed',
          condition: {
            type: 'Attached',
            status: 'False',
            reason: 'GroupMissing',
            message: `resource group ${spec.resourceGroup} does not exist or is being deleted`,
          },
        })
        throw new UnrecoverableError(`resource group ${spec.resourceGroup} is not available`)
      }
      if (group.status.observedVersion === 0) {
        // group.create has not run yet: retry with backoff.
        throw new Error(`resource group ${spec.resourceGroup} is still provisioning`)
      }

      const allocation = await deps.ipam
        .allocate(group.name, name, spec.hostIP ? { ip: spec.hostIP } : {})
        .catch((error: unknown) => failPermanently(deps, name, host.specVersion, error))
      // The group's relay on this DPU needs an address in the subnet (dhcrelay ignores
      // an interface without one): one per DPU, kept while the group lives.
      const relayIp = group.spec.dhcpServer
        ? (
            await deps.ipam
              .allocate(group.name, relayOwnerOf(dpuId))
              .catch((error: unknown) => failPermanently(deps, name, host.specVersion, error))
          ).ip
        : undefined
      if (spec.hostAccess === 'PublicAccess') {
        await deps.ipam
          .allocatePublicIp(name)
          .catch((error: unknown) => failPermanently(deps, name, host.specVersion, error))
      }
      deps.checkpoint('attach:allocated')
      const { endpoints } = await applyGroup(deps, group)
      deps.checkpoint('attach:topology-applied')

      const natIp = spec.hostAccess !== 'None' ? spec.dpu.ips[1] : undefined
      await setHostStatus(deps, name, host.specVersion, {
        phase: 'Configuring',
        hostAccessIPs: { hostIP: allocation.ip, ...(natIp ? { fabricIP: natIp } : {}) },
        logicalPortReference: { logicalPort, dpu: dpuId },
        condition: {
          type: 'AgentConfigured',
          status: 'False',
          reason: 'AwaitingAgent',
          message: `waiting for DPU ${dpuId} to ack configure of spec version ${host.specVersion}`,
        },
      })

      deps.checkpoint('attach:status-configuring')
      const version = await deps.agents.protocolFor(dpuId)
      const payload = buildConfigurePayload(version, {
        dpuId,
        specVersion: host.specVersion,
        group: {
          name: group.name,
          sbRemote: endpoints.sb,
          ...(group.spec.dhcpServer
            ? {
                dhcpServer: group.spec.dhcpServer,
                relay: {
                  logicalPort: relayLogicalPortOf(group.name, dpuId),
                  mac: relayMacOf(group.name, dpuId),
                  ...(relayIp
                    ? {
                        ip: relayIp,
                        prefixLength: Number(group.spec.network.cidr.split('/')[1] ?? 32),
                      }
                    : {}),
                },
              }
            : {}),
        },
        host: {
          name,
          logicalPort,
          mac: spec.hostMAC,
          ...optionalHostPort(spec),
        },
      })
      const parent = parentOf(job)
      // Isolation before reuse (seed 003): hosts force-detached from this DPU while its
      // agent was away may still be bound; the agent unbinds them along with this job.
      for (const stale of await deps.store.dpuNeedsIsolation(dpuId)) {
        if (stale.host === name) continue
        const isolate = buildIsolatePayload(version, {
          dpuId,
          specVersion: stale.specVersion,
          group: { name: stale.group },
          host: {
            name: stale.host,
            logicalPort: stale.logicalPort,
            ...(stale.hostPort ? { hostPort: stale.hostPort } : {}),
          },
        })
        await deps.children.add(agentQueueName(dpuId), AgentJobName.isolate, isolate, {
          jobId: agentJobId('isolate', isolate),
          parent,
        })
      }
      await deps.children.add(agentQueueName(dpuId), AgentJobName.configure, payload, {
        jobId: agentJobId('configure', payload),
        parent,
      })
      const heldPublicIp = (await deps.ipam.listPublicIps()).find((p) => p.allocatedTo === name)
      if (heldPublicIp && spec.hostAccess !== 'PublicAccess') {
        // Access was lowered: the DNAT is already gone from the topology; FRR withdraws
        // the /32 and the address goes back to the pool.
        await deps.children.add(
          CONTROLLER_QUEUE,
          'publicip.release',
          { host: name, specVersion: host.specVersion, ...(natIp ? { natIp } : {}) },
          { jobId: jobId('publicip.release', name, host.specVersion), parent },
        )
      }
      if (spec.hostAccess === 'PublicAccess' && natIp) {
        await deps.children.add(
          CONTROLLER_QUEUE,
          'publicip.allocate',
          { host: name, specVersion: host.specVersion, natIp },
          { jobId: jobId('publicip.allocate', name, host.specVersion), parent },
        )
      }
      deps.checkpoint('attach:children-added')
      await job.updateData({ ...(job.data as object), step: 'await' })
      if (token && (await job.moveToWaitingChildren(token))) throw new WaitingChildrenError()
    }

    // await: every child answered. Child ids are deterministic, so each ack is read from
    // its own job — also when a second run found the child already done under the first.
    const ack = v.safeParse(
      ConfigureAck,
      await deps.children.result(
        agentQueueName(dpuId),
        agentJobId('configure', { dpuId, host: { name }, specVersion: host.specVersion }),
      ),
    )
    if (!ack.success) throw new Error(`no configure ack from DPU ${dpuId} yet`)
    const announced =
      spec.hostAccess === 'PublicAccess'
        ? ((await deps.children.result(
            CONTROLLER_QUEUE,
            jobId('publicip.allocate', name, host.specVersion),
          )) as PublicIpResult | undefined)
        : undefined
    const publicIp = announced?.announced ? (announced.publicIp ?? undefined) : undefined

    // Stale bindings this DPU's agent acked as unbound no longer need isolation.
    for (const stale of await deps.store.dpuNeedsIsolation(dpuId)) {
      const id = agentJobId('isolate', {
        dpuId,
        host: { name: stale.host },
        specVersion: stale.specVersion,
      })
      const isolated = v.safeParse(
        IsolateAck,
        await deps.children.result(agentQueueName(dpuId), id),
      )
      if (isolated.success && isolated.output.unbound) {
        await deps.store.clearDpuNeedsIsolation(dpuId, stale.host)
      }
    }
    deps.checkpoint('attach:acked')
    const current = await deps.store.getHost(name)
    // Synced: OVN (applied above), the agent (port installed) and, for PublicAccess, FRR
    // (the /32 announced) all reflect this spec version, and no newer one exists.
    const synced =
      current?.specVersion === host.specVersion &&
      ack.output.ovnInstalled &&
      (spec.hostAccess !== 'PublicAccess' || typeof publicIp === 'string')
    await setHostStatus(deps, name, host.specVersion, {
      phase: synced ? 'Ready' : 'Configuring',
      configsSynced: synced,
      agent: {
        hostPort: ack.output.hostPort,
        ...(ack.output.relayPort ? { relayPort: ack.output.relayPort } : {}),
        ovnInstalled: ack.output.ovnInstalled,
        specVersion: ack.output.specVersion,
      },
      ...(typeof publicIp === 'string' ? { publicIp } : {}),
      ...(spec.hostAccess !== 'PublicAccess' ? { clearPublicIp: true } : {}),
      condition: {
        type: 'AgentConfigured',
        status: ack.output.ovnInstalled ? 'True' : 'False',
        reason: ack.output.ovnInstalled ? 'PortInstalled' : 'PortNotInstalled',
        message: `DPU ${dpuId} bound ${ack.output.hostPort}${
          ack.output.relayPort ? ` and relay ${ack.output.relayPort}` : ''
        } to ${logicalPort}`,
      },
    })
    return {
      host: name,
      phase: synced ? 'Ready' : 'Configuring',
      observedVersion: host.specVersion,
    }
  }
}

interface StatusChange {
  readonly phase: ManagedResourceStatus['phase']
  readonly condition: Parameters<typeof setCondition>[1]
  readonly configsSynced?: boolean
  readonly hostAccessIPs?: ManagedResourceStatus['hostAccessIPs']
  readonly logicalPortReference?: ManagedResourceStatus['logicalPortReference']
  readonly agent?: ManagedResourceStatus['agent']
  readonly publicIp?: string
  /** The host no longer has a public IP (its access was lowered). */
  readonly clearPublicIp?: boolean
}

/** Writes a host's status for `specVersion`, never over a newer version's status. */
export async function setHostStatus(
  deps: Pick<HandlerDeps, 'store'>,
  name: string,
  specVersion: number,
  change: StatusChange,
): Promise<void> {
  await deps.store.updateHostStatus(name, (current) => {
    const previous = current.status
    if (previous.observedVersion > specVersion) return undefined
    const { publicIP: previousPublicIp, ...kept } = previous.hostAccessIPs ?? {}
    const hostAccessIPs = {
      // New host and fabric IPs replace the old ones as a whole (a lowered access drops
      // the fabric IP); the public IP stays until it is released.
      ...(change.hostAccessIPs ? {} : kept),
      ...(previousPublicIp && !change.clearPublicIp ? { publicIP: previousPublicIp } : {}),
      ...change.hostAccessIPs,
      ...(change.publicIp ? { publicIP: change.publicIp } : {}),
    }
    return {
      ...previous,
      phase: change.phase,
      conditions: setCondition(previous.conditions, change.condition),
      ...(Object.keys(hostAccessIPs).length > 0 ? { hostAccessIPs } : {}),
      ...(change.logicalPortReference ? { logicalPortReference: change.logicalPortReference } : {}),
      ...(change.agent ? { agent: change.agent } : {}),
      observedVersion: change.configsSynced ? specVersion : previous.observedVersion,
      configsSynced: change.configsSynced ?? false,
    }
  })
}

/** A permanent error (bad address, conflict, exhausted pool): the host is Failed, no retry. */
async function failPermanently(
  deps: Pick<HandlerDeps, 'store'>,
  name: string,
  specVersion: number,
  error: unknown,
): Promise<never> {
  const retryable = (error as { retryable?: unknown }).retryable
  if (retryable === true || !(error instanceof Error) || !('code' in error)) throw error
  await setHostStatus(deps, name, specVersion, {
    phase: 'Failed',
    condition: {
      type: 'Attached',
      status: 'False',
      reason: String((error as { code: unknown }).code),
      message: error.message,
    },
  })
  throw new UnrecoverableError(error.message)
}
