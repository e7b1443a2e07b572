/**
 * A host request, decided once: `prepare` settles tenancy, validation, placement and
 * quotas, reading the host, its group and its DPU once each; `apply` stores what was
 * prepared and enqueues `host.attach` (the same spec applied again to a Failed host starts
 * a new attempt); `plan` answers a dry run from the very same prepared request. Deleting
 * a host marks it and its interfaces and enqueues `host.detach` for each.
 */
import { deletionVersion } from '../lib/jobs/index.ts'
import { type ControllerJobs, redriveHost } from '../lib/jobs/redrive.ts'
import { attemptOf } from '../lib/model/attempts.ts'
import {
  type Dpu,
  implementationOf,
  type ManagedResource,
  Rfc1123Label,
} from '../lib/model/objects.ts'
import { type Caller, placeHost } from '../lib/model/placement.ts'
import type { ChangePlan, Planner } from '../lib/model/plans.ts'
import type { TenantQuota } from '../lib/model/quotas.ts'
import { type StateStore, StoreConflict } from '../lib/state/store.ts'
import type { ControllerQueue } from '../queues/producer.ts'
import { refuseAdminPort } from './admin-network.ts'
import { NotFoundError, ValidationError, validate } from './errors.ts'
import {
  checkInterfaces,
  interfaceNames,
  interfacesOf,
  type PlacedHost,
  refuseInterfaceChange,
} from './host-interfaces.ts'
import { hostRequestOf, refuseForeignHost, refuseTakenLeak } from './host-request.ts'
import { type Accepted, plannerOf, sameSpecAgain } from './outcomes.ts'
import { type ClientPolicy, quotaOf } from './policy.ts'
import { requestReads } from './reads.ts'

/** A host request that passed every check: what `apply` stores and `plan` plans. */
export interface PreparedHost {
  readonly caller: Caller
  /** The host and the spec it would have, placed on its DPU. */
  readonly host: PlacedHost
  /** Its interfaces, each its own ManagedResource, placed the same way. */
  readonly interfaces: readonly PlacedHost[]
  /** The host as stored before the request (undefined: a new host). */
  readonly before: ManagedResource | undefined
  /** The tenant's quota every write of the request counts against. */
  readonly quota: TenantQuota
}

export interface HostDeps {
  readonly store: StateStore
  readonly queue: ControllerQueue
  readonly policy: ClientPolicy
  /** Plans dry runs (`functions/plan.ts`); without one, `plan` refuses (DryRunUnavailable). */
  readonly planner?: Planner | undefined
}

const OPERATOR: Caller = { kind: 'operator' }

/** Tries of a write whose DPU changed between its placement and its write. */
const PLACEMENT_TRIES = 5

export class HostRequests {
  readonly #deps: HostDeps

  constructor(deps: HostDeps) {
    this.#deps = deps
  }

  #jobs(): { store: StateStore; jobs: ControllerJobs } {
    return { store: this.#deps.store, jobs: this.#deps.queue.jobs }
  }

  /**
   * Everything a host write decides, refused (nothing stored) at the first check it
   * fails: a tenant's name or group not its own, a malformed request, a group being
   * deleted, an interface change made other than through its host, a placement the
   * inventory does not allow, interfaces that clash, a full quota, a claimed port.
   */
  async prepare(caller: Caller, name: string, spec: unknown): Promise<PreparedHost> {
    const { store, policy } = this.#deps
    const reads = requestReads(store)
    await refuseForeignHost(reads, caller, name, spec)
    const { request, group } = await hostRequestOf(reads, name, spec, caller, policy)
    await refuseTakenLeak(store.fabricLeaks, name, request, group)
    const before = await reads.host(name)
    if (before) refuseAdminPort(undefined, before, await reads.group(before.spec.resourceGroup))
    await refuseInterfaceChange(reads.host, before, name, 'change')
    const ports = interfacesOf(name, request)
    const dpu = await reads.dpu(request.dpu.id)
    const placed = placeHost(request, group, dpu, caller, policy)
    if (!placed.ok) throw new ValidationError(placed.issues)
    const host: PlacedHost = {
      name,
      request,
      group,
      dpu,
      spec: placed.spec,
      ...(placed.dpuChange ? { dpuChange: placed.dpuChange } : {}),
    }
    const quota = quotaOf(policy, group.spec.tenantId)
    // Every interface must be placeable, alone and with the others, before anything is
    // written.
    const interfaces =
      ports.length > 0
        ? await checkInterfaces({ reads, store, policy, quota }, host, ports, caller)
        : []
    await store.hosts.checkQuotas(name, host.spec, quota)
    await store.hosts.check(name, host.spec, {
      existing: before,
      fabric: implementationOf(group.spec) === 'Fabric',
    })
    return { caller, host, interfaces, before, quota }
  }

