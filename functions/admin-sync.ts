/**
 * `admin.sync` (see `createAdminSync`): keeps the admin network's group and ports in line
 * with the inventory and the tenants' hosts (`lib/model/admin-network.ts` decides).
 */
import { HydrazineError } from '../lib/errors.ts'
import { deletionVersion, jobId } from '../lib/jobs/index.ts'
import {
  ADMIN_TENANT,
  type AdminNetwork,
  adminGroupSpec,
  type PortNetwork,
  planAdminPorts,
} from '../lib/model/admin-network.ts'
import type { Dpu, ManagedResource } from '../lib/model/objects.ts'
import type { TenantQuota } from '../lib/model/quotas.ts'
import { StoreConflict } from '../lib/state/store.ts'
import { clearIsolatedStaleBindings } from './internal/agent-jobs.ts'
import type { HandlerDeps } from './internal/deps.ts'
import { recordDpuEvent } from './internal/dpu-events.ts'

export type AdminSyncDeps = Pick<HandlerDeps, 'store' | 'jobs' | 'children' | 'ipam'> & {
  readonly admin: AdminNetwork
}

export interface AdminSyncResult {
  /** The admin network's group, and what became of it this run. */
  readonly group: { readonly name: string; readonly state: 'Stored' | 'Unchanged' | 'Waiting' }
  /** Admin ports stored this run (placed on a free host port). */
  readonly joined: readonly string[]
  /** Admin ports whose detach this run asked for (a tenant host placed on their DPU). */
  readonly left: readonly string[]
  /** Per DPU, each host port and the network it is on. */
  readonly ports: Readonly<Record<string, readonly PortNetwork[]>>
  /** What this run could not do, per admin port; the next run tries again. */
  readonly failed: readonly { readonly port: string; readonly error: string }[]
}

/** The admin network's ports count against no tenant: the bound is the inventory's. */
const ADMIN_QUOTA: TenantQuota = {
  tenant: ADMIN_TENANT,
  limits: { groups: 1, hosts: 1_000_000, publicIps: 0 },
}

/**
 * `admin.sync` (repeatable, every second or so): the admin network, level-triggered.
 *
 * 1. the admin network's group is stored (and `group.create` enqueued) when it is missing
 *    or its spec (the operator's `HYDRAZINE_ADMIN_NETWORK`) changed;
 * 2. each host port that joins (`planAdminPorts`: its DPU serves no tenant host and has
 *    confirmed every force-detached one isolated, the inventory knows its MAC) gets its admin port stored and `host.attach` enqueued;
 * 3. each admin port that leaves (a tenant host was placed on its DPU, its port left the
 *    inventory) is marked for deletion and `host.detach` enqueued: isolated by its DPU
 *    before it is gone, and only then may the tenant host's attach go on
 *    (`dpuFollowsOneGroup`).
 *
 * Each join and leave is recorded as an event of its DPU, naming the port and the network.
 */
export function createAdminSync(deps: AdminSyncDeps) {
  return async function adminSync(): Promise<AdminSyncResult> {
    const { admin, store } = deps
    const group = await ensureGroup(deps)
    const dpus = await store.dpus.list()
    const hosts = await hostsOf(deps, dpus)
    const plan = planAdminPorts(admin, dpus, hosts, await unconfirmedOf(deps, dpus))
    const joined: string[] = []
    const failed: { port: string; error: string }[] = []
    // Ports join only once the group can take them: its attach waits for it otherwise.
    for (const port of group.state === 'Unchanged' ? plan.join : []) {
      try {
        const put = await store.hosts.put(port.name, port.spec, port.dpuVersion, ADMIN_QUOTA, {
          adminPort: true,
        })
        if (!put.changed) continue
        const { specVersion } = put.object
        await deps.jobs.add(
          'host.attach',
          { host: port.name, specVersion },
          jobId('host.attach', port.name, specVersion),
        )
        await recordDpuEvent(store, port.spec.dpu.id, {
          type: 'Normal',
          reason: 'PortJoiningAdminNetwork',
          message: `port ${port.spec.identifier} joins the admin network ${admin.group} as ${port.name}: no tenant host holds DPU ${port.spec.dpu.id}`,
        })
        joined.push(port.name)
      } catch (error) {
        // The DPU changed since it was read (a tenant host placed there): next run.
        if (!(error instanceof StoreConflict)) throw error
        failed.push({ port: port.name, error: error.message })
      }
    }
    const left: string[] = []
    for (const name of plan.leave) {
      const host = hosts.find((h) => h.name === name)
      const marked = (await store.objects.requestDeletion('mr', name, false)) as
        | ManagedResource
        | undefined
      if (!host || !marked) continue
      await deps.jobs.add(
        'host.detach',
        { host: name, specVersion: marked.specVersion, force: false },
        jobId('host.detach', name, deletionVersion(marked.specVersion, false)),
      )
      const why = leaveReason(plan.ports.get(host.spec.dpu.id), host)
      await recordDpuEvent(store, host.spec.dpu.id, {
        type: 'Normal',
        reason: 'PortLeavingAdminNetwork',
        message: `port ${host.spec.identifier ?? '(default)'} leaves the admin network ${admin.group} (${name} is isolated first): ${why}`,
      })
      left.push(name)
    }
    return {
      group: { name: admin.group, state: group.state },
      joined,
      left,
      ports: Object.fromEntries(plan.ports),
      failed,
    }
  }
}

