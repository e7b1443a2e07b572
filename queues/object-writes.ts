/**
 * The writes that converge: applying and deleting resource groups and managed resources
 * (hosts). Each is validated, stored (`specVersion` bumped only if the spec changed) and
 * its job enqueued with an id derived from the object and version; the same spec applied
 * again to a Failed object starts a new attempt. `HydrazineClient` (`producer.ts`) is
 * the door callers use.
 */
import type { Queue } from 'bullmq'
import * as v from 'valibot'
import { isStaleIpv6, networkSpecOf } from '../functions/internal/network.ts'
import {
  type ControllerJobs,
  queueJobs,
  redriveGroup,
  redriveHost,
} from '../functions/internal/redrive.ts'
import type { Ipam } from '../lib/ipam/index.ts'
import { deletionVersion, JOB_OPTIONS, type JobName, JobSchemas, jobId } from '../lib/jobs/index.ts'
import { RESERVED_HOST_NAMES } from '../lib/ovn/index.ts'
import { hostAddressIssues } from '../lib/state/group-network.ts'
import {
  cidrContains,
  type ManagedResource,
  ManagedResourceRequest,
  type ResourceGroup,
  ResourceGroupSpec,
  Rfc1123Label,
} from '../lib/state/objects.ts'
import { type Caller, placeHost } from '../lib/state/placement.ts'
import { DEFAULT_QUOTAS, limitsOf, type Quotas, type TenantQuota } from '../lib/state/quotas.ts'
import { type StateStore, StoreConflict } from '../lib/state/store.ts'
import { AddressesHeld, NotFoundError, ValidationError, validate } from './client-errors.ts'

export interface Accepted<T> {
  readonly object: T
  /** The job that converges it; absent when nothing changed and nothing was enqueued. */
  readonly jobId?: string
}

/** The operator's rules every request is held to. */
export interface ClientPolicy {
  /** The DHCP servers a group may relay to (`HYDRAZINE_DHCP_SERVERS`). */
  readonly dhcpServers: readonly string[]
  /**
   * Per-tenant limits on groups, hosts and public IPs (`HYDRAZINE_QUOTAS`; default
   * `DEFAULT_QUOTAS`). They hold for an operator's request too: the quota is the tenant's.
   */
  readonly quotas?: Quotas
  /** The fabric has IPv6 (`HYDRAZINE_FABRIC_DUMMY_IP6`): IPv6-only hosts may have access. */
  readonly fabric6?: boolean
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
  readonly #queue: Queue
  readonly #policy: ClientPolicy

  readonly #addresses: Pick<Ipam, 'orphans'> | undefined

  constructor(deps: {
    readonly store: StateStore
    readonly queue: Queue
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
    return { store: this.#store, jobs: queueJobs(this.#queue) }
  }

  /**
   * Enqueues a deletion's job; when that job already failed for good (a re-DELETE after
   * the cause went away), the failed job is removed and the work runs again.
   */
  async #enqueueDeletion(name: JobName, object: string, version: string, data: object) {
    const id = jobId(name, object, version)
    if ((await this.#queue.getJobState(id)) === 'failed') await this.#queue.remove(id)
    return this.#enqueue(name, object, version, data)
  }

  async #enqueue(name: JobName, object: string, version: number | string, data: object) {
    const id = jobId(name, object, version)
    // The payload contract holds for our own jobs too: a handler would refuse it anyway.
    await this.#queue.add(name, v.parse(JobSchemas[name], data), { ...JOB_OPTIONS, jobId: id })
    return id
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
    const id = await this.#enqueue('group.create', name, object.specVersion, {
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
    const id = await this.#enqueueDeletion('group.delete', name, version, {
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
    refuseInterfaceChange(before, name)
    const interfaces = interfacesOf(name, request)
    // Every interface must be placeable before anything is written.
    for (const [i, port] of interfaces.entries()) {
      await this.#checkInterface(name, port, caller).catch((error: unknown) => {
        throw inInterface(error, i)
      })
    }
    const accepted = await this.#putHost(name, request, group, caller)
    for (const port of interfaces) {
      await this.#putHost(port.name, port.request, port.group, caller, name)
    }
    const kept = new Set(interfaces.map((p) => p.name))
    for (const old of interfaceNames(before)) {
      if (!kept.has(old)) await this.#deleteInterface(old, false)
    }
    return accepted
  }

  /** Refuses (as the PUT would) what placing the interface `port` of host `name` would. */
  async #checkInterface(name: string, port: InterfacePort, caller: Caller): Promise<void> {
    const { request, group } = await hostRequestOf(
      this.#store,
      port.name,
      port.request,
      caller,
      this.#policy,
    )
    port.group = group
    const existing = await this.#store.getHost(port.name)
    if (existing && existing.spec.interfaceOf !== name) {
      throw new StoreConflict(`${port.name} is already in use`, 'Claimed')
    }
    const placed = placeHost(request, group, await this.#store.getDpu(request.dpu.id), caller)
    if (!placed.ok) throw new ValidationError(placed.issues)
    await this.#store.checkHost(port.name, { ...placed.spec, interfaceOf: name })
  }

  /** An interface's own ManagedResource, marked for deletion (gone already: nothing). */
  async #deleteInterface(name: string, force: boolean): Promise<void> {
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
        const id = await this.#enqueue('host.attach', name, object.specVersion, {
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
    refuseInterfaceChange(host, name)
    const accepted = await this.#deleteHost(name, force)
    for (const port of interfaceNames(host)) await this.#deleteInterface(port, force)
    return accepted
  }

  async #deleteHost(name: string, force: boolean): Promise<Accepted<ManagedResource>> {
    const object = (await this.#store.requestDeletion('mr', name, force)) as
      | ManagedResource
      | undefined
    if (!object) throw new NotFoundError('managed resource', name)
    const version = deletionVersion(object.specVersion, force)
    const id = await this.#enqueueDeletion('host.detach', name, version, {
      host: name,
      specVersion: object.specVersion,
      force,
    })
    return { object, jobId: id }
  }
}

