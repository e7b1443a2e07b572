/**
 * Dry runs as one caller may ask them (`?dryRun=true` on PUT and DELETE): a write is
 * prepared exactly as the real one (`HydrazineClient.plans`: the same tenancy, checks and
 * refusals), then planned instead of applied; a deletion has the visibility check of the
 * real one (`operations.ts`). A tenant plans only what it could do.
 */
import type { Caller } from '../lib/model/placement.ts'
import type { ChangePlan } from '../lib/model/plans.ts'
import type { HydrazineClient } from './client.ts'
import { ForbiddenError, NotFoundError } from './errors.ts'
import type { Operations } from './operations.ts'

export interface PlanOperations {
  applyGroup(name: string, spec: Record<string, unknown>): Promise<ChangePlan>
  deleteGroup(name: string): Promise<ChangePlan>
  applyHost(name: string, spec: Record<string, unknown>): Promise<ChangePlan>
  deleteHost(name: string): Promise<ChangePlan>
  /** Operators only, as the pool's writes. */
  publicIp(ip: string, change: 'register' | 'unregister'): Promise<ChangePlan>
}

/**
 * @example
 * const plans = createPlanOperations({ client })
 * await plans(ops(caller), caller).applyHost('host-1', spec)
 */
export function createPlanOperations(deps: { client: Pick<HydrazineClient, 'plans'> }) {
  const { plans } = deps.client
  return function planOperationsFor(ops: Operations, caller: Caller): PlanOperations {
    const tenant = caller.kind === 'tenant' ? caller.tenant : undefined
    return {
      async applyGroup(name, spec) {
        return plans.group(name, spec, caller)
      },
      async deleteGroup(name) {
        if (!(await ops.visibleGroup(name))) throw new NotFoundError('resource group', name)
        return plans.groupDeletion(name)
      },
      async applyHost(name, spec) {
        const plan = await plans.host(name, spec, caller)
        return tenant ? withoutPoolPeek(plan) : plan
      },
      async deleteHost(name) {
        if (!(await ops.visibleHost(name))) throw new NotFoundError('managed resource', name)
        return plans.hostDeletion(name)
      },
      async publicIp(ip, change) {
        if (caller.kind !== 'operator') throw new ForbiddenError()
        return plans.publicIp(ip, change)
      },
    }
  }
}

/**
 * A tenant's plan without the public IP the pool would pick: which addresses the shared
 * pool holds free is the operator's to see (the host's status names its own once given).
 */
function withoutPoolPeek(plan: ChangePlan): ChangePlan {
  const picked = plan.addresses.allocate.flatMap((a) => (a.pool === 'public' && a.ip ? [a.ip] : []))
  if (picked.length === 0) return plan
  const hide = (text: string) =>
    picked.reduce((t, ip) => t.split(`/${ip}/`).join('/<public IP>/'), text)
  return {
    ...plan,
    frr: {
      ...plan.frr,
      announce: plan.frr.announce.map((p) =>
        p.prefix && picked.includes(p.prefix.slice(0, -3)) ? { ...p, prefix: null } : p,
      ),
    },
    addresses: {
      ...plan.addresses,
      allocate: plan.addresses.allocate.map((a) => (a.pool === 'public' ? { ...a, ip: null } : a)),
    },
    nb: {
      ...plan.nb,
      insert: plan.nb.insert.map(hide),
    },
  }
}
