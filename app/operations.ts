/**
 * The resource operations behind every ingress (HTTP `/v1`, gRPC), scoped to the caller.
 *
 * An operator sees and changes everything. A tenant sees only its own tenant's resource
 * groups and their managed resources: another tenant's object behaves exactly like one
 * that does not exist (NotFound), writing a group for another tenant is Forbidden, and
 * public IPs are for operators only. A write's tenancy is decided with the rest of the
 * request, once, by the client's `prepare` (`hosts.ts`, `groups.ts`): a refused request
 * changes nothing and enqueues nothing.
 *
 * Lists are paged (`lib/state/pages.ts`): by name, or for public IPs by address, each page
 * starting after the last key of the one before. Groups and hosts are read a page at a
 * time; the DPU inventory and the public IP pool (bounded by hardware and by the
 * operator) are read whole, and only the page's DPUs get their views built.
 */
import type { DpuCredentials } from '../lib/agent-protocol/credentials.ts'
import { type DpuState, dpuStateOf } from '../lib/agent-protocol/heartbeats.ts'
import type { Heartbeat } from '../lib/agent-protocol/index.ts'
import { parseIp, toHex } from '../lib/ipam/address.ts'
import type { NetworkUsage } from '../lib/ipam/index.ts'
import type { PortNetwork } from '../lib/model/admin-network.ts'
import type { ObjectEvent } from '../lib/model/events.ts'
import type {
  Dpu,
  DpuSpec,
  ManagedResource,
  PublicIp,
  ResourceGroup,
} from '../lib/model/objects.ts'
import type { Caller } from '../lib/model/placement.ts'
import { type Page, type PageRequest, pageOf } from '../lib/state/pages.ts'
import type { HydrazineClient } from './client.ts'
import { ForbiddenError, NotFoundError } from './errors.ts'
import type { Accepted } from './outcomes.ts'
import type { TraceAnswer } from './trace.ts'

/** What the operations need from the rest of Hydrazine: its client, nothing else. */
export interface OperationsDeps {
  readonly client: Pick<
    HydrazineClient,
    | 'applyGroup'
    | 'deleteGroup'
    | 'applyHost'
    | 'deleteHost'
    | 'registerPublicIp'
    | 'unregisterPublicIp'
    | 'reconcileNow'
    | 'publicIp'
    | 'listPublicIps'
    | 'getGroup'
    | 'getHost'
    | 'pageGroups'
    | 'pageHosts'
    | 'listDpus'
    | 'getDpu'
    | 'applyDpu'
    | 'deleteDpu'
    | 'listHeartbeats'
    | 'heartbeatOf'
    | 'dpuHostNames'
    | 'dpuPorts'
    | 'issueDpuCredentials'
    | 'events'
    | 'trace'
    | 'groupIpam'
  >
}

/**
 * A DPU as the API shows it: every DPU the system has seen — in the inventory, or ever
 * heard from — with its inventory entry (absent for a DPU whose agent reports before the
 * operator added it), how its heartbeat stands, and what its agent last reported (kept
 * after it went silent).
 */
export interface DpuView {
  readonly id: string
  readonly spec?: DpuSpec
  readonly specVersion?: number
  /**
   * From the age of its newest heartbeat, in the beat's own interval (`dpuStateOf`):
   * `Online` under 1.5 intervals, `Stale` under 2, `Lost` after; `Unknown` when its
   * agent was never heard from.
   */
  readonly state: DpuState | 'Unknown'
  /** When its agent last beat (absent: never). */
  readonly lastHeartbeat?: string
  /** The live hosts it serves. */
  readonly hosts: readonly string[]
  /**
   * Each of its host ports and the network it is on: a tenant's (the host holding it),
   * the admin network, or none (and why); absent for a DPU not in the inventory.
   */
  readonly ports?: readonly PortNetwork[]
  readonly agent?: {
    readonly version: string
    readonly protocolVersions: readonly string[]
    readonly lastHeartbeat: string
    readonly heartbeatIntervalMs: number
    readonly observed: Heartbeat['observed']
  }
}

