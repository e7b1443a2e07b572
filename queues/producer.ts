/**
 * The typed producer client: what other systems (and Hydrazine's own HTTP and gRPC
 * ingress) import to ask for work. Every request is validated before anything is stored
 * or enqueued; a bad one is rejected with every invalid field named and changes nothing.
 * A valid one persists the desired spec (bumping `specVersion` only if it changed) and
 * enqueues the job that converges it, with a job id derived from the object and version.
 */
import type { Queue } from 'bullmq'
import * as v from 'valibot'
import {
  type ControllerJobs,
  queueJobs,
  redriveGroup,
  redriveHost,
} from '../functions/internal/redrive.ts'
import type { DpuCredentialIssuer, DpuCredentials } from '../lib/agent-protocol/credentials.ts'
import type { Heartbeats } from '../lib/agent-protocol/heartbeats.ts'
import type { Heartbeat } from '../lib/agent-protocol/index.ts'
import { HydrazineError } from '../lib/errors.ts'
import type { Ipam, PublicIpStatus } from '../lib/ipam/index.ts'
import { deletionVersion, JOB_OPTIONS, type JobName, JobSchemas, jobId } from '../lib/jobs/index.ts'
import type { ChangeFeed, ChangeListener } from '../lib/state/changes.ts'
import type { EventKind, ObjectEvent } from '../lib/state/events.ts'
import type { EventObjectKind } from '../lib/state/generations.ts'
import {
  type Dpu,
  DpuSpec,
  type ManagedResource,
  ManagedResourceRequest,
  PublicIpSpec,
  type ResourceGroup,
  ResourceGroupSpec,
  Rfc1123Label,
} from '../lib/state/objects.ts'
import type { Page, PageRequest } from '../lib/state/pages.ts'
import { type Caller, placeHost } from '../lib/state/placement.ts'
import { DEFAULT_QUOTAS, limitsOf, type Quotas, type TenantQuota } from '../lib/state/quotas.ts'
import { type StateStore, StoreConflict } from '../lib/state/store.ts'

/** The request is malformed; `issues` names every bad field (HTTP 400). */
export class ValidationError extends HydrazineError {
  constructor(readonly issues: readonly { path: string; message: string }[]) {
    super('INVALID', `invalid request: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`)
  }
}

/** This Hydrazine issues no DPU credentials (its Redis is not one it manages). */
export class CredentialsUnavailable extends HydrazineError {
  constructor() {
    super('CREDENTIALS_UNAVAILABLE', 'this Hydrazine cannot issue DPU credentials')
  }
}

/** The object does not exist (HTTP 404). */
export class NotFoundError extends HydrazineError {
  constructor(
    readonly kind: string,
    readonly objectName: string,
  ) {
    super('NOT_FOUND', `${kind} ${objectName} does not exist`)
  }
}

export interface Accepted<T> {
  readonly object: T
  /** The job that converges it; absent when nothing changed and nothing was enqueued. */
  readonly jobId?: string
}

export type { Caller }

/** The operator's rules every request is held to. */
export interface ClientPolicy {
  /** The DHCP servers a group may relay to (`HYDRAZINE_DHCP_SERVERS`). */
  readonly dhcpServers: readonly string[]
  /**
   * Per-tenant limits on groups, hosts and public IPs (`HYDRAZINE_QUOTAS`; default
   * `DEFAULT_QUOTAS`). They hold for an operator's request too: the quota is the tenant's.
   */
  readonly quotas?: Quotas
}

const OPERATOR: Caller = { kind: 'operator' }

/** Most field issues one refusal lists. */
export const MAX_ISSUES = 20

function validate<S extends v.GenericSchema>(
  schema: S,
  input: unknown,
  prefix = '',
): v.InferOutput<S> {
  const result = v.safeParse(schema, input)
  if (!result.success) {
    const issues = result.issues.map((i) => ({
      path: `${prefix}${v.getDotPath(i) ?? ''}` || '(body)',
      message: i.message,
    }))
    // A large bad body (thousands of bad items) gets a short answer, not one per item.
    const more = issues.length - MAX_ISSUES
    throw new ValidationError(
      more > 0
        ? [
            ...issues.slice(0, MAX_ISSUES),
            { path: '(body)', message: `and ${more} more invalid fields` },
          ]
        : issues,
    )
  }
  return result.output
}

