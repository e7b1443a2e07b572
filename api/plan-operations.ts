/**
 * Dry runs at the API edge (`?dryRun=true` on PUT and DELETE): the same visibility and
 * write checks as the real operation (`operations.ts`), then the client's plan instead of
 * the write. A tenant plans only what it could do.
 */
import type { ChangePlan } from '../lib/state/plans.ts'
import { type HydrazineClient, NotFoundError } from '../queues/producer.ts'
import { type Principal, tenantOf } from './auth.ts'
import { ForbiddenError } from './errors.ts'
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
 * await plans(ops(principal), principal).applyHost('host-1', spec)
 */
export function createPlanOperations(deps: { client: Pick<HydrazineClient, 'plans'> }) {
  const { plans } = deps.client
  return function planOperationsFor(ops: Operations, principal: Principal): PlanOperations {
    const tenant = tenantOf(principal)
    return {
      async applyGroup(name, spec) {
        await ops.mayWriteGroup(name, spec)
        return plans.group(name, spec)
      },
      async deleteGroup(name) {
        if (!(await ops.visibleGroup(name))) throw new NotFoundError('resource group', name)
        return plans.groupDeletion(name)
      },
      async applyHost(name, spec) {
        await ops.mayWriteHost(name, spec)
        return plans.host(name, spec, tenant ? { kind: 'tenant', tenant } : { kind: 'operator' })
      },
      async deleteHost(name) {
        if (!(await ops.visibleHost(name))) throw new NotFoundError('managed resource', name)
        return plans.hostDeletion(name)
      },
      async publicIp(ip, change) {
        if (principal.kind !== 'operator') throw new ForbiddenError()
        return plans.publicIp(ip, change)
      },
    }
  }
}