/** Every operation, as one principal may do it. */
export interface Operations {
  applyGroup(name: string, spec: Record<string, unknown>): Promise<Accepted<ResourceGroup>>
  getGroup(name: string): Promise<ResourceGroup>
  /** One page of the visible groups by name (`?tenant=` narrows, never widens). */
  listGroups(
    filter: { tenant?: string | undefined },
    page: PageRequest,
  ): Promise<Page<ResourceGroup>>
  deleteGroup(name: string, force: boolean): Promise<Accepted<ResourceGroup>>
  applyHost(name: string, spec: Record<string, unknown>): Promise<Accepted<ManagedResource>>
  getHost(name: string): Promise<ManagedResource>
  /** One page of the visible hosts by name, all or one group's. */
  listHosts(
    filter: { resourceGroup?: string | undefined },
    page: PageRequest,
  ): Promise<Page<ManagedResource>>
  deleteHost(name: string, force: boolean): Promise<Accepted<ManagedResource>>
  registerPublicIp(ip: string): Promise<PublicIp>
  getPublicIp(ip: string): Promise<PublicIp>
  /** One page of the pool, in address order (`after`: an address). */
  listPublicIps(page: PageRequest): Promise<Page<PublicIp>>
  unregisterPublicIp(ip: string): Promise<void>
  /** Operators only: one reconcile run now (after any under way); resolves to its job id. */
  reconcileNow(): Promise<string>
  /**
   * One page, by id, of the inventory with each DPU's agent report: all for an operator
   * (agents not in it included), its own for a tenant.
   */
  listDpus(page: PageRequest): Promise<Page<DpuView>>
  getDpu(id: string): Promise<DpuView>
  /** Operators only. */
  applyDpu(
    id: string,
    spec: Record<string, unknown>,
  ): Promise<{ object: DpuView; changed: boolean }>
  deleteDpu(id: string): Promise<void>
  /** Operators only: new credentials for a DPU's agent (the only place they appear). */
  issueDpuCredentials(id: string): Promise<DpuCredentials>
  /** The DPU's recent heartbeat transitions and repairs, newest first (at most `limit`). */
  dpuEvents(id: string, limit?: number): Promise<ObjectEvent[]>
  /** The group's recent transitions and repairs, newest first (at most `limit`). */
  groupEvents(name: string, limit?: number): Promise<ObjectEvent[]>
  /** How the group's addresses are used: subnets, pools, counts and the map. */
  groupIpam(name: string): Promise<NetworkUsage>
  /** The host's recent transitions and repairs, newest first (at most `limit`). */
  hostEvents(name: string, limit?: number): Promise<ObjectEvent[]>
  /** The group as this caller may see it: undefined when missing or another tenant's. */
  visibleGroup(name: string): Promise<ResourceGroup | undefined>
  /** The host as this caller may see it: undefined when missing or in another tenant's group. */
  visibleHost(name: string): Promise<ManagedResource | undefined>
  /**
   * Where a packet from a host (or the fabric) to a host or address ends up (ovn-trace).
   * A tenant traces only its own hosts and their addresses; others' are NotFound.
   */
  trace(request: Record<string, unknown>): Promise<TraceAnswer>
}

/** A key that sorts addresses as the pool lists them: IPv4 before IPv6, then by value. */
function addressOrder(ip: string): string {
  const address = parseIp(ip)
  return `${address.version}:${toHex(address)}`
}

/**
 * @example
 * const ops = createOperations({ client })
 * await ops({ kind: 'tenant', tenant: 'tenant-a' }).getGroup('group-a')
 */
