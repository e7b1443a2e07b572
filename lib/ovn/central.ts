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
  /**
   * OVSDB remote of the same SB database for the controller itself, which checks DPU acks
   * against it (an embedded central's unix socket; `sb` when not given).
   */
  readonly sbController: string
  /** The service name reported in `softwareNetworkConfiguration.ovnService`. */
  readonly service: string
  /** The group whose own central this is; absent for a central every group shares. */
  readonly group?: string
}

export interface OvnCentralProvider {
  /**
   * Makes sure the group's central exists and answers (starting it, or restarting it
   * after a crash); idempotent. Throws a retryable error while it cannot answer yet.
   */
  ensure(group: string): Promise<OvnCentralEndpoints>
  /** The group is gone; its central may go too (stopped, its files removed). Idempotent. */
  release(group: string): Promise<void>
  /** Every central the provider runs now (reconcile looks for orphan rows in each). */
  list(): Promise<OvnCentralEndpoints[]>
  /**
   * The groups the provider keeps a central of their own for, running or not (none for a
   * shared central): reconcile releases those whose group is gone.
   */
  groups(): Promise<string[]>
}

/** Every group in the one central the stack runs (small sites, the embedded default). */
export function sharedCentralProvider(endpoints: {
  readonly nb: string
  readonly sb: string
  readonly sbController?: string
}) {
  const shared: OvnCentralEndpoints = {
    nb: endpoints.nb,
    sb: endpoints.sb,
    sbController: endpoints.sbController ?? endpoints.sb,
    service: 'shared',
  }
  return {
    ensure: async () => shared,
    release: async () => {},
    list: async () => [shared],
    groups: async () => [],
  } satisfies OvnCentralProvider
}
