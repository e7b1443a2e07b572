/**
 * The narrow interfaces handlers depend on. The composition root (`infra/`) builds the
 * real clients and the queue wiring (`queues/worker.ts`) hands each handler what it needs.
 */
import type { Job } from 'bullmq'
import type { ProtocolVersion } from '../../lib/agent-protocol/index.ts'
import type { Ipam } from '../../lib/ipam/index.ts'
import type { ControllerJobs } from '../../lib/jobs/redrive.ts'
import type { AdminNetwork } from '../../lib/model/admin-network.ts'
import type {
  ApplyResult,
  NbConnection,
  OvnCentralEndpoints,
  OvnCentralProvider,
} from '../../lib/ovn/index.ts'
import type { CertificateSigner } from '../../lib/pki/index.ts'
import type { StateStore } from '../../lib/state/store.ts'
import type { FabricSettings } from './fabric.ts'
import type { GroupState, TopologyProblems } from './group-state.ts'

export type { ControllerJobs } from '../../lib/jobs/redrive.ts'
export type { FabricSettings } from './fabric.ts'

/** NB connections, one per remote, opened on first use (`NbPool` in lib/ovn is one). */
export interface NbClients {
  get(nbRemote: string): Promise<NbConnection>
  /** Closes the connection to a central that is gone. */
  drop(nbRemote: string): Promise<void>
}

/**
 * The Southbound, as the controller reads it to check what DPUs ack (`SbPool` in lib/ovn
 * is one): the chassis a logical port is bound to, or null.
 */
export interface Southbound {
  boundChassis(sbRemote: string, logicalPort: string): Promise<string | null>
  /**
   * Removes a chassis (its `Chassis`, `Chassis_Private` and `Encap` rows) that no longer
   * serves the SB's group; true when there was one.
   */
  removeChassis(sbRemote: string, name: string): Promise<boolean>
  /**
   * Waits until ovn-northd has processed an NB commit: the SB has a `Port_Binding` for
   * each of `ports.added` and none for `ports.removed`. False when `timeoutMs` passed first.
   */
  settled(
    sbRemote: string,
    ports: { readonly added: readonly string[]; readonly removed: readonly string[] },
    timeoutMs: number,
  ): Promise<boolean>
  /** Closes the connection to a central that is gone. */
  drop(sbRemote: string): Promise<void>
}

/** A child job, by its queue and deterministic id. */
export interface ChildRef {
  readonly queue: string
  readonly jobId: string
}

/** Where a child job stands, as its parent sees it. */
export type ChildOutcome =
  | { readonly state: 'completed'; readonly value: unknown }
  /** Failed for good: its attempts are spent or its error said retrying cannot help. */
  | { readonly state: 'failed'; readonly reason: string }
  | { readonly state: 'pending' }
  /** No such job: never added, or removed since. */
  | { readonly state: 'missing' }

/**
 * Child jobs: work a handler hands to another queue (a DPU agent, FRR, or another
 * handler) and whose return value is the ack it waits for. A child never writes into
 * its parent's queue — agents may only touch their own queue's keys — so a parent does
 * not rely on BullMQ flows: it parks itself (delayed) and is woken when a child it waits
 * for finishes, then reads each child's outcome by id.
 */
export interface ChildJobs {
  /**
   * Adds the child unless a job with its id exists already (an earlier run of the same
   * work added it): ids are deterministic, so adding twice is harmless.
   */
  add(queue: string, name: string, data: object, opts: { jobId: string }): Promise<ChildRef>
  /** Where the child stands now. */
  outcome(ref: ChildRef): Promise<ChildOutcome>
  /**
   * Gives a child not yet finished this payload instead of its own: its next attempt runs
   * with it (one running now keeps what it read). False when it has finished or is gone.
   */
  renew(ref: ChildRef, data: object): Promise<boolean>
  /**
   * Parks `job` (delayed) until one of `refs` finishes, or a while passes, by throwing
   * BullMQ's `DelayedError`. Returns at once when none of them is pending.
   */
  park(job: Job, token: string | undefined, refs: readonly ChildRef[]): Promise<void>
}

/** What the controller knows of DPU agents from their heartbeats. */
export interface AgentDirectory {
  /** The newest protocol version the DPU's agent speaks (the oldest shipped if unknown). */
  protocolFor(dpuId: string): Promise<ProtocolVersion>
  /** The version of the DPU's ovn-controller, as its agent last reported it; undefined if not. */
  ovnVersionOf(dpuId: string): Promise<string | undefined>
  /**
   * Whether the DPU's agent takes Fabric jobs (it advertises protocol 3.x); undefined when
   * it has no live heartbeat (not known).
   */
  speaksFabric(dpuId: string): Promise<boolean | undefined>
  /**
   * Whether the DPU's agent builds Fabric hosts' access levels (it advertises 3.1+);
   * undefined when it has no live heartbeat (not known).
   */
  speaksFabricAccess(dpuId: string): Promise<boolean | undefined>
  /** The identity (PEM) the DPU's agent presents in its live heartbeat; undefined if none. */
  identityOf(dpuId: string): Promise<string | undefined>
}