/** The condition a re-driven object starts its new attempt with. */
function sameSpecAgain(type: string) {
  return {
    type,
    status: 'Unknown',
    reason: 'Retrying',
    message: 'the same spec was applied again while Failed: a new attempt started',
  } as const
}

/**
 * Hydrazine's client: every request another system (or Hydrazine's own HTTP and gRPC
 * ingress) makes goes through here — writes validated, stored and enqueued; reads of
 * the stored objects, the public IP pool and the DPUs' reports.
 *
 * @example
 * const client = new HydrazineClient({ store, queue, ipam, heartbeats, changes })
 * const { jobId } = await client.applyGroup('group-a', { tenantId: 't1', network: {…} })
 */
export class HydrazineClient {
  private readonly store: StateStore
  private readonly queue: Queue
  private readonly ipam: Ipam
  private readonly heartbeats: Heartbeats
  private readonly changes: ChangeFeed
  private readonly policy: ClientPolicy
  private readonly credentials: DpuCredentialIssuer | undefined

  constructor(deps: {
    readonly store: StateStore
    readonly queue: Queue
    readonly ipam: Ipam
    readonly heartbeats: Heartbeats
    readonly changes: ChangeFeed
    readonly policy?: ClientPolicy
    readonly credentials?: DpuCredentialIssuer
  }) {
    this.credentials = deps.credentials
    this.policy = deps.policy ?? { dhcpServers: [] }
    this.store = deps.store
    this.queue = deps.queue
    this.ipam = deps.ipam
    this.heartbeats = deps.heartbeats
    this.changes = deps.changes
  }

