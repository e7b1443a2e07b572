/**
 * Which Hydrazine store an NB belongs to. Each store (Redis) has an epoch, made once when
 * it is first used; an NB records the epoch of the store whose rows it holds (in
 * `NB_Global` `external_ids`). A store that lost its data (a wrong `REDIS_URL`, a
 * truncated AOF) has a new epoch: its emptiness must not be read as "delete every group".
 */
import type { OvsdbClient } from './client.ts'
import { Database } from './database.ts'
import { type NbTables, nbSchema } from './schema/nb.generated.ts'
import { STORE_EPOCH_KEY } from './topology/names.ts'

const nb = new Database<NbTables>(nbSchema)

export { STORE_EPOCH_KEY } from './topology/names.ts'

/**
 * - `match`: the NB records this epoch;
 * - `claimed`: it recorded none, and now records this one;
 * - `mismatch`: it records another store's epoch (`recorded`).
 */
export type EpochCheck =
  | { readonly state: 'match' | 'claimed' }
  | { readonly state: 'mismatch'; readonly recorded: string }

/**
 * Compares the NB's recorded store epoch with `epoch`, recording it when the NB has none.
 *
 * @example
 * const check = await claimStoreEpoch(client, await store.epoch())
 * if (check.state === 'mismatch') … // delete nothing: this store is not the NB's
 */
export async function claimStoreEpoch(client: OvsdbClient, epoch: string): Promise<EpochCheck> {
  const [selected] = await client.transact(nb.name, [nb.select('NB_Global', [])])
  const row = nb.decodeRows('NB_Global', selected?.rows)[0]
  const recorded = row?.external_ids?.[STORE_EPOCH_KEY]
  if (recorded === epoch) return { state: 'match' }
  if (recorded !== undefined) return { state: 'mismatch', recorded }
  const ids = { [STORE_EPOCH_KEY]: epoch }
  await client.transact(nb.name, [
    row
      ? nb.mutate('NB_Global', [['_uuid', '==', row._uuid]], [['external_ids', 'insert', ids]])
      : nb.insert('NB_Global', { external_ids: ids }),
  ])
  return { state: 'claimed' }
}