/** An interface of a host being placed: its own ManagedResource's name and request. */
interface InterfacePort {
  readonly name: string
  readonly request: ManagedResourceRequest
  /** Its group, once checked. */
  group?: ResourceGroup
}

/**
 * The interfaces a host request lists, each as the request of its own ManagedResource
 * `<host>-<name>`; a name that would not make a ManagedResource name is refused.
 */
function interfacesOf(host: string, request: ManagedResourceRequest): InterfacePort[] {
  return (request.interfaces ?? []).map(({ name, ...port }, i) => {
    const own = `${host}-${name}`
    if (!v.is(Rfc1123Label, own)) {
      throw new ValidationError([
        {
          path: `interfaces.${i}.name`,
          message: `${own} (host name, '-', interface name) must be a DNS label of at most 63 characters`,
        },
      ])
    }
    return { name: own, request: port }
  })
}

/** The ManagedResource names of the interfaces `host` lists (none when it is absent). */
function interfaceNames(host: ManagedResource | undefined): string[] {
  return (host?.spec.interfaces ?? []).map((i) => `${host?.name}-${i.name}`)
}

/** An interface's own ManagedResource changes only through its host (409 otherwise). */
export function refuseInterfaceChange(existing: ManagedResource | undefined, name: string): void {
  const host = existing?.spec.interfaceOf
  if (host === undefined) return
  throw new StoreConflict(
    `${name} is an interface of host ${host}: change or delete it through ${host}`,
    'Owned',
  )
}

/** An interface's refusal, its fields named under `interfaces.<i>`. */
function inInterface(error: unknown, i: number): unknown {
  if (!(error instanceof ValidationError)) return error
  return new ValidationError(
    error.issues.map((issue) => ({
      path: `interfaces.${i}.${issue.path}`,
      message: issue.message,
    })),
  )
}

/**
 * Refuses (AddressesHeld, 409) a group spec whose network would leave a held address
 * behind, naming the field: the gateway that would take it, or `extraSubnets` when its
 * subnet would go. A dry run refuses the same (`object-plans.ts`).
 */
export async function refuseOrphans(
  addresses: Pick<Ipam, 'orphans'>,
  name: string,
  spec: ResourceGroupSpec,
): Promise<void> {
  // A host's SLAAC address follows network6: a moved or removed one gives it back.
  const orphans = (await addresses.orphans(name, networkSpecOf({ spec }))).filter(
    (o) => !isStaleIpv6(o.owner, o.ip, spec.network6),
  )
  if (orphans.length === 0) return
  const subnets = [
    ...(spec.network ? [{ cidr: spec.network.cidr, path: 'network.gateway' }] : []),
    ...(spec.extraSubnets ?? []).map((s, i) => ({
      cidr: s.cidr,
      path: `extraSubnets.${i}.gateway`,
    })),
    ...(spec.network6 ? [{ cidr: spec.network6.cidr, path: 'network6.gateway' }] : []),
  ]
  throw new AddressesHeld(
    orphans.map(({ ip, owner }) => {
      const subnet = subnets.find((s) => cidrContains(s.cidr, ip))
      const what = subnet ? 'would be the gateway' : 'lies in no subnet of the new spec'
      const path = subnet?.path ?? (ip.includes(':') ? 'network6' : 'extraSubnets')
      return { path, message: `${ip} is held by ${owner} and ${what}` }
    }),
  )
}

/** A group's spec validated, its DHCP server one the operator relays to. */
export function validGroupSpec(name: string, spec: unknown, policy: ClientPolicy) {
  validate(Rfc1123Label, name, 'name')
  const valid = validate(ResourceGroupSpec, spec)
  if (valid.dhcpServer !== undefined && !policy.dhcpServers.includes(valid.dhcpServer)) {
    throw new ValidationError([
      {
        path: 'dhcpServer',
        message:
          policy.dhcpServers.length === 0
            ? 'no DHCP servers are configured for relaying (HYDRAZINE_DHCP_SERVERS)'
            : `must be one of the operator's DHCP servers: ${policy.dhcpServers.join(', ')}`,
      },
    ])
  }
  return valid
}

/** A host request validated, with its group: one the caller may see and not being deleted. */
export async function hostRequestOf(
  store: StateStore,
  name: string,
  spec: unknown,
  caller: Caller,
  policy: Pick<ClientPolicy, 'fabric6'> = {},
): Promise<{ request: ManagedResourceRequest; group: ResourceGroup }> {
  validate(Rfc1123Label, name, 'name')
  if (RESERVED_HOST_NAMES.has(name)) {
    throw new ValidationError([
      { path: 'name', message: `${name} is reserved for the group's router link; pick another` },
    ])
  }
  const request = validate(ManagedResourceRequest, spec)
  const group = await store.getGroup(request.resourceGroup)
  if (!group || (caller.kind === 'tenant' && group.spec.tenantId !== caller.tenant)) {
    throw new ValidationError([
      { path: 'resourceGroup', message: `resource group ${request.resourceGroup} does not exist` },
    ])
  }
  if (group.deletion) {
    throw new StoreConflict(`resource group ${group.name} is being deleted`, 'Terminating')
  }
  const issues = hostAddressIssues(
    request,
    { ...group.spec, name: group.name },
    policy.fabric6 ?? false,
  )
  if (issues.length > 0) {
    throw new ValidationError(issues.map((i) => ({ path: i.path.join('.'), message: i.message })))
  }
  return { request, group }
}
