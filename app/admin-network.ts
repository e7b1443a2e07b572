/**
 * The admin network's refusals: Hydrazine alone writes the admin network's group and its
 * ports (`functions/admin-sync.ts`), so no request may create, change or delete either,
 * nor attach a host to it, nor store a group under its reserved tenant. A tenant is told
 * only that the name is taken (as for any other tenant's group); an operator is told why.
 */
import { isAdminTenant } from '../lib/model/admin-network.ts'
import type { ManagedResource, ResourceGroup } from '../lib/model/objects.ts'
import type { Caller } from '../lib/model/placement.ts'
import { ForbiddenError, NameTaken, ValidationError } from './errors.ts'
import type { ClientPolicy } from './policy.ts'

const OWNED =
  'is the admin network (HYDRAZINE_ADMIN_NETWORK): Hydrazine alone writes it and its ports'

/**
 * Refuses a write or deletion of group `name` when it is the admin network (configured, or
 * stored under the reserved tenant), and a spec that names the reserved tenant.
 */
export function refuseAdminGroup(
  policy: Pick<ClientPolicy, 'adminNetwork'>,
  caller: Caller,
  name: string,
  existing: ResourceGroup | undefined,
  spec?: unknown,
): void {
  const admin = policy.adminNetwork?.group === name || isAdminTenant(existing?.spec.tenantId ?? '')
  if (admin) {
    if (caller.kind === 'tenant') throw new NameTaken('resource group', name)
    throw new ForbiddenError(`resource group ${name} ${OWNED}`)
  }
  const tenant =
    typeof spec === 'object' && spec !== null ? Reflect.get(spec, 'tenantId') : undefined
  if (typeof tenant === 'string' && isAdminTenant(tenant)) {
    throw new ValidationError([
      { path: 'tenantId', message: `${tenant} is reserved for the admin network; pick another` },
    ])
  }
}

/** Refuses a host write that joins the admin network's group (`group`), and any write or deletion of an admin port. */
export function refuseAdminPort(
  group: ResourceGroup | undefined,
  existing: ManagedResource | undefined,
  existingGroup?: ResourceGroup,
): void {
  if (group && isAdminTenant(group.spec.tenantId)) {
    throw new ForbiddenError(
      `resource group ${group.name} ${OWNED}; a host joins it when its tenant lets go of its port`,
    )
  }
  if (existing && existingGroup && isAdminTenant(existingGroup.spec.tenantId)) {
    throw new ForbiddenError(
      `managed resource ${existing.name} is a port of the admin network ${existingGroup.name}: Hydrazine alone writes and deletes it`,
    )
  }
}
