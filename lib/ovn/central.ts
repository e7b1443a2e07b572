/**
 * Where a group's OVN central lives. Handlers ask the provider and never care whether
 * every group shares one central or each has its own (so that a fault stays in its group):
 * `shared` (below), `per-group` (infra/centrals/local.ts: one embedded central per group),
 * `external` (infra/centrals/external.ts: the operator names each group's remotes) and
 * `kubernetes` (infra/centrals/kubernetes.ts: a StatefulSet per group) all slot in behind
 * the same interface.
 */
import { HydrazineError } from '../errors.ts'

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
  /**
   * The version of the central's ovn-northd (`25.03.0`), when the provider runs it and
   * knows it (embedded centrals). A DPU whose ovn-controller is of an older OVN release is
   * not configured for it (`OvnControllerTooOld`).
   */
  readonly northdVersion?: string
}

export interface OvnCentralProvider {
  /**
   * Makes sure the group's central exists and answers (starting it, or restarting it
   * after a crash); idempotent. Throws a retryable error while it cannot answer yet.
   */
  ensure(group: string): Promise<OvnCentralEndpoints>
  /**
   * How many CPU cores the ovn-northd processes of this provider's centrals share, when
   * they share them (the embedded per-group centrals, all on this machine): the commits of
   * several busy centrals are paced so that together they ask for about that much CPU.
   * Undefined when each central's northd has CPU of its own (a shared or external central,
   * a Kubernetes pod per central).
   */
  readonly northdCpus?: number | undefined
  /**
   * Milliseconds of CPU the group's central's ovn-northd has used since it started, when
   * the provider runs it on this machine (the embedded per-group centrals); undefined when
   * it does not run or cannot be measured. A group's commits are paced by what its northd
   * spent on the ones before (`commitDelayMs`). Optional.
   */
  northdCpuMs?(group: string): Promise<number | undefined>
  /** The group is gone; its central may go too (stopped, its files removed). Idempotent. */
  release(group: string): Promise<void>
  /**
   * The group has no host: its central stops, keeping its databases (and, embedded, its
   * SB port and chassis CA), and the next `ensure` starts it again as it was. Idempotent.
   * Optional: a provider without it runs a group's central for as long as the group
   * exists (a shared central, the operator's).
   */
  stop?(group: string): Promise<void>
  /** Every central the provider runs now (reconcile looks for orphan rows in each). */
  list(): Promise<OvnCentralEndpoints[]>
  /**
   * The groups that have a central of their own, running or not (none for a shared
   * central): a DPU that moves to another group leaves its chassis row behind in none of
   * them, and reconcile reports those whose group is gone (`orphanCentrals`).
   */
  groups(): Promise<string[]>
  /**
   * The certificate a DPU's `ovn-controller` presents to the group's SB when that SB
   * admits only its own group's chassis (an embedded per-group central over TLS, a
   * Kubernetes-run one whose relay has a chassis CA of its own): the
   * DPU's identity (PEM, from the DPUs' CA, as `StateStore.dpus.identity` keeps it)
   * certified again by the group's own chassis CA, same CN and key. Undefined when the
   * group's SB takes a DPU's identity as it is (a shared, external or plaintext central).
   * Throws `ChassisIdentityRefused` when the SB needs one and the identity is missing or
   * not a valid certificate of the DPUs' CA for that DPU. Optional.
   */
  chassisCertificate?(
    group: string,
    dpu: { readonly id: string; readonly identity: string | null },
  ): Promise<string | undefined>
  /**
   * The CA (PEM) that signed the server certificate of the group's SB, when it is the
   * group's own (an embedded per-group central over TLS, a Kubernetes-run one whose relay
   * has a chassis CA of its own): a DPU's `ovn-controller` trusts it alone for that SB
   * (`configure`'s `group.sbCa`), so neither another group's SB nor anything else
   * Hydrazine's CA signed can stand in for it. Undefined when the DPU trusts the CA it was
   * given for it (a shared, external, plaintext central, a Kubernetes-run one on the SB
   * Secret every group shares, or one an earlier version started). Optional.
   */
  southboundCa?(group: string): Promise<string | undefined>
  /**
   * The DPU `dpuId` (or each of several) no longer serves the group: its SB stops
   * admitting it. An embedded per-group central over TLS replaces the group's chassis CA
   * (on disk when the central does not run, without starting it) and drops every session
   * of its SB; a Kubernetes-run one replaces the CA in its Secret, and its relay drops
   * every session once the kubelet has updated its files. The DPUs still serving the group
   * need a new `chassisCertificate` (their next `configure`) and reconnect with it: true
   * then. False when nothing changed (a
   * plaintext central, a group without a central). Optional.
   */
  leaveChassis?(group: string, dpuId: string | readonly string[]): Promise<boolean>
  /**
   * Every group whose SB admits only its own chassis (an embedded per-group central over
   * TLS, running or not; a Kubernetes-run one with a chassis CA of its own), with the
   * DPUs its current chassis CA certified whose certificate is still valid, each of which
   * could open the SB now (none, after an upgrade or once they expired). Reconcile has
   * those that serve no host of the group leave it (`leaveChassis`), and sends a
   * certificate to each DPU serving a Ready host of the group that is not listed; a
   * detach whose DPU left the group asks for that `group` only. Optional.
   */
  chassisCertified?(
    group?: string,
  ): Promise<readonly { readonly group: string; readonly dpuIds: readonly string[] }[]>
  /**
   * The DPUs whose chassis certificate for a group is due for renewal (less than half of
   * its validity left): each needs a `configure` with a new `chassisCertificate`. The
   * controller's reconcile asks. Optional.
   */
  chassisRenewalsDue?(): Promise<readonly { readonly group: string; readonly dpuId: string }[]>
  /**
   * Finishes what earlier releases could not (the Kubernetes provider: a NetworkPolicy kept
   * while its central's pods were stopping). Reconcile calls it; optional.
   */
  tidy?(): Promise<void>
}

