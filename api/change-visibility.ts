/**
 * Which changes of the store's change log (`lib/state/changes.ts`) a caller may learn of,
 * shared by every live stream of changes — the gRPC `Watch` (`grpc/watch-stream.ts`) and
 * the admin UI's server-sent events (`http/ui/live.ts`) — so that both tell a tenant
 * exactly the same: its own objects as they are now, and the removal of its own objects.
 */

import type { Operations } from '../app/index.ts'
import type { ManagedResource, ResourceGroup } from '../lib/model/objects.ts'
import type { Change } from '../lib/state/changes.ts'

/** The kinds of object a change may name that callers watch: groups and hosts. */
export type WatchedKind = 'rg' | 'mr'

/** An object a change names, as the caller may read it now. */
export type VisibleObject =
  | { readonly kind: 'rg'; readonly object: ResourceGroup }
  | { readonly kind: 'mr'; readonly object: ManagedResource }

/**
 * The object a change names as the caller's operations may see it now: undefined when it
 * is gone, or is another tenant's (which looks exactly the same).
 */
export async function readVisible(
  ops: Pick<Operations, 'visibleGroup' | 'visibleHost'>,
  kind: WatchedKind,
  name: string,
): Promise<VisibleObject | undefined> {
  if (kind === 'rg') {
    const object = await ops.visibleGroup(name)
    return object && { kind, object }
  }
  const object = await ops.visibleHost(name)
  return object && { kind, object }
}

/**
 * Whether a caller of `tenant` (undefined: an operator) may learn of a removal it can no
 * longer read: an operator of every one, a tenant only of its own tenant's objects — it
 * learns nothing of other tenants' names.
 */
export function removalVisibleTo(removed: Change['removed'], tenant: string | undefined): boolean {
  return removed !== undefined && (tenant === undefined || removed.tenant === tenant)
}
