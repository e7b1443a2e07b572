/**
 * Where the desired-state store keeps each thing in Redis: every key it uses, named in one
 * place. All of them start with the store's prefix, which holds one `{hash tag}`, so the
 * store lives in one Redis Cluster slot and its Lua scripts may touch any of them.
 *
 * @example
 * const keys = new StoreKeys('hz:{store}:')
 * keys.object('mr', 'host-1') // 'hz:{store}:mr:host-1'
 */
import { quotaKeys } from './quotas.ts'

/** The kinds of stored object: resource groups, managed resources (hosts) and DPUs. */
export type Kind = 'rg' | 'mr' | 'dpu'

export class StoreKeys {
  /** @param prefix prepended to every key; must contain a `{hash tag}`. */
  constructor(readonly prefix: string) {}

  /** An object's hash (spec, specVersion, status, deletion, …). */
  object(kind: Kind, name: string): string {
    return `${this.prefix}${kind}:${name}`
  }
  /** The names of every object of a kind. */
  index(kind: Kind): string {
    return `${this.prefix}${kind}:index`
  }
  /** An object's version counter: it outlives the object (see `put-spec.lua`). */
  version(kind: Kind, name: string): string {
    return `${this.prefix}version:${kind}:${name}`
  }
  /** The hosts of a group. */
  members(group: string): string {
    return `${this.prefix}rg:${group}:members`
  }
  /** The groups of a tenant (also what its `groups` quota counts). */
  tenantGroups(tenant: string): string {
    return quotaKeys(this.prefix, tenant).groups
  }
  /** The DPUs assigned to a tenant. */
  tenantDpus(tenant: string): string {
    return `${this.prefix}tenant:${tenant}:dpus`
  }
  /** The live hosts a DPU serves. */
  dpuHosts(dpuId: string): string {
    return `${this.prefix}dpu:${dpuId}:hosts`
  }

  /** The admin network's ports on a DPU (`lib/model/admin-network.ts`): not its tenant hosts. */
  dpuAdminPorts(dpuId: string): string {
    return `${this.prefix}dpu:${dpuId}:admin-ports`
  }
  /** The group whose own central a DPU's chassis follows. */
  dpuCentral(dpuId: string): string {
    return `${this.prefix}dpu:${dpuId}:central`
  }
  /** A DPU's certificate (PEM) from Hydrazine's CA, as last issued. */
  dpuIdentity(dpuId: string): string {
    return `${this.prefix}dpu:${dpuId}:identity`
  }
  /** Hosts force-detached from a DPU that it must still isolate. */
  needsIsolation(dpuId: string): string {
    return `${this.prefix}dpu:${dpuId}:needs-isolation`
  }
  /**
   * What a DPU may still announce for hosts force-detached from it (`isolation-holds.ts`):
   * hash hold owner -> host.
   */
  isolationHolds(dpuId: string): string {
    return `${this.prefix}dpu:${dpuId}:isolation-holds`
  }
  /** The DPUs that keep any such hold. */
  get dpusHolding(): string {
    return `${this.prefix}dpus:isolation-holds`
  }
  /**
   * An exclusive claim (its value: the holder's name), e.g. `natip:10.0.0.5`; `claim('')`
   * is the prefix every claim starts with.
   */
  claim(what: string): string {
    return `${this.prefix}claim:${what}`
  }
  /**
   * The groups holding one of the site's OVN central slots (`centrals.ts`): a running,
   * starting or idle central each, when centrals run on demand.
   */
  get centrals(): string {
    return `${this.prefix}centrals`
  }
  /** Per group holding a slot: since when (ms) it has had no host. */
  get centralsIdle(): string {
    return `${this.prefix}centrals:idle`
  }
  /** A webhook delivery id seen recently. */
  delivery(id: string): string {
    return `${this.prefix}delivery:${id}`
  }
  /** The change log: a stream of every change, its ids the resource versions (`changes.ts`). */
  get changes(): string {
    return `${this.prefix}changes`
  }
  /** The store's epoch. */
  get epoch(): string {
    return `${this.prefix}epoch`
  }
  /** The counter groups' DHCP relay ids come from. */
  get relayIds(): string {
    return `${this.prefix}relay-ids`
  }
  /** Set once the hosts stored before quotas existed were counted. */
  get hostsCountedForQuotas(): string {
    return `${this.prefix}quota-sets-v1`
  }
}
