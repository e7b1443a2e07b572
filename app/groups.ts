/**
 * The checks a group or host request passes before anything is stored, shared by the
 * writes (`object-writes.ts`) and their dry runs (`object-plans.ts`): the operator's
 * policy, a group spec's DHCP server and held addresses, a host request's group and
 * addresses.
 */
import { IPV6_OWNERS, networkSpecOf } from '../lib/ipam/group-network.ts'
import type { Ipam } from '../lib/ipam/index.ts'
import { RESERVED_HOST_NAMES } from '../lib/ovn/index.ts'
import { hostAddressIssues } from '../lib/state/group-network.ts'
import {
  cidrContains,
  ManagedResourceRequest,
  type ResourceGroup,
  ResourceGroupSpec,
  Rfc1123Label,
} from '../lib/state/objects.ts'
import type { Caller } from '../lib/state/placement.ts'
import type { Quotas } from '../lib/state/quotas.ts'
import { type StateStore, StoreConflict } from '../lib/state/store.ts'
import { AddressesHeld, ValidationError, validate } from './errors.ts'

/** The operator's rules every request is held to. */
export interface ClientPolicy {
  /** The DHCP servers a group may relay to (`HYDRAZINE_DHCP_SERVERS`). */
  readonly dhcpServers: readonly string[]
  /**
   * Per-tenant limits on groups, hosts and public IPs (`HYDRAZINE_QUOTAS`; default
   * `DEFAULT_QUOTAS`). They hold for an operator's request too: the quota is the tenant's.
   */
  readonly quotas?: Quotas
  /** The fabric has IPv6 (`HYDRAZINE_FABRIC_DUMMY_IP6`): IPv6-only hosts may have access. */
  readonly fabric6?: boolean
}

/**
 * Refuses (AddressesHeld, 409) a group spec whose network would leave a held address
 * behind, naming the field: the gateway that would take it, or `extraSubnets` when its
 * subnet would go. A dry run refuses the same (`object-plans.ts`).
 */
export async function refuseOrphans(
  addresses: Pick<Ipam, 'orphans'>,
  name: string,
  spec: ResourceGroupSpec,
): Promise<void> {
  // A host's SLAAC address follows network6: a moved or removed one gives it back.
  const orphans = await addresses.orphans(name, networkSpecOf({ spec }), {
    releaseDropped: IPV6_OWNERS,
  })
  if (orphans.length === 0) return
  const subnets = [
    ...(spec.network ? [{ cidr: spec.network.cidr, path: 'network.gateway' }] : []),
    ...(spec.extraSubnets ?? []).map((s, i) => ({
      cidr: s.cidr,
      path: `extraSubnets.${i}.gateway`,
    })),
    ...(spec.network6 ? [{ cidr: spec.network6.cidr, path: 'network6.gateway' }] : []),
  ]
  throw new AddressesHeld(
    orphans.map(({ ip, owner }) => {
      const subnet = subnets.find((s) => cidrContains(s.cidr, ip))
      const what = subnet ? 'would be the gateway' : 'lies in no subnet of the new spec'
      const path = subnet?.path ?? (ip.includes(':') ? 'network6' : 'extraSubnets')
      return { path, message: `${ip} is held by ${owner} and ${what}` }
    }),
  )
}

/** A group's spec validated, its DHCP server one the operator relays to. */
export function validGroupSpec(name: string, spec: unknown, policy: ClientPolicy) {
  validate(Rfc1123Label, name, 'name')
  const valid = validate(ResourceGroupSpec, spec)
  if (valid.dhcpServer !== undefined && !policy.dhcpServers.includes(valid.dhcpServer)) {
    throw new ValidationError([
      {
        path: 'dhcpServer',
        message:
          policy.dhcpServers.length === 0
            ? 'no DHCP servers are configured for relaying (HYDRAZINE_DHCP_SERVERS)'
            : `must be one of the operator's DHCP servers: ${policy.dhcpServers.join(', ')}`,
      },
    ])
  }
  return valid
}

/** A host request validated, with its group: one the caller may see and not being deleted. */
export async function hostRequestOf(
  store: StateStore,
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
  const group = await store.getGroup(request.resourceGroup)
  if (!group || (caller.kind === 'tenant' && group.spec.tenantId !== caller.tenant)) {
    throw new ValidationError([
      { path: 'resourceGroup', message: `resource group ${request.resourceGroup} does not exist` },
    ])
  }
  if (group.deletion) {
    throw new StoreConflict(`resource group ${group.name} is being deleted`, 'Terminating')
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
