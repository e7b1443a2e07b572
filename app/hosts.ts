/**
 * The writes that converge: applying and deleting resource groups and managed resources
 * (hosts). Each is validated, stored (`specVersion` bumped only if the spec changed) and
 * its job enqueued with an id derived from the object and version; the same spec applied
 * again to a Failed object starts a new attempt. `HydrazineClient` (`producer.ts`) is
 * the door callers use; the checks before a write are `request-checks.ts` and, for a
 * host's interfaces, `host-interfaces.ts`.
 */
import type { Ipam } from '../lib/ipam/index.ts'
import { deletionVersion } from '../lib/jobs/index.ts'
import { type ControllerJobs, redriveGroup, redriveHost } from '../lib/jobs/redrive.ts'
import {
  type ManagedResource,
  type ManagedResourceRequest,
  type ResourceGroup,
  Rfc1123Label,
} from '../lib/state/objects.ts'
import { type Caller, placeHost } from '../lib/state/placement.ts'
import { DEFAULT_QUOTAS, limitsOf, type TenantQuota } from '../lib/state/quotas.ts'
import { type StateStore, StoreConflict } from '../lib/state/store.ts'
import type { ControllerQueue } from '../queues/producer.ts'
import { NotFoundError, ValidationError, validate } from './errors.ts'
import { type ClientPolicy, hostRequestOf, refuseOrphans, validGroupSpec } from './groups.ts'
import {
  checkInterfaces,
  type InterfaceDeps,
  interfaceNames,
  interfacesOf,
  refuseInterfaceChange,
} from './host-interfaces.ts'

export interface Accepted<T> {
  readonly object: T
  /** The job that converges it; absent when nothing changed and nothing was enqueued. */
  readonly jobId?: string
}

const OPERATOR: Caller = { kind: 'operator' }

/** The condition a re-driven object starts its new attempt with. */
function sameSpecAgain(type: string) {
  return {
    type,
    status: 'Unknown',
    reason: 'Retrying',
    message: 'the same spec was applied again while Failed: a new attempt started',
  } as const
}

export class ObjectWrites {
  readonly #store: StateStore
  readonly #queue: ControllerQueue
  readonly #policy: ClientPolicy

  readonly #addresses: Pick<Ipam, 'orphans'> | undefined

  constructor(deps: {
    readonly store: StateStore
    readonly queue: ControllerQueue
    readonly policy: ClientPolicy
    /** Refuses a group change that would orphan a held address (409) before it is stored. */
    readonly addresses?: Pick<Ipam, 'orphans'>
  }) {
    this.#store = deps.store
    this.#queue = deps.queue
    this.#policy = deps.policy
    this.#addresses = deps.addresses
  }

