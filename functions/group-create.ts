import type { Job } from 'bullmq'
import { GroupJob } from '../lib/jobs/index.ts'
import { CentralUnavailableError, topologyNames } from '../lib/ovn/index.ts'
import { setCondition } from '../lib/state/objects.ts'
import type { HandlerDeps } from './internal/deps.ts'
import { failOrRetry } from './internal/errors.ts'
import { parsePayload } from './internal/job.ts'
import { networkSpecOf, relayPortNameOf } from './internal/network.ts'
import { groupFailed, setGroupStatus } from './internal/status.ts'

export interface GroupCreateResult {
  readonly group: string
  readonly observedVersion: number
  readonly ovnChanged: boolean
  readonly skipped?: string
}

/**
 * `group.create`: makes the group's network exist — its OVN central (via the provider),
 * its IPAM network, and its distributed switch and router in NB — and reports it Ready.
 * Also the handler for a changed group spec: it converges, whatever was there.
 */
export function createGroupCreate(deps: Pick<HandlerDeps, 'store' | 'ipam' | 'groups'>) {
  return async function groupCreate(job: Job): Promise<GroupCreateResult> {
    const { group: name } = parsePayload(GroupJob, job)
    const group = await deps.store.getGroup(name)
    if (!group) return { group: name, observedVersion: 0, ovnChanged: false, skipped: 'not found' }
    if (group.deletion) {
      return { group: name, observedVersion: 0, ovnChanged: false, skipped: 'being deleted' }
    }

    // A network IPAM refuses (a conflicting redefinition, an invalid extra subnet) will
    // not be accepted on a retry either: the group is Failed, with the reason.
    await deps.ipam.createNetwork(name, networkSpecOf(group)).catch((error: unknown) =>
      failOrRetry(error, (e) =>
        setGroupStatus(deps, name, (current) =>
          groupFailed(current, {
            type: 'NetworkAllocated',
            status: 'False',
            reason: e.code,
            message: e.message,
          }),
        ),
      ),
    )
    const { endpoints, state, result } = await deps.groups
      .apply(name)
      .catch((error: unknown) => centralNotAnswering(deps, name, group.specVersion, error))
    const relayId = group.spec.dhcpServer ? await deps.store.relayIdOf(name) : undefined

    await setGroupStatus(
      deps,
      name,
      (current) => ({
        ...current,
        phase: 'Ready',
        conditions: setCondition(current.conditions, {
          type: 'OvnConfigured',
          status: 'True',
          reason: 'TopologyApplied',
          message: `logical switch and router of ${name} are in ${endpoints.service} OVN central`,
        }),
        snatIPs: [...new Set(state.members.flatMap((m) => m.host.spec.dpu.ips.slice(1)))].sort(),
        managedResourceCount: state.members.length,
        softwareNetworkConfiguration: {
          ovnService: endpoints.service,
          logicalNetwork: topologyNames.switch(name),
        },
        ovnCentral: { nb: endpoints.nb, sb: endpoints.sb },
        ...(relayId !== undefined ? { dhcpCircuitId: relayPortNameOf(relayId) } : {}),
        observedVersion: group.specVersion,
        configsSynced: true,
      }),
      group.specVersion,
    )
    return { group: name, observedVersion: group.specVersion, ovnChanged: result.changed }
  }
}

/**
 * The group's OVN central cannot answer (not started yet, not configured yet): the group
 * says why (`OvnConfigured=False`, the provider's reason) and the error goes on to the queue,
 * which retries a retryable one. Any other error goes on untouched.
 */
async function centralNotAnswering(
  deps: Pick<HandlerDeps, 'store'>,
  name: string,
  specVersion: number,
  error: unknown,
): Promise<never> {
  if (error instanceof CentralUnavailableError) {
    await setGroupStatus(
      deps,
      name,
      (current) => ({
        ...current,
        conditions: setCondition(current.conditions, {
          type: 'OvnConfigured',
          status: 'False',
          reason: error.reason,
          message: error.message,
        }),
      }),
      specVersion,
    )
  }
  throw error
}
