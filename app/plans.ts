/**
 * Dry runs of the client's writes: each request is validated and placed exactly as the
 * write would be (the same refusals, quotas included), then planned (`functions/plan.ts`)
 * instead of stored and enqueued.
 */

import { HydrazineError } from '../lib/errors.ts'
import type { Ipam } from '../lib/ipam/index.ts'
import { PublicIpSpec, Rfc1123Label } from '../lib/state/objects.ts'
import type { Caller } from '../lib/state/placement.ts'
import { placeHost } from '../lib/state/placement.ts'
import type { ChangePlan, Planner } from '../lib/state/plans.ts'
import { DEFAULT_QUOTAS, limitsOf } from '../lib/state/quotas.ts'
import { type StateStore, StoreConflict } from '../lib/state/store.ts'
import { NotFoundError, ValidationError, validate } from './errors.ts'
import { type ClientPolicy, hostRequestOf, refuseOrphans, validGroupSpec } from './groups.ts'
import { checkInterfaces, interfacesOf, refuseInterfaceChange } from './host-interfaces.ts'

/** This client was built without a planner (no OVN central to plan against). */
export class DryRunUnavailable extends HydrazineError {
  constructor() {
    super('DRY_RUN_UNAVAILABLE', 'dry runs are not available on this client', { retryable: false })
  }
}

const empty = (notes: string[]): ChangePlan => ({
  dryRun: true,
  nb: { central: null, insert: [], update: [], delete: [] },
  frr: { announce: [], withdraw: [] },
  agentJobs: [],
  addresses: { allocate: [], release: [] },
  notes,
})

export class ObjectPlans {
  readonly #store: StateStore
  readonly #ipam: Ipam
  readonly #policy: ClientPolicy
  readonly #planner: Planner | undefined

  constructor(deps: {
    readonly store: StateStore
    readonly ipam: Ipam
    readonly policy: ClientPolicy
    readonly planner?: Planner | undefined
  }) {
    this.#store = deps.store
    this.#ipam = deps.ipam
    this.#policy = deps.policy
    this.#planner = deps.planner
  }

  get #plans(): Planner {
    if (!this.#planner) throw new DryRunUnavailable()
    return this.#planner
  }

  /** The plan of a group's new spec; refused (409) where the PUT itself would be. */
  async group(name: string, spec: unknown): Promise<ChangePlan> {
    const valid = validGroupSpec(name, spec, this.#policy)
    await refuseOrphans(this.#ipam, name, valid)
    return this.#plans.group(name, valid)
  }

  async groupDeletion(name: string): Promise<ChangePlan> {
    validate(Rfc1123Label, name, 'name')
    const plan = await this.#plans.groupDeletion(name)
    if (!plan) throw new NotFoundError('resource group', name)
    return plan
  }

  async host(name: string, spec: unknown, caller: Caller): Promise<ChangePlan> {
    const { request, group } = await hostRequestOf(this.#store, name, spec, caller, this.#policy)
    await refuseInterfaceChange(this.#store, await this.#store.getHost(name), name, 'change')
    const placed = placeHost(request, group, await this.#store.getDpu(request.dpu.id), caller)
    if (!placed.ok) throw new ValidationError(placed.issues)
    const tenant = group.spec.tenantId
    const interfaces = interfacesOf(name, request)
    if (interfaces.length > 0) {
      const quota = { tenant, limits: limitsOf(this.#policy.quotas ?? DEFAULT_QUOTAS, tenant) }
      const deps = { store: this.#store, policy: this.#policy, quota }
      await checkInterfaces(deps, name, request, group, interfaces, caller)
    }
    await this.#store.checkHost(name, placed.spec)
    await this.#store.checkHostQuotas(name, placed.spec, {
      tenant,
      limits: limitsOf(this.#policy.quotas ?? DEFAULT_QUOTAS, tenant),
    })
    const plan = await this.#plans.host(name, placed.spec)
    const notes = [
      ...plan.notes,
      ...(placed.dpuChange ? [`the inventory would learn DPU ${request.dpu.id}'s fabric IPs`] : []),
      ...(interfaces.length > 0
        ? [
            `its interfaces are hosts of their own, each with its own plan: ${interfaces.map((i) => i.name).join(', ')}`,
          ]
        : []),
    ]
    return { ...plan, notes }
  }

  async hostDeletion(name: string): Promise<ChangePlan> {
    validate(Rfc1123Label, name, 'name')
    const host = await this.#store.getHost(name)
    await refuseInterfaceChange(this.#store, host, name, 'delete')
    const plan = await this.#plans.hostDeletion(name)
    if (!plan) throw new NotFoundError('managed resource', name)
    const interfaces = (host?.spec.interfaces ?? []).map((i) => `${name}-${i.name}`)
    if (interfaces.length === 0) return plan
    return {
      ...plan,
      notes: [...plan.notes, `its interfaces would be deleted too: ${interfaces.join(', ')}`],
    }
  }

  /** Registering or unregistering a public IP changes the pool only. */
  async publicIp(ip: string, change: 'register' | 'unregister'): Promise<ChangePlan> {
    const address = validate(PublicIpSpec, { ip }).ip
    const status = (await this.#ipam.listPublicIps()).find((p) => p.ip === address)
    if (change === 'register') {
      return empty([
        status ? `${address} is in the pool already` : `${address} would join the pool`,
      ])
    }
    if (!status) throw new NotFoundError('public IP', address)
    if (status.allocated) {
      throw new StoreConflict(`public IP ${address} is allocated to ${status.allocatedTo}`, 'InUse')
    }
    return empty([`${address} would leave the pool`])
  }
}
