/**
 * Orphans, as reconcile finds them: NB rows owned by groups the store does not have
 * (deleted, only from an NB of this store's epoch and a few groups at a time), and
 * centrals of such groups (reported, never deleted).
 */
import {
  claimStoreEpoch,
  deleteGroupTopology,
  groupsInNb,
  STORE_EPOCH_KEY,
} from '../../lib/ovn/index.ts'
import type { HandlerDeps } from './deps.ts'
import type { HeldOrphans } from './reconcile-report.ts'

/** What one orphan search works with and reports into. */
export interface OrphanSearch {
  /** This store's epoch: the NB must record it (or none, and then it records it). */
  readonly epoch: string
  /** Most orphan groups it deletes from this NB. */
  readonly max: number
  readonly removed: string[]
  readonly held: HeldOrphans[]
}

/**
 * Deletes the rows of groups the store does not have from one NB, adding each to
 * `removed` as it goes; starts no deletion once `signal` is aborted. Every deletion is
 * guarded:
 * - the NB must belong to this store (its recorded store epoch is this one's);
 * - no more than `max` groups at once (else none, reported `held`);
 * - the store is asked again right before each deletion: `known` is the run's first
 *   read, and a group created since (stored first, then applied) is not an orphan.
 */
export async function removeOrphanRows(
  deps: Pick<HandlerDeps, 'nb' | 'store'>,
  nb: string,
  known: ReadonlySet<string>,
  signal: AbortSignal,
  search: OrphanSearch,
): Promise<void> {
  const { client } = await deps.nb.get(nb)
  signal.throwIfAborted()
  const check = await claimStoreEpoch(client, search.epoch)
  const orphans: string[] = []
  for (const owner of await groupsInNb(client)) {
    if (!known.has(owner) && !(await deps.store.groups.get(owner))) orphans.push(owner)
  }
  if (orphans.length === 0) return
  if (check.state === 'mismatch') {
    search.held.push({
      nb,
      groups: orphans,
      reason: 'StoreEpochMismatch',
      message: `the NB belongs to store epoch ${check.recorded}, not this store's ${search.epoch}: this store may have lost its data. If it is really the NB's store, remove NB_Global external_ids ${STORE_EPOCH_KEY} and the next run adopts it`,
    })
    return
  }
  if (orphans.length > search.max) {
    search.held.push({
      nb,
      groups: orphans,
      reason: 'TooManyOrphans',
      message: `${orphans.length} groups have rows in NB and none in the store, more than the ${search.max} one run deletes: check the store before deleting them by hand`,
    })
    return
  }
  for (const owner of orphans) {
    signal.throwIfAborted()
    if (await deps.store.groups.get(owner)) continue
    await deleteGroupTopology(client, owner)
    search.removed.push(owner)
  }
}

/**
 * Centrals of groups the store does not have. Group deletion releases a central before it
 * purges the group, so these come from a store that lost data (a wrong `REDIS_URL`, a
 * truncated AOF) or files left by another run: they are reported, never deleted, and an
 * operator decides. Each is checked again, so a group created since the run began is not
 * reported.
 */
export async function findOrphanCentrals(
  deps: Pick<HandlerDeps, 'store' | 'ovn'>,
  known: ReadonlySet<string>,
): Promise<string[]> {
  const orphans: string[] = []
  for (const group of await deps.ovn.groups()) {
    if (known.has(group) || (await deps.store.groups.get(group))) continue
    orphans.push(group)
  }
  return orphans
}
