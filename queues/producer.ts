/**
 * The typed producer client: what other systems (and Hydrazine's own HTTP and gRPC
 * ingress) import to ask for work. Every request is validated before anything is stored
 * or enqueued; a bad one is rejected with every invalid field named and changes nothing.
 * A valid one persists the desired spec (bumping `specVersion` only if it changed) and
 * enqueues the job that converges it, with a job id derived from the object and version.
 */
import type { JobsOptions, Queue } from 'bullmq'
import * as v from 'valibot'
import type { Heartbeats } from '../lib/agent-protocol/heartbeats.ts'
import type { Heartbeat } from '../lib/agent-protocol/index.ts'
import { HydrazineError } from '../lib/errors.ts'
import type { Ipam, PublicIpStatus } from '../lib/ipam/index.ts'
import { type JobName, JobSchemas, jobId } from '../lib/jobs/index.ts'
import type { ChangeFeed, ChangeListener } from '../lib/state/changes.ts'
import {
  type ManagedResource,
  ManagedResourceSpec,
  PublicIpSpec,
  type ResourceGroup,
  ResourceGroupSpec,
  Rfc1123Label,
} from '../lib/state/objects.ts'
import { type StateStore, StoreConflict } from '../lib/state/store.ts'

/** The request is malformed; `issues` names every bad field (HTTP 400). */
export class ValidationError extends HydrazineError {
  constructor(readonly issues: readonly { path: string; message: string }[]) {
    super('INVALID', `invalid request: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`)
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

const JOB_OPTIONS: JobsOptions = {
  attempts: 12,
  backoff: { type: 'exponential', delay: 500 },
  removeOnComplete: { age: 24 * 3600, count: 10_000 },
  removeOnFail: { age: 7 * 24 * 3600 },
}

function validate<S extends v.GenericSchema>(
  schema: S,
  input: unknown,
  prefix = '',
): v.InferOutput<S> {
  const result = v.safeParse(schema, input)
  if (!result.success) {
    throw new ValidationError(
      result.issues.map((i) => ({
        path: `${prefix}${v.getDotPath(i) ?? ''}` || '(body)',
        message: i.message,
      })),
    )
  }
  return result.output
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

  constructor(deps: {
    readonly store: StateStore
    readonly queue: Queue
    readonly ipam: Ipam
    readonly heartbeats: Heartbeats
    readonly changes: ChangeFeed
  }) {
    this.store = deps.store
    this.queue = deps.queue
    this.ipam = deps.ipam
    this.heartbeats = deps.heartbeats
    this.changes = deps.changes
  }

  async #enqueue(name: JobName, object: string, version: number | string, data: object) {
    const id = jobId(name, object, version)
    // The payload contract holds for our own jobs too: a handler would refuse it anyway.
    await this.queue.add(name, v.parse(JobSchemas[name], data), { ...JOB_OPTIONS, jobId: id })
    return id
  }

  /** Creates or updates a ResourceGroup; enqueues `group.create` when the spec changed. */
  async applyGroup(name: string, spec: unknown): Promise<Accepted<ResourceGroup>> {
    validate(Rfc1123Label, name, 'name')
    const valid = validate(ResourceGroupSpec, spec)
    const { changed, object } = await this.store.putGroup(name, valid)
    if (!changed) return { object }
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
    const version = `${object.specVersion}${force ? '-force' : ''}`
    const id = await this.#enqueue('group.delete', name, version, {
      group: name,
      force,
    })
    return { object, jobId: id }
  }

  /** Creates or updates a ManagedResource (a host); enqueues `host.attach` when it changed. */
  async applyHost(name: string, spec: unknown): Promise<Accepted<ManagedResource>> {
    validate(Rfc1123Label, name, 'name')
    const valid = validate(ManagedResourceSpec, spec)
    const group = await this.store.getGroup(valid.resourceGroup)
    if (!group) {
      throw new ValidationError([
        { path: 'resourceGroup', message: `resource group ${valid.resourceGroup} does not exist` },
      ])
    }
    if (group.deletion) {
      throw new StoreConflict(`resource group ${group.name} is being deleted`, 'Terminating')
    }
    const { changed, object } = await this.store.putHost(name, valid)
    if (!changed) return { object }
    const id = await this.#enqueue('host.attach', name, object.specVersion, {
      host: name,
      specVersion: object.specVersion,
    })
    return { object, jobId: id }
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
    const version = `${object.specVersion}${force ? '-force' : ''}`
    const id = await this.#enqueue('host.detach', name, version, {
      host: name,
      specVersion: object.specVersion,
      force,
    })
    return { object, jobId: id }
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
  getHost(name: string): Promise<ManagedResource | undefined> {
    return this.store.getHost(name)
  }
  listHosts(filter: { resourceGroup?: string } = {}): Promise<ManagedResource[]> {
    return this.store.listHosts(filter)
  }

  /** The DPUs whose agents report (a live heartbeat), sorted by id. */
  listDpus(): Promise<Heartbeat[]> {
    return this.heartbeats.list()
  }

  /**
   * Calls `listener` for every stored change from now on (through one shared
   * subscription); resolves once it is live, with the function that stops it.
   */
  watchChanges(listener: ChangeListener): Promise<() => void> {
    return this.changes.subscribe(listener)
  }
}
