/**
 * The writes that converge: applying and deleting resource groups and managed resources
 * (hosts). Each is validated, stored (`specVersion` bumped only if the spec changed) and
 * its job enqueued with an id derived from the object and version; the same spec applied
 * again to a Failed object starts a new attempt. `HydrazineClient` (`producer.ts`) is
 * the door callers use.
 */
import type { Queue } from 'bullmq'
import * as v from 'valibot'
import { IPV6_OWNERS, networkSpecOf } from '../functions/internal/network.ts'
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
  type ManagedResourceSpec,
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
    const id = await this.#enqueueDeletion('host.detach', name, version, {
      host: name,
      specVersion: object.specVersion,
      force,
    })
    return { object, jobId: id }
  }
}

/** What checking a host's interfaces reads. */
export interface InterfaceDeps {
  readonly store: StateStore
  readonly policy: ClientPolicy
  /** The host's tenant's quota (its interfaces are in its tenant's groups). */
  readonly quota: TenantQuota
}

/**
 * Refuses (as the PUT would, naming `interfaces.<i>.<field>`) interfaces that cannot be
 * placed: each on its own, then together with the host — one DPU serving two groups,
 * one host port or NAT IP used twice, one DNS name twice in a group, the tenant's quota.
 * Each checked interface's `group` is filled in.
 */
export async function checkInterfaces(
  deps: InterfaceDeps,
  name: string,
  request: ManagedResourceRequest,
  group: ResourceGroup,
  interfaces: InterfacePort[],
  caller: Caller,
): Promise<void> {
  const host = placeHost(request, group, await deps.store.getDpu(request.dpu.id), caller)
  if (!host.ok) throw new ValidationError(host.issues)
  const ports: PlacedPort[] = [{ name, path: '', group: group.name, spec: host.spec }]
  for (const [i, port] of interfaces.entries()) {
    const placed = await checkInterface(deps, name, port, group, caller).catch((error: unknown) => {
      throw inInterface(error, i)
    })
    ports.push({
      name: port.name,
      path: `interfaces.${i}.`,
      group: placed.resourceGroup,
      spec: placed,
    })
  }
  const clash = portClash(ports)
  if (clash) throw new ValidationError([clash])
  await deps.store.checkHostsQuotas(ports, deps.quota)
}

/** Refuses what placing the interface `port` of host `name` alone would refuse. */
async function checkInterface(
  deps: InterfaceDeps,
  name: string,
  port: InterfacePort,
  hostGroup: ResourceGroup,
  caller: Caller,
): Promise<ManagedResourceSpec> {
  const { request, group } = await hostRequestOf(
    deps.store,
    port.name,
    port.request,
    caller,
    deps.policy,
  )
  if (group.spec.tenantId !== hostGroup.spec.tenantId) {
    throw new ValidationError([
      {
        path: 'resourceGroup',
        message: `must be a group of tenant ${hostGroup.spec.tenantId}, as the host's is`,
      },
    ])
  }
  port.group = group
  const existing = await deps.store.getHost(port.name)
  if (existing && existing.spec.interfaceOf !== name) {
    throw new StoreConflict(`${port.name} is already in use`, 'Claimed')
  }
  const placed = placeHost(request, group, await deps.store.getDpu(request.dpu.id), caller)
  if (!placed.ok) throw new ValidationError(placed.issues)
  const spec = { ...placed.spec, interfaceOf: name }
  await deps.store.checkHost(port.name, spec)
  return spec
}

/** An interface of a host being placed: its own ManagedResource's name and request. */
export interface InterfacePort {
  readonly name: string
  readonly request: ManagedResourceRequest
  /** Its group, once checked. */
  group?: ResourceGroup
}

/**
 * The interfaces a host request lists, each as the request of its own ManagedResource
 * `<host>-<name>`; a name that would not make a ManagedResource name is refused.
 */
export function interfacesOf(host: string, request: ManagedResourceRequest): InterfacePort[] {
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

/**
 * An interface's own ManagedResource changes only through its host (409 otherwise), and
 * is deleted only through it while the host lives and lists it: one whose host is gone,
 * being deleted, or no longer lists it may be deleted on its own.
 */
export async function refuseInterfaceChange(
  store: Pick<StateStore, 'getHost'>,
  existing: ManagedResource | undefined,
  name: string,
  change: 'change' | 'delete',
): Promise<void> {
  const host = existing?.spec.interfaceOf
  if (host === undefined) return
  if (change === 'delete') {
    const owner = await store.getHost(host)
    const listed = interfaceNames(owner).includes(name)
    if (!owner || owner.deletion || !listed) return
  }
  throw new StoreConflict(
    `${name} is an interface of host ${host}: ${change} it through ${host}`,
    'Owned',
  )
}

/** A port being placed, with the field path its request's fields are named under. */
interface PlacedPort {
  readonly name: string
  readonly path: string
  readonly group: string
  readonly spec: ManagedResourceSpec
}

/**
 * The first clash between ports of one host placed together, as a refusal naming the
 * later port's field; undefined when they fit. A DPU follows one group's central, a host
 * port and (with access) a DPU's NAT IP serve one port, a DNS name one host of a group.
 */
function portClash(ports: readonly PlacedPort[]): { path: string; message: string } | undefined {
  for (const [i, b] of ports.entries()) {
    for (const a of ports.slice(0, i)) {
      if (b.group === a.group && (b.spec.hostname ?? b.name) === (a.spec.hostname ?? a.name))
        return { path: `${b.path}hostname`, message: `is ${a.name}'s DNS name in ${b.group} too` }
      const dpu = b.spec.dpu.id
      if (dpu !== a.spec.dpu.id) continue
      if (b.group !== a.group)
        return {
          path: `${b.path}dpu.id`,
          message: `DPU ${dpu} serves ${a.name} in ${a.group}: a DPU follows one group, so ports in two groups need two DPUs`,
        }
      if (b.spec.identifier === a.spec.identifier)
        return { path: `${b.path}identifier`, message: `${a.name} uses DPU ${dpu}'s host port too` }
      if (b.spec.hostAccess !== 'None' && a.spec.hostAccess !== 'None')
        return {
          path: `${b.path}hostAccess`,
          message: `DPU ${dpu}'s NAT IP serves ${a.name} already: one port per DPU may have access`,
        }
    }
  }
  return undefined
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
  const orphans = await addresses.orphans(name, networkSpecOf({ spec }), {
    releaseDropped: IPV6_OWNERS,
  })
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