/** Every DPU's hosts, admin ports included, and the admin ports of DPUs gone from the inventory. */
async function hostsOf(deps: AdminSyncDeps, dpus: readonly Dpu[]): Promise<ManagedResource[]> {
  const { store, admin } = deps
  const seen = new Map<string, ManagedResource>()
  for (const dpu of dpus) {
    for (const host of await store.hosts.onDpu(dpu.name)) seen.set(host.name, host)
  }
  for (const host of await store.hosts.inGroup(admin.group)) seen.set(host.name, host)
  return [...seen.values()]
}

/**
 * Per DPU, the force-detached hosts it has not confirmed isolated yet; those it has (its
 * agent acked their `isolate`) are cleared first, and what was held for them given back.
 */
async function unconfirmedOf(
  deps: AdminSyncDeps,
  dpus: readonly Dpu[],
): Promise<Map<string, string[]>> {
  const unconfirmed = new Map<string, string[]>()
  for (const dpu of dpus) {
    const pending =
      (await deps.store.dpus.needsIsolation(dpu.name)).length > 0 ||
      (await deps.store.dpus.isolationHolds(dpu.name)).length > 0
    if (!pending) continue
    await clearIsolatedStaleBindings(deps, dpu.name)
    const left = (await deps.store.dpus.needsIsolation(dpu.name)).map((s) => s.host)
    if (left.length > 0) unconfirmed.set(dpu.name, left)
  }
  return unconfirmed
}

/** Why an admin port leaves, from what its DPU's ports are on now. */
function leaveReason(ports: readonly PortNetwork[] | undefined, host: ManagedResource): string {
  const holder = ports?.find((p) => p.network === 'tenant')
  if (holder)
    return `host ${holder.host} of group ${holder.group} was placed on DPU ${host.spec.dpu.id}`
  if (!ports) return `DPU ${host.spec.dpu.id} left the inventory`
  const own = ports.find((p) => p.port === host.spec.identifier)
  return own?.reason ?? `port ${host.spec.identifier} left DPU ${host.spec.dpu.id}'s inventory`
}

/**
 * The admin network's group stored as the operator configured it. `Stored`: this run
 * stored it (new, or its spec changed); `Waiting`: it is being deleted (a stale one), or
 * not provisioned yet; `Unchanged`: provisioned, its ports may join.
 */
async function ensureGroup(
  deps: AdminSyncDeps,
): Promise<{ state: AdminSyncResult['group']['state'] }> {
  const { admin, store } = deps
  const existing = await store.groups.get(admin.group)
  if (existing?.deletion) return { state: 'Waiting' }
  if (existing && existing.spec.tenantId !== ADMIN_TENANT)
    throw new AdminGroupTaken(admin.group, existing.spec.tenantId)
  const { changed, object } = await store.groups.put(admin.group, adminGroupSpec(admin))
  if (changed) {
    await deps.jobs.add(
      'group.create',
      { group: admin.group, specVersion: object.specVersion },
      jobId('group.create', admin.group, object.specVersion),
    )
    return { state: 'Stored' }
  }
  return { state: object.status.observedVersion === 0 ? 'Waiting' : 'Unchanged' }
}

/** A tenant's group has the name the operator gave the admin network. */
export class AdminGroupTaken extends HydrazineError {
  constructor(group: string, tenant: string) {
    super(
      'ADMIN_GROUP_TAKEN',
      `HYDRAZINE_ADMIN_NETWORK names group ${group}, which tenant ${tenant} holds: name another group for the admin network`,
    )
  }
}
