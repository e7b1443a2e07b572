import type { Job } from 'bullmq'
import { HydrazineError } from '../lib/errors.ts'
import { CONTROLLER_QUEUE, GroupDeleteJob, jobId } from '../lib/jobs/index.ts'
import { implementationOf, setCondition } from '../lib/model/objects.ts'
import { deleteGroupTopology } from '../lib/ovn/index.ts'
import { onDemand } from './internal/central-demand.ts'
import type { ChildRef, HandlerDeps } from './internal/deps.ts'
import { failOrRetry, NotReady } from './internal/errors.ts'
import { oneAtATime, parsePayload, stepOf, stillWaiting, waitForChildren } from './internal/job.ts'
import { setGroupStatus } from './internal/status.ts'

export interface GroupDeleteResult {
  readonly group: string
  readonly deleted: boolean
  readonly hostsIsolated: number
  readonly skipped?: string
}

/**
 * `group.delete` (teardown, hosts first, the network last): reports the group
 * `Terminating`, detaches every host as a child job and waits until each is isolated; only
 * then removes the group's rows from NB, its IPAM network, its central and the object
 * itself (a Fabric group: its IPAM network, its VNI and VLAN id, and the object).
 */
export function createGroupDelete(deps: HandlerDeps) {
  return async function groupDelete(job: Job, token?: string): Promise<GroupDeleteResult> {
    const { group: name, force } = parsePayload(GroupDeleteJob, job)
    // One step at a time per group: a group.create under way ends before this one starts.
    return oneAtATime(deps.store, { job, token }, 'rg', name, () =>
      deleteGroup(deps, job, token, name, force),
    )
  }
}

/** The delete of one group, run while no other step (its create) works on it. */
async function deleteGroup(
  deps: HandlerDeps,
  job: Job,
  token: string | undefined,
  name: string,
  force: boolean,
): Promise<GroupDeleteResult> {
  const group = await deps.store.groups.get(name)
  if (!group) return { group: name, deleted: true, hostsIsolated: 0, skipped: 'not found' }

  if (stepOf(job) === 'converge') {
    await setGroupStatus(deps, name, (current) => ({
      ...current,
      phase: 'Terminating',
      configsSynced: false,
      conditions: setCondition(current.conditions, {
        type: 'Terminating',
        status: 'True',
        reason: 'IsolatingHosts',
        message: `isolating the hosts of ${name} before removing its network`,
      }),
    }))
    await deps.checkpoint('delete:terminating')
    const detaching = await detachEveryHost(deps, name, force)
    await deps.checkpoint('delete:children-added')
    await waitForChildren(job, token, deps.children, detaching)
  } else {
    await stillWaiting(job, token, deps.children)
  }

  await failIfAHostCannotBeIsolated(deps, job, name)
  const remaining = await deps.store.groups.memberNames(name)
  if (remaining.length > 0) {
    throw new NotReady(`hosts of ${name} are not isolated yet: ${remaining.join(', ')}`)
  }
  if (implementationOf(group.spec) === 'Fabric') {
    // No OVN central: its VNI and VLAN id go back to the pools, before the purge (a run
    // cut short after it would never come back to release them).
    await deleteIpamNetwork(deps, name)
    await deps.ipam.releaseFabricIds(name)
  } else {
    await deleteOverlayNetwork(deps, name)
  }
  const isolated = ((job.data as { awaiting?: unknown[] }).awaiting ?? []).length
  await deps.store.groups.purge(name, group.spec.tenantId)
  return { group: name, deleted: true, hostsIsolated: isolated }
}

/**
 * An Overlay group's rows removed from NB, its IPAM network, and its central released.
 * With centrals on demand the central is the group's own: releasing it removes its
 * databases with its rows, so none is started (an empty group's is not running) to
 * delete them first, and the group gives its central slot back.
 */
async function deleteOverlayNetwork(deps: HandlerDeps, name: string): Promise<void> {
  if (onDemand(deps)) {
    const running = (await deps.ovn.list()).find((central) => central.group === name)
    await deleteIpamNetwork(deps, name)
    await deps.store.centrals.forget(name)
    await deps.ovn.release(name)
    if (running) {
      await deps.nb.drop(running.nb)
      await deps.southbound.drop(running.sbController)
    }
    return
  }
  const endpoints = await deps.ovn.ensure(name)
  const { client, cache } = await deps.nb.get(endpoints.nb)
  await deleteGroupTopology(client, name, { cache })
  await deps.checkpoint('delete:topology-deleted')
  await deleteIpamNetwork(deps, name)
  await deps.ovn.release(name)
  // The group's own central is gone: so are the connections to it (a shared one stays).
  if (!(await deps.ovn.list()).some((central) => central.nb === endpoints.nb)) {
    await deps.nb.drop(endpoints.nb)
    await deps.southbound.drop(endpoints.sbController)
  }
}

/** The group's IPAM network deleted (already gone is fine). */
async function deleteIpamNetwork(deps: HandlerDeps, name: string): Promise<void> {
  await deps.ipam.deleteNetwork(name).catch((error: unknown) => {
    if ((error as { code?: unknown }).code !== 'NOT_FOUND') throw error
  })
  await deps.checkpoint('delete:network-deleted')
}

/**
 * A host whose detach failed for good (its DPU cannot show it isolated) holds the group:
 * the group says which and why, and a forced delete finishes it.
 */
async function failIfAHostCannotBeIsolated(deps: HandlerDeps, job: Job, group: string) {
  const awaiting = ((job.data as { awaiting?: ChildRef[] }).awaiting ?? []).filter(
    (r) => typeof r?.jobId === 'string',
  )
  for (const ref of awaiting) {
    const outcome = await deps.children.outcome(ref)
    if (outcome.state !== 'failed') continue
    await failOrRetry(new HostNotIsolated(group, ref.jobId, outcome.reason), (error) =>
      setGroupStatus(deps, group, (current) => ({
        ...current,
        conditions: setCondition(current.conditions, {
          type: 'Terminating',
          status: 'True',
          reason: 'HostNotIsolated',
          message: error.message,
        }),
      })),
    )
  }
}

/** A host of a group being deleted cannot be shown isolated. */
class HostNotIsolated extends HydrazineError {
  constructor(group: string, detachJob: string, why: string) {
    super(
      'HOST_NOT_ISOLATED',
      `resource group ${group} waits for a host its DPU cannot show isolated (${detachJob}: ${why}); DELETE the group again once the agent can, or with ?force=true`,
    )
  }
}

/** A `host.detach` child per host of the group, each marked for deletion first. */
async function detachEveryHost(
  deps: HandlerDeps,
  group: string,
  force: boolean,
): Promise<ChildRef[]> {
  const refs: ChildRef[] = []
  for (const host of await deps.store.hosts.list({ resourceGroup: group })) {
    await deps.store.objects.requestDeletion('mr', host.name, force)
    refs.push(
      await deps.children.add(
        CONTROLLER_QUEUE,
        'host.detach',
        { host: host.name, specVersion: host.specVersion, force },
        { jobId: jobId('host.detach', host.name, `${host.specVersion}${force ? '-force' : ''}`) },
      ),
    )
  }
  return refs
}
