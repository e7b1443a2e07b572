/**
 * A group's IPAM network, defined (or changed) from its spec, and how a step of
 * `group.create` fails the group: for an Overlay and a Fabric group alike.
 */
import { networkSpecOf } from '../../lib/ipam/group-network.ts'
import type { DefineOptions, Released } from '../../lib/ipam/index.ts'
import type { ResourceGroup } from '../../lib/model/objects.ts'
import type { HandlerDeps } from './deps.ts'
import { failOrRetry } from './errors.ts'
import { groupFailed, setGroupStatus } from './status.ts'

/**
 * Defines the group's network in IPAM; returns the addresses given back by `options`. A
 * network IPAM refuses (an overlapping or invalid extra subnet, one removed while a host
 * holds an address in it) will not be accepted on a retry either: the group is Failed,
 * `NetworkAllocated=False` with the reason.
 */
export async function defineGroupNetwork(
  deps: Pick<HandlerDeps, 'store' | 'ipam'>,
  group: ResourceGroup,
  attempt: number,
  options: DefineOptions = {},
): Promise<Released[]> {
  return deps.ipam
    .defineNetwork(group.name, networkSpecOf(group), options)
    .catch(groupFailsOn(deps, group, attempt, 'NetworkAllocated'))
}

/**
 * What `group.create` does with an error of a step that gives the group something (its
 * network, its Fabric identifiers): retried when it may clear, else the group is Failed,
 * `<type>=False` with the error's code and message, and the job is not retried.
 */
export function groupFailsOn(
  deps: Pick<HandlerDeps, 'store'>,
  group: ResourceGroup,
  attempt: number,
  type: string,
): (error: unknown) => Promise<never> {
  return (error) =>
    failOrRetry(error, (e) =>
      setGroupStatus(
        deps,
        group.name,
        (current) =>
          groupFailed(current, { type, status: 'False', reason: e.code, message: e.message }),
        group.specVersion,
        attempt,
      ),
    )
}