  /**
   * The prepared host placed and stored, `host.attach` enqueued when it changed or is
   * tried again; then its interfaces, and the ones it no longer lists deleted.
   */
  async apply(prepared: PreparedHost): Promise<Accepted<ManagedResource>> {
    const written = new Map<string, Dpu>()
    const accepted = await this.#put(prepared, prepared.host, written)
    const kept = new Set(prepared.interfaces.map((p) => p.name))
    for (const old of interfaceNames(prepared.before)) {
      if (!kept.has(old)) await this.#deleteInterface(old, prepared.host.name, false)
    }
    for (const port of prepared.interfaces) await this.#put(prepared, port, written)
    return accepted
  }

  /** What applying the prepared host would change; nothing is stored or enqueued. */
  async plan(prepared: PreparedHost): Promise<ChangePlan> {
    const { host, interfaces } = prepared
    const plan = await plannerOf(this.#deps).host(host.name, host.spec)
    const notes = [
      ...plan.notes,
      ...(host.dpuChange
        ? [`the inventory would learn DPU ${host.request.dpu.id}'s fabric IPs`]
        : []),
      ...(interfaces.length > 0
        ? [
            `its interfaces are hosts of their own, each with its own plan: ${interfaces.map((i) => i.name).join(', ')}`,
          ]
        : []),
    ]
    return { ...plan, notes }
  }

  /** Prepares and applies: the write behind every host PUT. */
  async applyRequest(
    name: string,
    spec: unknown,
    caller: Caller = OPERATOR,
  ): Promise<Accepted<ManagedResource>> {
    return this.apply(await this.prepare(caller, name, spec))
  }

  /**
   * One placed host stored. The DPU may change between the read and the write: the store
   * refuses a spec placed against an older inventory entry, and the request is placed
   * again (as it is against a DPU an earlier write of this request taught something).
   */
  async #put(
    prepared: PreparedHost,
    port: PlacedHost,
    written: Map<string, Dpu>,
  ): Promise<Accepted<ManagedResource>> {
    const { store } = this.#deps
    const id = port.request.dpu.id
    let placed = port
    let fresh = port === prepared.host
    if (written.has(id)) placed = this.#placeAgain(prepared, port, written.get(id))
    for (let attempt = 1; ; attempt++) {
      // Before the inventory changes; hosts.put checks again, atomically, as it writes (a
      // request that loses a race for the tenant's last slot may have added its DPU).
      if (!fresh) await store.hosts.checkQuotas(port.name, placed.spec, prepared.quota)
      fresh = false
      const maxCentrals = this.#centralsCap(port.group)
      if (maxCentrals !== undefined) await store.centrals.check(port.group.name, maxCentrals)
      let dpu = placed.dpu
      if (placed.dpuChange) {
        dpu = (await store.dpus.put(id, placed.dpuChange)).object
        written.set(id, dpu)
      }
      if (!dpu) throw new Error(`DPU ${id} vanished while being placed`)
      try {
        return await this.#stored(port.name, placed, dpu, prepared.quota)
      } catch (error) {
        if (!(error instanceof StoreConflict && error.reason === 'Changed')) throw error
        if (attempt >= PLACEMENT_TRIES) throw error
      }
      placed = this.#placeAgain(prepared, port, await store.dpus.get(id))
    }
  }