  /** The quota a write for `tenant` counts against. */
  #quotaOf(tenant: string): TenantQuota {
    return { tenant, limits: limitsOf(this.policy.quotas ?? DEFAULT_QUOTAS, tenant) }
  }

  #redriveDeps(): { store: StateStore; jobs: ControllerJobs } {
    return { store: this.store, jobs: queueJobs(this.queue) }
  }

  /**
   * Enqueues a deletion's job; when that job already failed for good (a re-DELETE after
   * the cause went away), the failed job is removed and the work runs again.
   */
  async #enqueueDeletion(name: JobName, object: string, version: string, data: object) {
    const id = jobId(name, object, version)
    if ((await this.queue.getJobState(id)) === 'failed') await this.queue.remove(id)
    return this.#enqueue(name, object, version, data)
  }

  async #enqueue(name: JobName, object: string, version: number | string, data: object) {
    const id = jobId(name, object, version)
    // The payload contract holds for our own jobs too: a handler would refuse it anyway.
    await this.queue.add(name, v.parse(JobSchemas[name], data), { ...JOB_OPTIONS, jobId: id })
    return id
  }

  /**
   * Creates or updates a ResourceGroup; enqueues `group.create` when the spec changed, or
   * when the same spec is applied again to a Failed group (a new attempt). A new group
   * past its tenant's `groups` quota is refused (QuotaExceeded): nothing stored or enqueued.
   */
  async applyGroup(name: string, spec: unknown): Promise<Accepted<ResourceGroup>> {
    validate(Rfc1123Label, name, 'name')
    const valid = validate(ResourceGroupSpec, spec)
    if (valid.dhcpServer !== undefined && !this.policy.dhcpServers.includes(valid.dhcpServer)) {
      throw new ValidationError([
        {
          path: 'dhcpServer',
          message:
            this.policy.dhcpServers.length === 0
              ? 'no DHCP servers are configured for relaying (HYDRAZINE_DHCP_SERVERS)'
              : `must be one of the operator's DHCP servers: ${this.policy.dhcpServers.join(', ')}`,
        },
      ])
    }
    const { limits } = this.#quotaOf(valid.tenantId)
    const { changed, object } = await this.store.putGroup(name, valid, limits)
    if (!changed) {
      if (object.status.phase !== 'Failed') return { object }
      const id = await redriveGroup(this.#redriveDeps(), name, sameSpecAgain('OvnConfigured'))
      return { object: (await this.store.getGroup(name)) ?? object, ...(id ? { jobId: id } : {}) }
    }
    const id = await this.#enqueue('group.create', name, object.specVersion, {
      group: name,
      specVersion: object.specVersion,
    })
    return { object, jobId: id }
  }

  /** Starts teardown (seed 003): hosts are isolated first, the network removed last. */
  async deleteGroup(
    name: string,
    options: { force?: boolean } = {},
  ): Promise<Accepted<ResourceGroup>> {
    validate(Rfc1123Label, name, 'name')
    const force = options.force ?? false
    const object = (await this.store.requestDeletion('rg', name, force)) as
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
   * Creates or updates a ManagedResource (a host); enqueues `host.attach` when it changed,
   * or when the same spec is applied again to a Failed host (a new attempt).
   * The host is placed on its DPU from the operator's inventory (`placeHost`): a tenant
   * names only an assigned DPU and one of its host ports. A new host past its tenant's
   * `hosts` quota, or one becoming PublicAccess past `publicIps`, is refused
   * (QuotaExceeded): nothing stored (the inventory included) or enqueued.
   */
  async applyHost(
    name: string,
    spec: unknown,
    options: { caller?: Caller } = {},
  ): Promise<Accepted<ManagedResource>> {
    validate(Rfc1123Label, name, 'name')
    const request = validate(ManagedResourceRequest, spec)
    const caller = options.caller ?? OPERATOR
    const group = await this.store.getGroup(request.resourceGroup)
    if (!group || (caller.kind === 'tenant' && group.spec.tenantId !== caller.tenant)) {
      throw new ValidationError([
        {
          path: 'resourceGroup',
          message: `resource group ${request.resourceGroup} does not exist`,
        },
      ])
    }
    if (group.deletion) {
      throw new StoreConflict(`resource group ${group.name} is being deleted`, 'Terminating')
    }
    const quota = this.#quotaOf(group.spec.tenantId)
    // The DPU may change between the read and the write: the store refuses a spec placed
    // against an older inventory entry, and the request is placed again.
    for (let attempt = 1; ; attempt++) {
      let dpu = await this.store.getDpu(request.dpu.id)
      const placed = placeHost(request, group, dpu, caller)
      if (!placed.ok) throw new ValidationError(placed.issues)
      // Before the inventory changes; putHost checks again, atomically, as it writes (a
      // request that loses a race for the tenant's last slot may have added its DPU).
      await this.store.checkHostQuotas(name, placed.spec, quota)
      if (placed.dpuChange) dpu = (await this.store.putDpu(request.dpu.id, placed.dpuChange)).object
      if (!dpu) throw new Error(`DPU ${request.dpu.id} vanished while being placed`)
      try {
        const { changed, object } = await this.store.putHost(
          name,
          placed.spec,
          dpu.specVersion,
          quota,
        )
        if (!changed) {
          if (object.status.phase !== 'Failed') return { object }
          const id = await redriveHost(this.#redriveDeps(), name, sameSpecAgain('Attached'))
          const current = (await this.store.getHost(name)) ?? object
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

  /** Detaches a host; it is isolated before its addresses are released. */
  async deleteHost(
    name: string,
    options: { force?: boolean } = {},
  ): Promise<Accepted<ManagedResource>> {
    validate(Rfc1123Label, name, 'name')
    const force = options.force ?? false
    const object = (await this.store.requestDeletion('mr', name, force)) as
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

  /** Adds or changes a DPU in the operator's inventory (operators only). */
  async applyDpu(id: string, spec: unknown): Promise<{ object: Dpu; changed: boolean }> {
    validate(Rfc1123Label, id, 'id')
    const valid = validate(DpuSpec, spec)
    const { changed, object } = await this.store.putDpu(id, valid)
    return { object, changed }
  }

  /** Removes a DPU from the inventory; refused (409) while it serves a host. Its credentials stop working. */
  async deleteDpu(id: string): Promise<void> {
    validate(Rfc1123Label, id, 'id')
    if (!(await this.store.getDpu(id))) throw new NotFoundError('DPU', id)
    await this.store.deleteDpu(id)
    // Gone from the inventory, it is no longer listed as a DPU once seen.
    await this.heartbeats.forget(id)
    await this.store.dpuHealth.remove(id)
    await this.credentials?.revoke(id)
  }

  /**
   * New credentials for a DPU of the inventory (operators only): a Redis user confined to
   * its own queue and heartbeat and, with a PKI, its certificate. The old ones stop working.
   * The answer is the only place the secrets appear.
   */
  async issueDpuCredentials(id: string): Promise<DpuCredentials> {
    validate(Rfc1123Label, id, 'id')
    if (!(await this.store.getDpu(id))) throw new NotFoundError('DPU', id)
    if (!this.credentials) throw new CredentialsUnavailable()
    return this.credentials.issue(id)
  }

  getDpu(id: string): Promise<Dpu | undefined> {
    return this.store.getDpu(id)
  }

  /** DPUs in the inventory, all or those assigned to one tenant. */
  listDpus(filter: { tenant?: string } = {}): Promise<Dpu[]> {
    return this.store.listDpus(filter)
  }

  /** The live hosts a DPU serves. */
  dpuHostNames(id: string): Promise<string[]> {
    return this.store.dpuHostNames(id)
  }

  /**
   * The last heartbeat of every DPU ever seen (silent ones included, until the DPU leaves
   * the inventory), sorted by id.
   */
  listHeartbeats(): Promise<Heartbeat[]> {
    return this.heartbeats.list()
  }

  /** Registers a public IP in the operator's pool (idempotent). */
  async registerPublicIp(ip: string): Promise<PublicIpStatus> {
    const valid = validate(PublicIpSpec, { ip })
    await this.ipam.registerPublicIp(valid.ip)
    return this.publicIp(valid.ip)
  }

  /** Removes a public IP from the pool; refused (409) while it is allocated. */
  async unregisterPublicIp(ip: string): Promise<void> {
    const valid = validate(PublicIpSpec, { ip })
    await this.publicIp(valid.ip)
    await this.ipam.unregisterPublicIp(valid.ip)
  }

  async publicIp(ip: string): Promise<PublicIpStatus> {
    const found = (await this.ipam.listPublicIps()).find((p) => p.ip === ip)
    if (!found) throw new NotFoundError('public IP', ip)
    return found
  }

  listPublicIps(): Promise<PublicIpStatus[]> {
    return this.ipam.listPublicIps()
  }

  // ── webhook deliveries ──

  /** Records a webhook delivery id; false when it was seen within `ttlS` (a redelivery). */
  rememberDelivery(id: string, ttlS: number): Promise<boolean> {
    return this.store.rememberDelivery(id, ttlS)
  }
  /** The generation of the newest webhook event applied for the object (0: none). */
  lastEventGeneration(kind: EventObjectKind, name: string): Promise<number> {
    return this.store.generations.last(kind, name)
  }
  /** Records that a webhook event of `generation` was applied for the object. */
  recordEventGeneration(kind: EventObjectKind, name: string, generation: number): Promise<void> {
    return this.store.generations.record(kind, name, generation)
  }
  /** Forgets a delivery id (its processing failed; a retry must run). */
  forgetDelivery(id: string): Promise<void> {
    return this.store.forgetDelivery(id)
  }

  // ── reads ──────────────────────────────────────────────────────────────────

  getGroup(name: string): Promise<ResourceGroup | undefined> {
    return this.store.getGroup(name)
  }
  listGroups(filter: { tenant?: string } = {}): Promise<ResourceGroup[]> {
    return this.store.listGroups(filter)
  }
  /** One page of groups by name (all, or one tenant's): see `lib/state/pages.ts`. */
  pageGroups(filter: { tenant?: string }, page: PageRequest): Promise<Page<ResourceGroup>> {
    return this.store.pages.groups(filter, page)
  }
  getHost(name: string): Promise<ManagedResource | undefined> {
    return this.store.getHost(name)
  }
  listHosts(filter: { resourceGroup?: string } = {}): Promise<ManagedResource[]> {
    return this.store.listHosts(filter)
  }
  /** One page of hosts by name: all, one group's, one tenant's, or both at once. */
  pageHosts(
    filter: { resourceGroup?: string; tenant?: string },
    page: PageRequest,
  ): Promise<Page<ManagedResource>> {
    return this.store.pages.hosts(filter, page)
  }
  /** An object's recent transitions and repairs, newest first. */
  events(kind: EventKind, name: string, limit?: number): Promise<ObjectEvent[]> {
    return this.store.events.list(kind, name, limit)
  }

  /**
   * Calls `listener` for every stored change from now on (through one shared
   * subscription); resolves once it is live, with the function that stops it.
   */
  watchChanges(listener: ChangeListener): Promise<() => void> {
    return this.changes.subscribe(listener)
  }
}