/** A group's topology as one apply committed it (`GroupApplier`, group-apply.ts). */
export interface GroupApplied {
  readonly endpoints: OvnCentralEndpoints
  /** The state the committed (or already matching) topology was computed from. */
  readonly state: GroupState
  readonly result: ApplyResult
  /** What the topology left out (hosts it could not build as asked); also in status. */
  readonly problems: TopologyProblems
}

/** Applies groups' topology to their centrals (`GroupApplier` in group-apply.ts). */
export interface GroupApplies {
  /**
   * Applies the group; rejects with `GroupGone` when it no longer exists. With
   * `compareAll`, compares every row of the group with NB.
   */
  apply(group: string, options?: { compareAll?: boolean }): Promise<GroupApplied>
  /**
   * Starts or joins the apply that covers what the caller wrote before asking, without
   * waiting for it; `waits`: that apply is queued (behind another, or the commit pace).
   */
  request(group: string, options?: { compareAll?: boolean }): GroupApplyRequest
}

/** An apply asked for (`GroupApplies.request`). */
export interface GroupApplyRequest {
  /** Settles when the apply that covers the caller's writes has committed (or failed). */
  readonly applied: Promise<GroupApplied>
  /** The apply is queued behind another or the pace, not started at once. */
  readonly waits: boolean
}

/** Everything a handler may use. Each handler's factory takes only the part it needs. */
export interface HandlerDeps {
  readonly store: StateStore
  readonly ipam: Ipam
  readonly ovn: OvnCentralProvider
  readonly nb: NbClients
  readonly southbound: Southbound
  /** Applies a group's whole topology to its NB (coalesced per group). */
  readonly groups: GroupApplies
  readonly children: ChildJobs
  /** The controller's own queue: re-driven objects' jobs go there. */
  readonly jobs: ControllerJobs
  readonly agents: AgentDirectory
  readonly fabric: FabricSettings
  /**
   * The fabric's AS number (`HYDRAZINE_FABRIC_ASN`), which Fabric groups' VRFs speak EVPN
   * in. Absent: no DPU is configured for a Fabric group (it reports Failed).
   */
  readonly fabricAsn?: number
  /**
   * The zone group DNS domains live in (`HYDRAZINE_DNS_ZONE`): a group's hosts resolve as
   * `<hostname>.<group>.<zone>` inside it. Absent: no group has DNS records.
   */
  readonly dnsZone?: string
  /**
   * The Geneve tunnels between DPUs are IPsec (`HYDRAZINE_GENEVE_IPSEC`): every `configure`
   * asks the DPU's agent to give OVS its IPsec certificate. Absent: cleartext Geneve.
   */
  readonly geneveIpsec?: boolean
  /**
   * The provider's admin network (`HYDRAZINE_ADMIN_NETWORK`): its group holds every host
   * port no tenant host holds (`admin-sync.ts`). Absent: there is none.
   */
  readonly admin?: AdminNetwork
  /**
   * Called, and awaited, at each named step a handler reaches (e.g.
   * `attach:topology-applied`), with the object it works on where the handler names it (a
   * host's attach: the host). A no-op in production; crash-safety tests kill the worker
   * process at a chosen one, race tests hold a step there, and the attach bench times them.
   */
  readonly checkpoint: (point: string, object?: string) => void | Promise<void>
  /**
   * An attach or detach whose group apply waits for the pace of its central's commits
   * parks meanwhile, its worker slot free (`ParkedWork`), instead of waiting in its slot.
   * Absent: off (the controller, `startController`, turns it on unless told otherwise:
   * `HYDRAZINE_PARK_FOR_COMMIT`). Waiting in the slot caps the attaches one process carries
   * at its slots divided by the pace (see `WORKER_CONCURRENCY`); parked, the scale bench's
   * 10,000 attaches went from 118.9/s to 177.5/s from a burst, and a steady 100/s from
   * p95 60.1 s to 29.6 s (docs/benchmarks.md).
   */
  readonly parkForCommit?: boolean
  /**
   * Called when a host turns Ready, with the seconds from its spec's acceptance (the
   * stored `updatedAt` of its current spec version) to the Ready status write: the
   * request → Ready latency, for metrics. Absent: nobody is told.
   */
  readonly onHostReady?: (seconds: number) => void
  /**
   * Centrals on demand (with a provider that can `stop`): a group's central starts with
   * its first host and stops `idleMs` after its last one left (`central-demand.ts`).
   * Absent: every group's central runs from its creation on.
   */
  readonly centralsOnDemand?: { readonly idleMs: number }
  /** Keeps each group's status in line with its hosts (`group-hosts.ts`); told of every host status write. */
  readonly groupHosts?: {
    touch(group: string): Promise<void>
    refresh(group: string): Promise<void>
  }
  /**
   * The CA of the DPUs' identities (Hydrazine's, or the operator's:
   * `HYDRAZINE_DPU_CA_FILE`): an identity a DPU's agent presents in its heartbeat is
   * recorded as the DPU's when this CA issued it for that DPU and none as new is on record
   * (`lib/agent-protocol/identity.ts`). Absent: only `POST /v1/dpus/{id}/credentials`
   * records identities.
   */
  readonly dpuIdentities?: Pick<CertificateSigner, 'issued'>
}