  /** The quota a write for `tenant` counts against. */
  #quotaOf(tenant: string): TenantQuota {
    return { tenant, limits: limitsOf(this.#policy.quotas ?? DEFAULT_QUOTAS, tenant) }
  }

  #redriveDeps(): { store: StateStore; jobs: ControllerJobs } {
    return { store: this.#store, jobs: this.#queue.jobs }
  }

  /** A group's spec stored; `group.create` enqueued when it changed or is tried again. */
  async applyGroup(name: string, spec: unknown): Promise<Accepted<ResourceGroup>> {
    const valid = validGroupSpec(name, spec, this.#policy)
    // IPAM's commit refuses the same atomically (the group Failed): this answers at once.
    if (this.#addresses) await refuseOrphans(this.#addresses, name, valid)
    const { limits } = this.#quotaOf(valid.tenantId)
    const { changed, object } = await this.#store.putGroup(name, valid, limits)
    if (!changed) {
      if (object.status.phase !== 'Failed') return { object }
      const id = await redriveGroup(this.#redriveDeps(), name, sameSpecAgain('OvnConfigured'))
      return { object: (await this.#store.getGroup(name)) ?? object, ...(id ? { jobId: id } : {}) }
    }
    const id = await this.#queue.converge('group.create', name, object.specVersion, {
      group: name,
      specVersion: object.specVersion,
    })
    return { object, jobId: id }
  }

  /** The group marked for deletion and `group.delete` enqueued. */
  async deleteGroup(
    name: string,
    options: { force?: boolean } = {},
  ): Promise<Accepted<ResourceGroup>> {
    validate(Rfc1123Label, name, 'name')
    const force = options.force ?? false
    const object = (await this.#store.requestDeletion('rg', name, force)) as
      | ResourceGroup
      | undefined
    if (!object) throw new NotFoundError('resource group', name)
    const version = deletionVersion(object.specVersion, force)
    const id = await this.#queue.deletion('group.delete', name, version, {
      group: name,
      force,
    })
    return { object, jobId: id }
  }

  /**
   * A host placed on its DPU from the inventory and stored; `host.attach` enqueued when
   * it changed or is tried again.
   */
  async applyHost(
    name: string,
    spec: unknown,
    options: { caller?: Caller } = {},
  ): Promise<Accepted<ManagedResource>> {
    const caller = options.caller ?? OPERATOR
    const { request, group } = await hostRequestOf(this.#store, name, spec, caller, this.#policy)
    const before = await this.#store.getHost(name)
    await refuseInterfaceChange(this.#store, before, name, 'change')
    const interfaces = interfacesOf(name, request)
    // Every interface must be placeable, alone and with the others, before anything is
    // written.
    if (interfaces.length > 0) {
      await checkInterfaces(this.#interfaceDeps(group), name, request, group, interfaces, caller)
    }
    const accepted = await this.#putHost(name, request, group, caller)
    const kept = new Set(interfaces.map((p) => p.name))
    for (const old of interfaceNames(before)) {
      if (!kept.has(old)) await this.#deleteInterface(old, name, false)
    }
    for (const port of interfaces) {
      await this.#putHost(port.name, port.request, port.group, caller, name)
    }
    return accepted
  }

  #interfaceDeps(group: ResourceGroup): InterfaceDeps {
    return { store: this.#store, policy: this.#policy, quota: this.#quotaOf(group.spec.tenantId) }
  }

  /**
   * Host `of`'s interface `name`, marked for deletion; nothing when it is gone already, or
   * when the name is now another object's (the interface was deleted with its group and
   * the name taken again): a host deletes only its own interfaces.
   */
  async #deleteInterface(name: string, of: string, force: boolean): Promise<void> {
    if ((await this.#store.getHost(name))?.spec.interfaceOf !== of) return
    await this.#deleteHost(name, force).catch((error: unknown) => {
      if (!(error instanceof NotFoundError)) throw error
    })
  }

  /**
   * The host (or, with `interfaceOf`, an interface's own ManagedResource) placed and
   * stored, `host.attach` enqueued when it changed or is tried again.
   */
  async #putHost(
    name: string,
    request: ManagedResourceRequest,
    group: ResourceGroup | undefined,
    caller: Caller,
    interfaceOf?: string,
  ): Promise<Accepted<ManagedResource>> {
    if (!group) throw new Error(`interface ${name} was not checked before it is written`)
    const quota = this.#quotaOf(group.spec.tenantId)
    // The DPU may change between the read and the write: the store refuses a spec placed
    // against an older inventory entry, and the request is placed again.
    for (let attempt = 1; ; attempt++) {
      let dpu = await this.#store.getDpu(request.dpu.id)
      const found = placeHost(request, group, dpu, caller)
      if (!found.ok) throw new ValidationError(found.issues)
      const placed = interfaceOf ? { ...found, spec: { ...found.spec, interfaceOf } } : found
      // Before the inventory changes; putHost checks again, atomically, as it writes (a
      // request that loses a race for the tenant's last slot may have added its DPU).
      await this.#store.checkHostQuotas(name, placed.spec, quota)
      if (placed.dpuChange)
        dpu = (await this.#store.putDpu(request.dpu.id, placed.dpuChange)).object
      if (!dpu) throw new Error(`DPU ${request.dpu.id} vanished while being placed`)
      try {
        const { changed, object } = await this.#store.putHost(
          name,
          placed.spec,
          dpu.specVersion,
          quota,
        )
        if (!changed) {
          if (object.status.phase !== 'Failed') return { object }
          const id = await redriveHost(this.#redriveDeps(), name, sameSpecAgain('Attached'))
          const current = (await this.#store.getHost(name)) ?? object
          return { object: current, ...(id ? { jobId: id } : {}) }
        }
        const id = await this.#queue.converge('host.attach', name, object.specVersion, {
          host: name,
          specVersion: object.specVersion,
        })
        return { object, jobId: id }
      } catch (error) {
        if (!(error instanceof StoreConflict && error.reason === 'Changed') || attempt >= 5) {
          throw error
        }
      }
    }
  }

  /** The host and its interfaces marked for deletion, and `host.detach` enqueued for each. */
  async deleteHost(
    name: string,
    options: { force?: boolean } = {},
  ): Promise<Accepted<ManagedResource>> {
    validate(Rfc1123Label, name, 'name')
    const force = options.force ?? false
    const host = await this.#store.getHost(name)
    await refuseInterfaceChange(this.#store, host, name, 'delete')
    const accepted = await this.#deleteHost(name, force)
    for (const port of interfaceNames(host)) await this.#deleteInterface(port, name, force)
    return accepted
  }

  async #deleteHost(name: string, force: boolean): Promise<Accepted<ManagedResource>> {
    const object = (await this.#store.requestDeletion('mr', name, force)) as
      | ManagedResource
      | undefined
    if (!object) throw new NotFoundError('managed resource', name)
    const version = deletionVersion(object.specVersion, force)
    const id = await this.#queue.deletion('host.detach', name, version, {
      host: name,
      specVersion: object.specVersion,
      force,
    })
    return { object, jobId: id }
  }
}