export function createOperations(deps: OperationsDeps): (caller: Caller) => Operations {
  const { client } = deps

  const dpuView = async (
    id: string,
    dpu: Dpu | undefined,
    beat: Heartbeat | undefined,
  ): Promise<DpuView> => ({
    id,
    ...(dpu ? { spec: dpu.spec, specVersion: dpu.specVersion } : {}),
    state: beat ? dpuStateOf(beat) : 'Unknown',
    ...(beat ? { lastHeartbeat: beat.at } : {}),
    hosts: (await client.dpuHostNames(id)).sort(),
    ...(dpu ? { ports: await client.dpuPorts(dpu) } : {}),
    ...(beat
      ? {
          agent: {
            version: beat.agentVersion,
            protocolVersions: beat.protocolVersions,
            lastHeartbeat: beat.at,
            heartbeatIntervalMs: beat.intervalMs,
            observed: beat.observed,
          },
        }
      : {}),
  })

  return function operationsFor(caller) {
    const tenant = caller.kind === 'tenant' ? caller.tenant : undefined
    const operatorOnly = () => {
      if (caller.kind !== 'operator') throw new ForbiddenError()
    }

    const visibleGroup = async (name: string) => {
      const group = await client.getGroup(name)
      if (!group || (tenant !== undefined && group.spec.tenantId !== tenant)) return undefined
      return group
    }
    /** The DPU's inventory entry and newest beat, when this caller may see it. */
    const visibleDpu = async (id: string): Promise<[Dpu | undefined, Heartbeat | undefined]> => {
      const [dpu, beat] = await Promise.all([client.getDpu(id), client.heartbeatOf(id)])
      if (tenant !== undefined && dpu?.spec.tenantId !== tenant) throw new NotFoundError('DPU', id)
      if (!dpu && !beat) throw new NotFoundError('DPU', id)
      return [dpu, beat]
    }
    const visibleHost = async (name: string) => {
      const host = await client.getHost(name)
      if (!host) return undefined
      if (tenant !== undefined && !(await visibleGroup(host.spec.resourceGroup))) return undefined
      return host
    }

    return {
      visibleGroup,
      visibleHost,

      async applyGroup(name, spec) {
        return client.applyGroup(name, spec, { caller })
      },

      async getGroup(name) {
        const group = await visibleGroup(name)
        if (!group) throw new NotFoundError('resource group', name)
        return group
      },

      async listGroups(filter, page) {
        if (tenant !== undefined && filter.tenant !== undefined && filter.tenant !== tenant) {
          return { items: [] }
        }
        const only = tenant ?? filter.tenant
        return client.pageGroups(only ? { tenant: only } : {}, page)
      },

      async groupEvents(name, limit) {
        if (!(await visibleGroup(name))) throw new NotFoundError('resource group', name)
        return client.events('rg', name, limit)
      },

      async groupIpam(name) {
        if (!(await visibleGroup(name))) throw new NotFoundError('resource group', name)
        return client.groupIpam(name)
      },

      async deleteGroup(name, force) {
        if (!(await visibleGroup(name))) throw new NotFoundError('resource group', name)
        return client.deleteGroup(name, { force })
      },

      async applyHost(name, spec) {
        return client.applyHost(name, spec, { caller })
      },

      async getHost(name) {
        const host = await visibleHost(name)
        if (!host) throw new NotFoundError('managed resource', name)
        return host
      },

      async listHosts(filter, page) {
        return client.pageHosts(
          {
            ...(filter.resourceGroup ? { resourceGroup: filter.resourceGroup } : {}),
            ...(tenant === undefined ? {} : { tenant }),
          },
          page,
        )
      },

      async hostEvents(name, limit) {
        if (!(await visibleHost(name))) throw new NotFoundError('managed resource', name)
        return client.events('mr', name, limit)
      },

      async deleteHost(name, force) {
        if (!(await visibleHost(name))) throw new NotFoundError('managed resource', name)
        return client.deleteHost(name, { force })
      },

      async registerPublicIp(ip) {
        operatorOnly()
        return client.registerPublicIp(ip)
      },
      async reconcileNow() {
        operatorOnly()
        return client.reconcileNow()
      },
      async getPublicIp(ip) {
        operatorOnly()
        return client.publicIp(ip)
      },
      async listPublicIps(page) {
        operatorOnly()
        // The pool is one hash: read whole, but answered a page at a time.
        const after = page.after === undefined ? {} : { after: addressOrder(page.after) }
        const { items, next } = pageOf(
          await client.listPublicIps(),
          { limit: page.limit, ...after },
          (p) => addressOrder(p.ip),
        )
        const last = items.at(-1)
        return { items, ...(next !== undefined && last ? { next: last.ip } : {}) }
      },
      async unregisterPublicIp(ip) {
        operatorOnly()
        await client.unregisterPublicIp(ip)
      },
      async listDpus(page) {
        const [dpus, beats] = await Promise.all([
          client.listDpus(tenant ? { tenant } : {}),
          client.listHeartbeats(),
        ])
        const dpuOf = new Map(dpus.map((d) => [d.name, d]))
        const beatOf = new Map(beats.map((b) => [b.dpuId, b]))
        // An operator also sees agents that report before their DPU was added.
        const ids =
          tenant === undefined ? new Set([...dpuOf.keys(), ...beatOf.keys()]) : dpuOf.keys()
        const { items, next } = pageOf([...ids], page)
        const views = await Promise.all(
          items.map((id) => dpuView(id, dpuOf.get(id), beatOf.get(id))),
        )
        return { items: views, ...(next === undefined ? {} : { next }) }
      },
      async getDpu(id) {
        return dpuView(id, ...(await visibleDpu(id)))
      },
      async dpuEvents(id, limit) {
        await visibleDpu(id)
        // A tenant reads only the events of its own time holding the DPU.
        return client.events('dpu', id, limit, tenant === undefined ? {} : { tenant })
      },
      async applyDpu(id, spec) {
        operatorOnly()
        const { object, changed } = await client.applyDpu(id, spec)
        const beat = await client.heartbeatOf(id)
        return { object: await dpuView(id, object, beat), changed }
      },
      async deleteDpu(id) {
        operatorOnly()
        await client.deleteDpu(id)
      },
      async issueDpuCredentials(id) {
        operatorOnly()
        return client.issueDpuCredentials(id)
      },
      async trace(request) {
        return client.trace(request, {
          caller: tenant ? { kind: 'tenant', tenant } : { kind: 'operator' },
        })
      },
    }
  }
}
