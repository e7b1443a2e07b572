/**
 * The objects one request reads, each read once: a request's checks (tenancy, its group,
 * its placement, its interfaces) ask here, and the second ask of the same object gets the
 * first answer. One set per request; never shared between requests.
 */
import type { Dpu, ManagedResource, ResourceGroup } from '../lib/model/objects.ts'
import type { StateStore } from '../lib/state/store.ts'

/** What a request reads of the store. */
export type ReadStore = Pick<StateStore, 'hosts' | 'groups' | 'dpus'>

export interface RequestReads {
  host(name: string): Promise<ManagedResource | undefined>
  group(name: string): Promise<ResourceGroup | undefined>
  dpu(id: string): Promise<Dpu | undefined>
  /** Forgets the DPU read (it changed under the request, which places the host again). */
  forgetDpu(id: string): void
}

/**
 * @example
 * const reads = requestReads(store)
 * await reads.group('group-a') // read from Redis
 * await reads.group('group-a') // the same answer, not read again
 */
export function requestReads(store: ReadStore): RequestReads {
  const hosts = new Map<string, Promise<ManagedResource | undefined>>()
  const groups = new Map<string, Promise<ResourceGroup | undefined>>()
  const dpus = new Map<string, Promise<Dpu | undefined>>()
  const once = <T>(seen: Map<string, Promise<T>>, key: string, read: () => Promise<T>) => {
    const known = seen.get(key)
    if (known) return known
    const reading = read()
    seen.set(key, reading)
    return reading
  }
  return {
    host: (name) => once(hosts, name, () => store.hosts.get(name)),
    group: (name) => once(groups, name, () => store.groups.get(name)),
    dpu: (id) => once(dpus, id, () => store.dpus.get(id)),
    forgetDpu: (id) => dpus.delete(id),
  }
}
