/**
 * Hydrazine's client: the one way into the application for every front door (HTTP and
 * webhooks, gRPC, the UI, other systems' producers). Every write is prepared once —
 * tenancy, validation, placement, quotas, each object read once (`hosts.ts`,
 * `groups.ts`, `dpus.ts`, `public-ips.ts`) — then applied (stored, its job enqueued with
 * an id derived from the object and version) or, for a dry run, planned from the same
 * prepared request (`plans`). A refused request names every invalid field and changes
 * nothing. The reads pass through to the store, the pool and the DPUs' reports.
 */
import type { Queue } from 'bullmq'
import type { DpuCredentialIssuer, DpuCredentials } from '../lib/agent-protocol/credentials.ts'
import type { Heartbeats } from '../lib/agent-protocol/heartbeats.ts'
import type { Heartbeat } from '../lib/agent-protocol/index.ts'
import { type Ipam, NotFound as IpamNotFound, type NetworkUsage } from '../lib/ipam/index.ts'
import { type AdminNetwork, type PortNetwork, portNetworksOf } from '../lib/model/admin-network.ts'
import { dpuEventVisibleTo, type EventKind, type ObjectEvent } from '../lib/model/events.ts'
import {
  type Dpu,
  type ManagedResource,
  type PublicIp,
  type ResourceGroup,
  Rfc1123Label,
} from '../lib/model/objects.ts'
import type { Caller } from '../lib/model/placement.ts'
import type { ChangePlan, Planner } from '../lib/model/plans.ts'
import type { Change, ChangeFeed, ChangeListener, Subscription } from '../lib/state/changes.ts'
import type { EventObjectKind } from '../lib/state/generations.ts'
import type { Page, PageRequest } from '../lib/state/pages.ts'
import type { StateStore } from '../lib/state/store.ts'
import { type ControllerQueue, controllerQueue } from '../queues/producer.ts'
import { DpuRequests } from './dpus.ts'
import { NotFoundError, validate } from './errors.ts'
import { GroupRequests } from './groups.ts'
import { HostRequests } from './hosts.ts'
import type { Accepted } from './outcomes.ts'
import type { ClientPolicy } from './policy.ts'
import { type PoolChange, PublicIpRequests } from './public-ips.ts'
import { type TraceAnswer, type Tracer, TraceUnavailable } from './trace.ts'

const OPERATOR: Caller = { kind: 'operator' }

/**
 * Dry runs of the writes: prepared exactly as the write is (the same refusals, quotas
 * included), then answered with what they would change — nothing stored or enqueued.
 */
export interface Plans {
  group(name: string, spec: unknown, caller?: Caller): Promise<ChangePlan>
  groupDeletion(name: string): Promise<ChangePlan>
  host(name: string, spec: unknown, caller?: Caller): Promise<ChangePlan>
  hostDeletion(name: string): Promise<ChangePlan>
  /** Registering or unregistering a public IP changes the pool only. */
  publicIp(ip: string, change: PoolChange): Promise<ChangePlan>
}

