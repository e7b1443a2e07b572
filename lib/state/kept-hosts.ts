/**
 * Sets of hosts kept decoded between reads (a group's members, a DPU's hosts): each host
 * is read again only once its revision changed, and only the most recently read sets
 * are kept.
 */

import type { ManagedResource } from '../model/objects.ts'
import type { KeptObject, ObjectRecords } from './object-records.ts'

/** Groups and DPUs whose hosts are kept decoded at most (the most recently read). */
const KEPT_SETS = 4096

export class KeptHostSets {
  readonly #records: ObjectRecords
  /** Per group (`rg:<name>`) and DPU (`dpu:<id>`), its hosts kept decoded. */
  readonly #sets = new Map<string, Map<string, KeptObject<ManagedResource>>>()

  constructor(records: ObjectRecords) {
    this.#records = records
  }

  /** Hosts `names`, read through the set of them kept under `set` (read-only objects). */
  async read(set: string, names: string[]): Promise<ManagedResource[]> {
    const kept = this.#sets.get(set) ?? new Map()
    const { objects, keep } = await this.#records.getManyKept<ManagedResource>('mr', names, kept)
    // Most recently read last; the least recently read set goes first when there are many.
    this.#sets.delete(set)
    if (keep.size > 0) this.#sets.set(set, keep)
    for (const old of this.#sets.keys()) {
      if (this.#sets.size <= KEPT_SETS) break
      this.#sets.delete(old)
    }
    return objects
  }
}
