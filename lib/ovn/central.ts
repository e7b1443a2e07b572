/**
 * Where a group's OVN central lives. Handlers ask the provider and never care whether
 * every group shares one central or each has its own (seed 000's blast-radius design):
 * a per-group provider slots in behind the same interface.
 */
export interface OvnCentralEndpoints {
  /** OVSDB remote of the NB database, for the controller. */
  readonly nb: string
  /** OVSDB remote of the SB database, for ovn-controller on the DPUs. */
  readonly sb: string
  /** The service name reported in `softwareNetworkConfiguration.ovnService`. */
  readonly service: string
}

export interface OvnCentralProvider {
  /** Makes sure the group's central exists and answers; idempotent. */
  ensure(group: string): Promise<OvnCentralEndpoints>
  /** The group is gone; its central may go too. Idempotent. */
  release(group: string): Promise<void>
  /** Every central the provider runs (reconcile looks for orphan rows in each). */
  list(): Promise<OvnCentralEndpoints[]>
}

/** Every group in the one central the stack runs (small sites, the embedded default). */
export function sharedCentralProvider(endpoints: Omit<OvnCentralEndpoints, 'service'>) {
  const shared: OvnCentralEndpoints = { ...endpoints, service: 'shared' }
  return {
    ensure: async () => shared,
    release: async () => {},
    list: async () => [shared],
  } satisfies OvnCentralProvider
}
