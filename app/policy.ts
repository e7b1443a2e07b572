/** The operator's rules every request is held to, and the quota a tenant's write counts against. */
import type { AdminNetwork } from '../lib/model/admin-network.ts'
import type { NetworkImplementationType } from '../lib/model/objects.ts'
import { DEFAULT_QUOTAS, limitsOf, type Quotas, type TenantQuota } from '../lib/model/quotas.ts'

export interface ClientPolicy {
  /** The DHCP servers a group may relay to (`HYDRAZINE_DHCP_SERVERS`). */
  readonly dhcpServers: readonly string[]
  /**
   * Per-tenant limits on groups, hosts and public IPs (`HYDRAZINE_QUOTAS`; default
   * `DEFAULT_QUOTAS`). They hold for an operator's request too: the quota is the tenant's.
   */
  readonly quotas?: Quotas
  /**
   * How many OVN centrals the site may run at once when each group runs its own, on demand
   * (`HYDRAZINE_MAX_CENTRALS`): a group holds one while it has hosts, so the first host of
   * a group holding none is refused past it (CENTRALS_EXHAUSTED). Undefined when groups
   * share a central, or centrals run from group creation on (no limit).
   */
  readonly maxCentrals?: number
  /**
   * The CIDRs every group's Southbound admits by address (`HYDRAZINE_K8S_DPU_CIDRS`): a
   * DPU whose NAT address lies inside is refused (`lib/model/southbound-admission.ts`).
   */
  readonly southboundCidrs?: readonly string[]
  /**
   * The provider's admin network (`HYDRAZINE_ADMIN_NETWORK`): Hydrazine alone writes its
   * group and its ports; a request for either is refused.
   */
  readonly adminNetwork?: AdminNetwork
  /** The fabric has IPv6 (`HYDRAZINE_FABRIC_DUMMY_IP6`): IPv6-only hosts may have access. */
  readonly fabric6?: boolean
  /**
   * A new group's `networkImplementationType` when its request gives none
   * (`HYDRAZINE_DEFAULT_NETWORK_IMPLEMENTATION`; default Overlay).
   */
  readonly defaultNetworkImplementation?: NetworkImplementationType
}

/** The quota a write for `tenant` counts against. */
export function quotaOf(policy: ClientPolicy, tenant: string): TenantQuota {
  return { tenant, limits: limitsOf(policy.quotas ?? DEFAULT_QUOTAS, tenant) }
}
