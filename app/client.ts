/**
 * The typed producer client: what other systems (and Hydrazine's own HTTP and gRPC
 * ingress) import to ask for work. Every request is validated before anything is stored
 * or enqueued; a bad one is rejected with every invalid field named and changes nothing.
 * A valid one persists the desired spec (bumping `specVersion` only if it changed) and
 * enqueues the job that converges it, with a job id derived from the object and version.
 *
 * Groups' and hosts' writes are `object-writes.ts`; the refusals, `client-errors.ts`.
 */
import type { Queue } from 'bullmq'
import type { DpuCredentialIssuer, DpuCredentials } from '../lib/agent-protocol/credentials.ts'
import type { Heartbeats } from '../lib/agent-protocol/heartbeats.ts'
import type { Heartbeat } from '../lib/agent-protocol/index.ts'
import {
  type Ipam,
  NotFound as IpamNotFound,
  type NetworkUsage,
  type PublicIpStatus,
} from '../lib/ipam/index.ts'
import { redriveHost } from '../lib/jobs/redrive.ts'
import type { Change, ChangeFeed, ChangeListener, Subscription } from '../lib/state/changes.ts'
import type { EventKind, ObjectEvent } from '../lib/state/events.ts'
import type { EventObjectKind } from '../lib/state/generations.ts'
import { DpuId } from '../lib/state/labels.ts'
import {
  type Dpu,
  DpuSpec,
  type ManagedResource,
  PublicIpSpec,
  type ResourceGroup,
  Rfc1123Label,
} from '../lib/state/objects.ts'
import type { Page, PageRequest } from '../lib/state/pages.ts'
import type { Caller } from '../lib/state/placement.ts'
import type { Planner } from '../lib/state/plans.ts'
import type { StateStore } from '../lib/state/store.ts'
import { type ControllerQueue, controllerQueue } from '../queues/producer.ts'
import { CredentialsUnavailable, NotFoundError, validate } from './errors.ts'
import type { ClientPolicy } from './groups.ts'
import { type Accepted, ObjectWrites } from './hosts.ts'
import { ObjectPlans } from './plans.ts'
import { type TraceAnswer, type Tracer, TraceUnavailable } from './trace.ts'

