/**
 * A host request as the caller may make it: the name not another tenant's, the request
 * well formed, its group one the caller may see, not being deleted and not a Fabric group
 * the controller cannot build (no `HYDRAZINE_FABRIC_ASN`), a Fabric group's leaking host
 * (FabricAccess, PublicAccess) not at an address another host leaks already, its
 * addresses in the group's subnets. Reads through the request's own reads (`reads.ts`), so a host
 * and its group are read once however many checks ask.
 */

import { formatIp, parseIp } from '../lib/ipam/address.ts'
import { hostAddressIssues } from '../lib/model/group-network.ts'
import {
  implementationOf,
  ManagedResourceRequest,
  type ResourceGroup,
  Rfc1123Label,
} from '../lib/model/objects.ts'
import type { Caller } from '../lib/model/placement.ts'
import { RESERVED_HOST_NAMES } from '../lib/ovn/index.ts'
import type { FabricLeaks } from '../lib/state/fabric-leaks.ts'
import { parseIsolationHoldOwner } from '../lib/state/isolation-holds.ts'
import { StoreConflict } from '../lib/state/store.ts'
import { refuseAdminPort } from './admin-network.ts'
import { LeakedAddressTaken, NameTaken, ValidationError, validate } from './errors.ts'
import type { ClientPolicy } from './policy.ts'
import type { RequestReads } from './reads.ts'

/** `resourceGroup` names no group the caller may see. */
function noSuchGroup(name: unknown): ValidationError {
  return new ValidationError([
    { path: 'resourceGroup', message: `resource group ${String(name)} does not exist` },
  ])
}

/** Hosts cannot join a Fabric group the controller cannot build (no fabric AS configured). */
function fabricHostsUnavailable(group: string): ValidationError {
  return new ValidationError([
    {
      path: 'resourceGroup',
      message: `resource group ${group} is a Fabric group, and Fabric mode is not available here (the operator has not set HYDRAZINE_FABRIC_ASN): no host can attach to it (attach it to an Overlay group)`,
    },
  ])
}

/**
 * A Fabric host leaking an address another host leaks already: the fabric's border holds
 * every leaked address in one table, so each must be unique (HTTP 409, naming the field).
 * The holder is not named: it may be another tenant's. An address a force-detached host
 * leaked is held by its DPU's pending isolation (`isolation-holds.ts`): the 409 says which
 * DPU must confirm it first.
 */
export function leakedAddressTaken(
  field: string,
  address: string,
  heldFor?: { readonly dpuId: string },
): LeakedAddressTaken {
  return new LeakedAddressTaken([
    {
      path: field,
      message: heldFor
        ? `${address} is held until the DPU that announced it confirms isolation of the host that leaked it (that host was detached without its DPU's ack, and the DPU may still announce it at the fabric's border); choose another, or use hostAccess None`
        : `${address} is leaked at the fabric's border by another host already: an address a FabricAccess or PublicAccess host is reached at must be unique in the fabric; choose another, or use hostAccess None`,
    },
  ])
}

/**
 * Refuses a Fabric group's leaking host whose `hostIP` another host leaks (the attach
 * claims it atomically; this answers the common case at once, as a 409).
 */
export async function refuseTakenLeak(
  leaks: Pick<FabricLeaks, 'holderOf'>,
  name: string,
  request: ManagedResourceRequest,
  group: ResourceGroup,
): Promise<void> {
  if (implementationOf(group.spec) !== 'Fabric' || request.hostAccess === 'None') return
  if (request.hostIP === undefined) return
  const address = formatIp(parseIp(request.hostIP))
  const holder = await leaks.holderOf(address)
  if (holder === undefined || holder === name) return
  throw leakedAddressTaken('hostIP', address, parseIsolationHoldOwner(holder))
}

/** Whether the controller reported the Fabric group cannot be built here. */
function fabricUnavailable(group: ResourceGroup): boolean {
  return group.status.conditions.some(
    (c) => c.type === 'FabricConfigured' && c.reason === 'FABRIC_NOT_AVAILABLE',
  )
}

/** The group as `caller` may see it: undefined when missing or another tenant's. */
export async function visibleGroup(
  reads: RequestReads,
  caller: Caller,
  name: string,
): Promise<ResourceGroup | undefined> {
  const group = await reads.group(name)
  if (!group || (caller.kind === 'tenant' && group.spec.tenantId !== caller.tenant))
    return undefined
  return group
}

/**
 * Refuses, before the request is even read, a tenant's write to a host name another
 * tenant holds (NameTaken) or into a group it cannot see (as if the group did not exist).
 */
export async function refuseForeignHost(
  reads: RequestReads,
  caller: Caller,
  name: string,
  spec: unknown,
): Promise<void> {
  if (caller.kind !== 'tenant') return
  const existing = await reads.host(name)
  if (existing && !(await visibleGroup(reads, caller, existing.spec.resourceGroup))) {
    throw new NameTaken('managed resource', name)
  }
  // Another tenant's group looks exactly like one that does not exist.
  const asked = typeof spec === 'object' && spec !== null ? Reflect.get(spec, 'resourceGroup') : 0
  if (typeof asked === 'string' && !(await visibleGroup(reads, caller, asked))) {
    throw noSuchGroup(asked)
  }
}

/** A host request validated, with its group: one the caller may see and not being deleted. */
export async function hostRequestOf(
  reads: RequestReads,
  name: string,
  spec: unknown,
  caller: Caller,
  policy: Pick<ClientPolicy, 'fabric6'> = {},
): Promise<{ request: ManagedResourceRequest; group: ResourceGroup }> {
  validate(Rfc1123Label, name, 'name')
  if (RESERVED_HOST_NAMES.has(name)) {
    throw new ValidationError([
      { path: 'name', message: `${name} is reserved for the group's router link; pick another` },
    ])
  }
  const request = validate(ManagedResourceRequest, spec)
  const group = await visibleGroup(reads, caller, request.resourceGroup)
  if (!group) throw noSuchGroup(request.resourceGroup)
  refuseAdminPort(group, undefined)
  if (group.deletion) {
    throw new StoreConflict(`resource group ${group.name} is being deleted`, 'Terminating')
  }
  if (implementationOf(group.spec) === 'Fabric') {
    if (fabricUnavailable(group)) throw fabricHostsUnavailable(group.name)
  }
  const issues = hostAddressIssues(
    request,
    { ...group.spec, name: group.name },
    policy.fabric6 ?? false,
  )
  if (issues.length > 0) {
    throw new ValidationError(issues.map((i) => ({ path: i.path.join('.'), message: i.message })))
  }
  return { request, group }
}
