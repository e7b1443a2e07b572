/**
 * Per-tenant quotas: how many resource groups, hosts (managed resources) and public IPs
 * (hosts with `hostAccess: PublicAccess`, each of which holds one) a tenant may have, the
 * limits that hold for a tenant, and the refusal when one is full. The store counts and
 * checks them (`lib/state/quotas.ts`).
 */

import { HydrazineError } from '../errors.ts'

export interface QuotaLimits {
  /** Resource groups. */
  readonly groups: number
  /** Managed resources (hosts), over all the tenant's groups. */
  readonly hosts: number
  /** Hosts with PublicAccess: each holds one public IP. */
  readonly publicIps: number
}

export type QuotaName = keyof QuotaLimits

export const QUOTA_NAMES: readonly QuotaName[] = ['groups', 'hosts', 'publicIps']

/**
 * The operator's quotas: `default` for every tenant, and per-tenant overrides (a field
 * left out takes the default's).
 *
 * @example
 * { default: { groups: 50, hosts: 2000, publicIps: 100 }, tenants: { 'tenant-a': { hosts: 5000 } } }
 */
export interface Quotas {
  readonly default: QuotaLimits
  readonly tenants: Readonly<Record<string, Partial<QuotaLimits>>>
}

/** Generous limits for when the operator sets none. */
export const DEFAULT_QUOTA_LIMITS: QuotaLimits = { groups: 100, hosts: 10_000, publicIps: 1_000 }

export const DEFAULT_QUOTAS: Quotas = { default: DEFAULT_QUOTA_LIMITS, tenants: {} }

/** The limits that hold for `tenant`. */
export function limitsOf(quotas: Quotas, tenant: string): QuotaLimits {
  return { ...quotas.default, ...quotas.tenants[tenant] }
}

const WHAT: Readonly<Record<QuotaName, string>> = {
  groups: 'resource groups',
  hosts: 'managed resources',
  publicIps: 'public IPs (hosts with PublicAccess)',
}

/**
 * The tenant already has as many objects of a kind as its quota allows (HTTP 403
 * `QUOTA_EXCEEDED`, gRPC RESOURCE_EXHAUSTED). Not retryable: it takes a deletion or a
 * higher quota. The request changed nothing.
 */
export class QuotaExceeded extends HydrazineError {
  constructor(
    readonly quota: QuotaName,
    readonly tenant: string,
    readonly limit: number,
  ) {
    super(
      'QUOTA_EXCEEDED',
      `tenant ${tenant} has reached its quota "${quota}" of ${limit} ${WHAT[quota]}; delete one or ask the operator for more`,
    )
  }
}

/**
 * The site already runs as many OVN centrals as the operator allows
 * (`HYDRAZINE_MAX_CENTRALS`): a group's central runs while it has hosts (and for a short
 * grace after its last one leaves), so the first host of a group without one is refused
 * (HTTP 503 `CENTRALS_EXHAUSTED`, gRPC RESOURCE_EXHAUSTED) whoever asks, so that no tenant
 * can take every process and every megabyte the centrals need. An empty group holds no
 * central and is not refused. The request changed nothing; it can succeed once another
 * group's last host is detached (and its grace ends) or the limit is raised.
 */
export class CentralsExhausted extends HydrazineError {
  constructor(readonly limit: number) {
    super(
      'CENTRALS_EXHAUSTED',
      `the site runs its maximum of ${limit} OVN centrals (HYDRAZINE_MAX_CENTRALS); a group's central runs while it has hosts, and this group has none running: its first host can attach once another group's last host is detached or the operator raises HYDRAZINE_MAX_CENTRALS`,
    )
  }
}

/** The tenant a write counts against and the limits that hold for it. */
export interface TenantQuota {
  readonly tenant: string
  readonly limits: QuotaLimits
}