/** A public IP as the pool keys it: validated (IPv4 or IPv6), in canonical form. */
function publicIpAddress(ip: string): string {
  return validate(PublicIpSpec, { ip }).ip
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
  private readonly queue: ControllerQueue
  private readonly ipam: Ipam
  private readonly heartbeats: Heartbeats
  private readonly changes: ChangeFeed
  private readonly credentials: DpuCredentialIssuer | undefined
  private readonly writes: ObjectWrites
  private readonly tracer: Tracer | undefined
  /**
   * Dry runs of the writes below: validated, placed and quota-checked the same way, then
   * answered with what they would change (`ChangePlan`) — nothing stored or enqueued.
   */
  readonly plans: ObjectPlans

  constructor(deps: {
    readonly store: StateStore
    readonly queue: Queue
    readonly ipam: Ipam
    readonly heartbeats: Heartbeats
    readonly changes: ChangeFeed
    readonly policy?: ClientPolicy
    readonly credentials?: DpuCredentialIssuer
    /** Plans dry runs (`functions/plan.ts`); without one, `plans` refuses them. */
    readonly planner?: Planner
    /** Traces packets with ovn-trace (`trace.ts`); without one, `trace` refuses. */
    readonly tracer?: Tracer
  }) {
    this.credentials = deps.credentials
    this.queue = controllerQueue(deps.queue)
    this.tracer = deps.tracer
    this.plans = new ObjectPlans({
      store: deps.store,
      ipam: deps.ipam,
      policy: deps.policy ?? { dhcpServers: [] },
      planner: deps.planner,
    })
    this.writes = new ObjectWrites({
      store: deps.store,
      queue: this.queue,
      policy: deps.policy ?? { dhcpServers: [] },
      addresses: deps.ipam,
    })
    this.store = deps.store
    this.ipam = deps.ipam
    this.heartbeats = deps.heartbeats
    this.changes = deps.changes
  }

  /**
   * Creates or updates a ResourceGroup; enqueues `group.create` when the spec changed, or
   * when the same spec is applied again to a Failed group (a new attempt). A new group
   * past its tenant's `groups` quota is refused (QuotaExceeded): nothing stored or enqueued.
   */
  applyGroup(name: string, spec: unknown): Promise<Accepted<ResourceGroup>> {
    return this.writes.applyGroup(name, spec)
  }

  /** Starts teardown: hosts are isolated first, the network removed last. */
  deleteGroup(name: string, options: { force?: boolean } = {}): Promise<Accepted<ResourceGroup>> {
    return this.writes.deleteGroup(name, options)
  }

  /**
   * Creates or updates a ManagedResource (a host); enqueues `host.attach` when it changed,
   * or when the same spec is applied again to a Failed host (a new attempt).
   * The host is placed on its DPU from the operator's inventory (`placeHost`): a tenant
   * names only an assigned DPU and one of its host ports. A new host past its tenant's
   * `hosts` quota, or one becoming PublicAccess past `publicIps`, is refused
   * (QuotaExceeded): nothing stored (the inventory included) or enqueued.
   */
  applyHost(
    name: string,
    spec: unknown,
    options: { caller?: Caller } = {},
  ): Promise<Accepted<ManagedResource>> {
    return this.writes.applyHost(name, spec, options)
  }

  /** Detaches a host; it is isolated before its addresses are released. */
  deleteHost(name: string, options: { force?: boolean } = {}): Promise<Accepted<ManagedResource>> {
    return this.writes.deleteHost(name, options)
  }

  /**
   * Adds or changes a DPU in the operator's inventory (operators only). Its fabric IPs and
   * IPv6 NAT address (`natIp6`, stored canonical) are unique among DPUs; they and its
   * tenant cannot change while it serves hosts (409).
   */
  async applyDpu(id: string, spec: unknown): Promise<{ object: Dpu; changed: boolean }> {
    validate(DpuId, id, 'id')
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
   * The answer is the only place the secrets appear. With a certificate, the DPU's hosts
   * are configured again (`reconfigureHostsOf`).
   */
  async issueDpuCredentials(id: string): Promise<DpuCredentials> {
    validate(Rfc1123Label, id, 'id')
    if (!(await this.store.getDpu(id))) throw new NotFoundError('DPU', id)
    if (!this.credentials) throw new CredentialsUnavailable()
    const issued = await this.credentials.issue(id)
    if (issued.tls) {
      // Public: kept so that each group's own central can certify the DPU's key for its SB.
      await this.store.setDpuIdentity(id, issued.tls.cert)
      await this.reconfigureHostsOf(id)
    }
    return issued
  }

  /**
   * A DPU with a new key: what its group's SB admits certifies the old one, so each of its
   * live hosts starts a new attempt, whose `configure` carries a certificate for the new
   * key (the new agent takes it). A host that failed for want of a certificate on record
   * (`ChassisIdentityRefused`) is tried again the same way.
   */
  private async reconfigureHostsOf(dpuId: string): Promise<void> {
    const { jobs } = this.queue
    const message = `DPU ${dpuId} has new credentials: configuring it again`
    for (const host of await this.store.dpuHosts(dpuId)) {
      if (host.deletion) continue
      const refused = host.status.conditions.some((c) => c.reason === 'ChassisIdentityRefused')
      if (host.status.phase === 'Failed' && !refused) continue
      const configured = host.status.phase === 'Ready' || host.status.phase === 'Configuring'
      await redriveHost(
        { store: this.store, jobs },
        host.name,
        { type: 'AgentConfigured', status: 'Unknown', reason: 'CredentialsIssued', message },
        configured ? 'Configuring' : 'Attaching',
      )
    }
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

  /** One DPU's newest heartbeat (live, or the last one recorded), without listing them all. */
  heartbeatOf(id: string): Promise<Heartbeat | undefined> {
    return this.heartbeats.newest(id)
  }

  /**
   * Registers a public IP in the operator's pool of its family (idempotent): IPv4, or IPv6
   * (announced as a /128). Any spelling of an address is the same one, kept canonical.
   *
   * @example await client.registerPublicIp('2001:DB8:FF:0::5') // { ip: '2001:db8:ff::5', allocated: false }
   */
  async registerPublicIp(ip: string): Promise<PublicIpStatus> {
    const address = publicIpAddress(ip)
    await this.ipam.registerPublicIp(address)
    return this.publicIp(address)
  }

  /** Removes a public IP from the pool; refused (409) while it is allocated. */
  async unregisterPublicIp(ip: string): Promise<void> {
    const address = publicIpAddress(ip)
    await this.publicIp(address)
    await this.ipam.unregisterPublicIp(address)
  }

  /** A public IP of the pool, by any spelling of it; NotFound when it is not registered. */
  async publicIp(ip: string): Promise<PublicIpStatus> {
    const address = publicIpAddress(ip)
    const found = (await this.ipam.listPublicIps()).find((p) => p.ip === address)
    if (!found) throw new NotFoundError('public IP', address)
    return found
  }

  /** The pool, IPv4 addresses first, then IPv6 ones, each in address order. */
  listPublicIps(): Promise<PublicIpStatus[]> {
    return this.ipam.listPublicIps()
  }

  /**
   * How a group's addresses are used (its map): each subnet's used, reserved and
   * free counts, its pools, and a map of every address (`lib/ipam/usage.ts`). NotFound
   * for a group that does not exist or whose network is not made yet.
   */
  async groupIpam(name: string): Promise<NetworkUsage> {
    validate(Rfc1123Label, name, 'name')
    if (!(await this.store.getGroup(name))) throw new NotFoundError('resource group', name)
    try {
      return await this.ipam.usage(name)
    } catch (error) {
      if (error instanceof IpamNotFound) throw new NotFoundError('IPAM network of group', name)
      throw error
    }
  }

  /**
   * Runs reconcile now instead of at its next scheduled time (operators only, e.g. in an
   * incident): enqueues one `reconcile` job under an id of its own and resolves to it. A
   * run that finds another under way waits for it (`queues/worker.ts`).
   */
  reconcileNow(): Promise<string> {
    return this.queue.reconcileNow()
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
   * Calls `listener` for every stored change after the subscription's `position` (through
   * one shared reader), in order; resolves once it is live.
   */
  watchChanges(listener: ChangeListener): Promise<Subscription> {
    return this.changes.subscribe(listener)
  }

  /**
   * Where a packet `from` a host (or `fabric`) `to` a host or address ends up, traced by
   * ovn-trace in the source group's own central: a verdict, the hops, and (with `raw`) the
   * trace. Writes nothing. A tenant caller traces only its own hosts and their addresses.
   *
   * @example await client.trace({ from: 'h1', to: 'h2' }, { caller }) // { verdict: 'delivered', … }
   */
  trace(request: unknown, options: { caller?: Caller } = {}): Promise<TraceAnswer> {
    if (!this.tracer) return Promise.reject(new TraceUnavailable('tracing is not configured'))
    return this.tracer.trace(request, options.caller ?? { kind: 'operator' })
  }

  /**
   * At most `count` changes after resource version `version`, oldest first;
   * ResourceVersionTooOld when the change log no longer reaches back that far.
   */
  changesSince(version: string, count: number): Promise<Change[]> {
    return this.changes.since(version, count)
  }
}