/**
 * Why a group's central cannot answer, as the group's status shows it (`OvnConfigured`
 * condition): `CentralUnavailable` (it did not start, it is being released),
 * `CentralNotConfigured` (the operator has not named its remotes yet) or `CentralDamaged`
 * (a database of it that served cannot be read, and is not replaced without the operator).
 */
export type CentralUnavailableReason =
  | 'CentralUnavailable'
  | 'CentralNotConfigured'
  | 'CentralDamaged'
  /** The central answers, but its ovn-northd has not processed the group's topology yet. */
  | 'NorthdPending'

/**
 * A group's central cannot answer: it did not start, is being released or closed, or is
 * not configured yet. Retryable while it may answer later.
 *
 * @example
 * throw new CentralUnavailableError('tenant-a', 'not in /etc/hz/centrals.json yet', {
 *   retryable: true,
 *   reason: 'CentralNotConfigured',
 * })
 */
export class CentralUnavailableError extends HydrazineError {
  readonly reason: CentralUnavailableReason

  constructor(
    readonly group: string,
    why: string,
    options: { retryable: boolean; cause?: unknown; reason?: CentralUnavailableReason },
  ) {
    super('OVN_CENTRAL_UNAVAILABLE', `OVN central of group ${group}: ${why}`, options)
    this.reason = options.reason ?? 'CentralUnavailable'
  }
}

/**
 * A group's SB admits only its own chassis, and the DPU's certificate on record cannot be
 * certified for it: there is none (its credentials were issued without a PKI, or by a
 * version that did not keep it, and its agent presented none), or it is not a valid one of
 * the DPUs' CA (Hydrazine's, or the operator's) for that DPU. The DPU needs new credentials
 * (or, on Kubernetes, an agent that presents its identity). Not retryable.
 */
export class ChassisIdentityRefused extends HydrazineError {
  constructor(
    readonly group: string,
    readonly dpuId: string,
    why: string,
  ) {
    super(
      'CHASSIS_IDENTITY_REFUSED',
      `DPU ${dpuId} cannot join the SB of group ${group}: ${why}; issue its credentials again`,
    )
  }
}

/**
 * A DPU's ovn-controller is of an older OVN release than its group's ovn-northd. OVN
 * supports the other order only (ovn-controller first, then northd and the databases:
 * OVN's "OVN Upgrades"): an older ovn-controller may not understand the logical flows a
 * newer northd writes (measured: 25.03 northd, 23.03 controllers, gateway, NAT, public IP
 * and DHCP relay broken) and, with `ovn-match-northd-version`, stops applying any change.
 * Not retryable: upgrade the DPU's OVN, then attach again.
 */
export class OvnControllerTooOld extends HydrazineError {
  constructor(
    readonly group: string,
    readonly dpuId: string,
    readonly controllerVersion: string,
    readonly northdVersion: string,
  ) {
    super(
      'OVN_CONTROLLER_TOO_OLD',
      `DPU ${dpuId}'s ovn-controller ${controllerVersion} is older than group ${group}'s ` +
        `ovn-northd ${northdVersion}: upgrade the DPU's OVN first (OVN's upgrade order), ` +
        'then attach again',
    )
  }
}

/** Every group in the one central the stack runs (small sites, the embedded default). */
export function sharedCentralProvider(endpoints: {
  readonly nb: string
  readonly sb: string
  readonly sbController?: string
  readonly northdVersion?: string
}) {
  const shared: OvnCentralEndpoints = {
    nb: endpoints.nb,
    sb: endpoints.sb,
    sbController: endpoints.sbController ?? endpoints.sb,
    service: 'shared',
    ...(endpoints.northdVersion ? { northdVersion: endpoints.northdVersion } : {}),
  }
  return {
    ensure: async () => shared,
    release: async () => {},
    list: async () => [shared],
    groups: async () => [],
  } satisfies OvnCentralProvider
}