  /**
   * The site's cap on running OVN centrals a host of `group` counts against: an Overlay
   * group's first host takes its central's slot (`HYDRAZINE_MAX_CENTRALS`); none else.
   */
  #centralsCap(group: PlacedHost['group']): number | undefined {
    const { maxCentrals } = this.#deps.policy
    return implementationOf(group.spec) === 'Overlay' ? maxCentrals : undefined
  }

  /** `port` placed against the DPU as it is now. */
  #placeAgain(prepared: PreparedHost, port: PlacedHost, dpu: Dpu | undefined): PlacedHost {
    const found = placeHost(port.request, port.group, dpu, prepared.caller, this.#deps.policy)
    if (!found.ok) throw new ValidationError(found.issues)
    const interfaceOf = port.spec.interfaceOf
    return {
      name: port.name,
      request: port.request,
      group: port.group,
      dpu,
      spec: interfaceOf ? { ...found.spec, interfaceOf } : found.spec,
      ...(found.dpuChange ? { dpuChange: found.dpuChange } : {}),
    }
  }

  /** The spec written; `host.attach` enqueued when it changed or is tried again. */
  async #stored(
    name: string,
    placed: PlacedHost,
    dpu: Dpu,
    quota: TenantQuota,
  ): Promise<Accepted<ManagedResource>> {
    const { store, queue } = this.#deps
    // Centrals on demand: the group's first host takes its central's slot, or is refused.
    const maxCentrals = this.#centralsCap(placed.group)
    const central = maxCentrals === undefined ? {} : { maxCentrals }
    // A Fabric group's host has no NAT: it claims no NAT IP.
    const fabric = implementationOf(placed.group.spec) === 'Fabric'
    const { changed, object } = await store.hosts.put(name, placed.spec, dpu.specVersion, quota, {
      ...central,
      fabric,
    })
    if (!changed) {
      if (object.status.phase === 'Attaching' && attemptOf(object.status) === 1) {
        // Stored by an earlier request that failed before its job was queued (Redis went
        // away between the two), and this is its client trying again: queued now.
        const id = await queue.convergeIfMissing('host.attach', name, object.specVersion, {
          host: name,
          specVersion: object.specVersion,
        })
        return { object, ...(id ? { jobId: id } : {}) }
      }
      if (object.status.phase !== 'Failed') return { object }
      const id = await redriveHost(this.#jobs(), name, sameSpecAgain('Attached'))
      const current = (await store.hosts.get(name)) ?? object
      return { object: current, ...(id ? { jobId: id } : {}) }
    }
    const id = await queue.converge('host.attach', name, object.specVersion, {
      host: name,
      specVersion: object.specVersion,
    })
    return { object, jobId: id }
  }

  /**
   * Host `of`'s interface `name`, marked for deletion; nothing when it is gone already, or
   * when the name is now another object's (the interface was deleted with its group and
   * the name taken again): a host deletes only its own interfaces.
   */
  async #deleteInterface(name: string, of: string, force: boolean): Promise<void> {
    if ((await this.#deps.store.hosts.get(name))?.spec.interfaceOf !== of) return
    await this.#delete(name, force).catch((error: unknown) => {
      if (!(error instanceof NotFoundError)) throw error
    })
  }

  /** The host and its interfaces marked for deletion, and `host.detach` enqueued for each. */
  async delete(
    name: string,
    options: { force?: boolean } = {},
  ): Promise<Accepted<ManagedResource>> {
    validate(Rfc1123Label, name, 'name')
    const force = options.force ?? false
    const host = await this.#deps.store.hosts.get(name)
    if (host)
      refuseAdminPort(undefined, host, await this.#deps.store.groups.get(host.spec.resourceGroup))
    await refuseInterfaceChange((n) => this.#deps.store.hosts.get(n), host, name, 'delete')
    const accepted = await this.#delete(name, force)
    for (const port of interfaceNames(host)) await this.#deleteInterface(port, name, force)
    return accepted
  }

  async #delete(name: string, force: boolean): Promise<Accepted<ManagedResource>> {
    const object = (await this.#deps.store.objects.requestDeletion('mr', name, force)) as
      | ManagedResource
      | undefined
    if (!object) throw new NotFoundError('managed resource', name)
    const version = deletionVersion(object.specVersion, force)
    const id = await this.#deps.queue.deletion('host.detach', name, version, {
      host: name,
      specVersion: object.specVersion,
      force,
    })
    return { object, jobId: id }
  }

  /** What deleting the host would change; refused where the DELETE itself would be. */
  async planDeletion(name: string): Promise<ChangePlan> {
    validate(Rfc1123Label, name, 'name')
    const { store } = this.#deps
    const host = await store.hosts.get(name)
    await refuseInterfaceChange((n) => store.hosts.get(n), host, name, 'delete')
    const plan = await plannerOf(this.#deps).hostDeletion(name)
    if (!plan) throw new NotFoundError('managed resource', name)
    const interfaces = (host?.spec.interfaces ?? []).map((i) => `${name}-${i.name}`)
    if (interfaces.length === 0) return plan
    return {
      ...plan,
      notes: [...plan.notes, `its interfaces would be deleted too: ${interfaces.join(', ')}`],
    }
  }
}
