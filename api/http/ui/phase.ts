/**
 * The word the admin UI shows for an object's state, the same on a page as in a live
 * update (`live.ts`): its phase, except that an object whose deletion was asked for is
 * shown going away before its status says so.
 */
import type { ManagedResource, ResourceGroup } from '../../../lib/model/objects.ts'

export function groupPhase(group: ResourceGroup): string {
  return group.deletion ? 'Terminating' : group.status.phase
}

export function hostPhase(host: ManagedResource): string {
  if (host.deletion && host.status.phase !== 'Isolated') return 'Detaching'
  return host.status.phase
}

/** Phases (and DPU states) that need no one's attention. */
export const SETTLED: ReadonlySet<string> = new Set(['Ready', 'Online'])
