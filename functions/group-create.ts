import { type Job, UnrecoverableError } from 'bullmq'
import { HydrazineError } from '../lib/errors.ts'
import { GroupJob } from '../lib/jobs/index.ts'
import { type ResourceGroupStatus, setCondition } from '../lib/state/objects.ts'
import { type HandlerDeps, parsePayload } from './deps.ts'
import { applyGroup, networkSpecOf } from './group-state.ts'

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
export function createGroupCreate(
  deps: Pick<HandlerDeps, 'store' | 'ipam' | 'ovn' | 'nb' | 'fabric'>,
) {
  return async function groupCreate(job: Job): Promise<GroupCreateResult> {
    const { group: name } = parsePayload(GroupJob, job)
    const group = await deps.store.getGroup(name)
    if (!group) return { group: name, observedVersion: 0, ovnChanged: false, skipped: 'not found' }
    if (group.deletion) {
      return { group: name, observedVersion: 0, ovnChanged: false, skipped: 'being deleted' }
    }

    await deps.ipam.createNetwork(name, networkSpecOf(group)).catch(async (error: unknown) => {
      // A network IPAM refuses (a conflicting redefinition, an invalid extra subnet) will
      // not be accepted on a retry either: the group is Failed, with the reason.
      if (
        (error as { retryable?: unknown }).retryable === true ||
        !(error instanceof HydrazineError)
      ) {
        throw error
      }
      await deps.store.updateGroupStatus(name, (current) => ({
        ...current.status,
        phase: 'Failed',
        configsSynced: false,
        conditions: setCondition(current.status.conditions, {
          type: 'NetworkAllocated',
          status: 'False',
          reason: error.code,
          message: error.message,
        }),
      }))
      throw new UnrecoverableError(error.message)
    })
    const { endpoints, members, result } = await applyGroup(deps, group)

    await deps.store.updateGroupStatus(name, (current) => {
      if (current.status.observedVersion > group.specVersion) return undefined
      const conditions = setCondition(current.status.conditions, {
        type: 'OvnConfigured',
        status: 'True',
        reason: 'TopologyApplied',
        message: `logical switch and router of ${name} are in ${endpoints.service} OVN central`,
      })
      const next: ResourceGroupStatus = {
        ...current.status,
        phase: 'Ready',
        conditions,
        snatIPs: [...new Set(members.flatMap((m) => m.host.spec.dpu.ips.slice(1)))].sort(),
        managedResourceCount: members.length,
        softwareNetworkConfiguration: {
          ovnService: endpoints.service,
          logicalNetwork: `hz-${name}-ls`,
        },
        observedVersion: group.specVersion,
        configsSynced: true,
      }
      return next
    })
    return { group: name, observedVersion: group.specVersion, ovnChanged: result.changed }
  }
}