/**
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
  private readonly tracer: Tracer | undefined
  private readonly adminNetwork: AdminNetwork | undefined
  /** Host requests: prepare, then apply or plan. */
  readonly hosts: HostRequests
  /** Group requests: prepare, then apply or plan. */
  readonly groups: GroupRequests
  readonly dpus: DpuRequests
  readonly publicIps: PublicIpRequests
  readonly plans: Plans

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
    const { store, ipam, planner } = deps
    const queue = controllerQueue(deps.queue)
    const policy = deps.policy ?? { dhcpServers: [] }
    this.store = store
    this.queue = queue
    this.ipam = ipam
    this.heartbeats = deps.heartbeats
    this.changes = deps.changes
    this.tracer = deps.tracer
    this.adminNetwork = policy.adminNetwork
    this.hosts = new HostRequests({ store, queue, policy, planner })
    this.groups = new GroupRequests({ store, queue, policy, addresses: ipam, planner })
    this.dpus = new DpuRequests({
      store,
      queue,
      ipam,
      heartbeats: deps.heartbeats,
      credentials: deps.credentials,
      policy,
    })
    this.publicIps = new PublicIpRequests(ipam)
    const { hosts, groups, publicIps } = this
    this.plans = {
      group: async (name, spec, caller = OPERATOR) =>
        groups.plan(await groups.prepare(caller, name, spec)),
      groupDeletion: (name) => groups.planDeletion(name),
      host: async (name, spec, caller = OPERATOR) =>
        hosts.plan(await hosts.prepare(caller, name, spec)),
      hostDeletion: (name) => hosts.planDeletion(name),
      publicIp: async (ip, change) => publicIps.plan(await publicIps.prepare(ip, change)),
    }
  }

  /**
   * Creates or updates a ResourceGroup; enqueues `group.create` when the spec changed, or
   * when the same spec is applied again to a Failed group (a new attempt). A new group
   * past its tenant's `groups` quota is refused (QuotaExceeded): nothing stored or enqueued.
   * A tenant caller writes only its own tenant's groups.
   */
  async applyGroup(
    name: string,
    spec: unknown,
    options: { caller?: Caller } = {},
  ): Promise<Accepted<ResourceGroup>> {
    return this.groups.apply(await this.groups.prepare(options.caller ?? OPERATOR, name, spec))
  }

  /** Starts teardown: hosts are isolated first, the network removed last. */
  deleteGroup(name: string, options: { force?: boolean } = {}): Promise<Accepted<ResourceGroup>> {
    return this.groups.delete(name, options)
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
    return this.hosts.apply(await this.hosts.prepare(options.caller ?? OPERATOR, name, spec))
  }

  /** Detaches a host; it is isolated before its addresses are released. */
  deleteHost(name: string, options: { force?: boolean } = {}): Promise<Accepted<ManagedResource>> {
    return this.hosts.delete(name, options)
  }

  /**
   * Adds or changes a DPU in the operator's inventory (operators only). Its fabric IPs and
   * IPv6 NAT address (`natIp6`, stored canonical) are unique among DPUs; they and its
   * tenant cannot change while it serves hosts (409).
   */
  async applyDpu(id: string, spec: unknown): Promise<{ object: Dpu; changed: boolean }> {
    return this.dpus.apply(this.dpus.prepare(OPERATOR, id, spec))
  }

  /** Removes a DPU from the inventory; refused (409) while it serves a host. Its credentials stop working. */
  deleteDpu(id: string): Promise<void> {
    return this.dpus.delete(id)
  }

  /**
   * New credentials for a DPU of the inventory (operators only): a Redis user confined to
   * its own queue and heartbeat and, with a PKI, its certificate; the DPU's hosts are
   * configured again for its new key (`dpus.ts`).
   */
  issueDpuCredentials(id: string): Promise<DpuCredentials> {
    return this.dpus.issueCredentials(id)
  }

  getDpu(id: string): Promise<Dpu | undefined> {
    return this.store.dpus.get(id)
  }

  /** DPUs in the inventory, all or those assigned to one tenant. */
  listDpus(filter: { tenant?: string } = {}): Promise<Dpu[]> {
    return this.store.dpus.list(filter)
  }

  /** The live hosts a DPU serves. */
  dpuHostNames(id: string): Promise<string[]> {
    return this.store.dpus.hostNames(id)
  }

  /** Which network each of a DPU's host ports is on (`portNetworksOf`). */
  async dpuPorts(dpu: Dpu): Promise<PortNetwork[]> {
    const hosts = await this.store.hosts.onDpu(dpu.name)
    // A force-detached host its DPU has not confirmed isolated holds its ports off too.
    const unconfirmed = (await this.store.dpus.needsIsolation(dpu.name)).map((s) => s.host)
    return portNetworksOf(this.adminNetwork, dpu, hosts, unconfirmed).ports
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
  async registerPublicIp(ip: string): Promise<PublicIp> {
    const registered = await this.publicIps.apply(await this.publicIps.prepare(ip, 'register'))
    if (!registered) throw new Error(`public IP ${ip} was registered but is not in the pool`)
    return registered
  }

  /** Removes a public IP from the pool; refused (409) while it is allocated. */
  async unregisterPublicIp(ip: string): Promise<void> {
    await this.publicIps.apply(await this.publicIps.prepare(ip, 'unregister'))
  }

  /** A public IP of the pool, by any spelling of it; NotFound when it is not registered. */
  publicIp(ip: string): Promise<PublicIp> {
    return this.publicIps.get(ip)
  }

  /**
   * The pool, IPv4 addresses first, then IPv6 ones, each in address order; an address a
   * pending isolation holds says which (`heldUntilIsolatedBy`).
   */
  listPublicIps(): Promise<PublicIp[]> {
    return this.publicIps.list()
  }

  /**
   * How a group's addresses are used (its map): each subnet's used, reserved and
   * free counts, its pools, and a map of every address (`lib/ipam/usage.ts`). NotFound
   * for a group that does not exist or whose network is not made yet.
   */
  async groupIpam(name: string): Promise<NetworkUsage> {
    validate(Rfc1123Label, name, 'name')
    if (!(await this.store.groups.get(name))) throw new NotFoundError('resource group', name)
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
    return this.store.deliveries.remember(id, ttlS)
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
    return this.store.deliveries.forget(id)
  }

  // ── reads ──────────────────────────────────────────────────────────────────

  getGroup(name: string): Promise<ResourceGroup | undefined> {
    return this.store.groups.get(name)
  }
  listGroups(filter: { tenant?: string } = {}): Promise<ResourceGroup[]> {
    return this.store.groups.list(filter)
  }
  /** One page of groups by name (all, or one tenant's): see `lib/state/pages.ts`. */
  pageGroups(filter: { tenant?: string }, page: PageRequest): Promise<Page<ResourceGroup>> {
    return this.store.pages.groups(filter, page)
  }
  getHost(name: string): Promise<ManagedResource | undefined> {
    return this.store.hosts.get(name)
  }
  listHosts(filter: { resourceGroup?: string } = {}): Promise<ManagedResource[]> {
    return this.store.hosts.list(filter)
  }
  /** One page of hosts by name: all, one group's, one tenant's, or both at once. */
  pageHosts(
    filter: { resourceGroup?: string; tenant?: string },
    page: PageRequest,
  ): Promise<Page<ManagedResource>> {
    return this.store.pages.hosts(filter, page)
  }
  /** An object's recent transitions and repairs, newest first. */
  /**
   * An object's events, newest first. With `tenant`, a DPU's events are those that tenant
   * may read (`dpuEventVisibleTo`: the ones of its time holding the DPU); whose each is
   * stays in the store.
   */
  async events(
    kind: EventKind,
    name: string,
    limit?: number,
    options: { tenant?: string } = {},
  ): Promise<ObjectEvent[]> {
    const { tenant } = options
    const stored =
      tenant === undefined || kind !== 'dpu'
        ? await this.store.events.list(kind, name, limit)
        : (await this.store.events.list(kind, name))
            .filter((event) => dpuEventVisibleTo(event, tenant))
            .slice(0, limit)
    return stored.map(({ tenant: _whose, ...event }) => event)
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
