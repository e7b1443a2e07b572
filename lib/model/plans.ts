/**
 * A dry run's answer (`?dryRun=true` on PUT and DELETE): what the request would change,
 * computed from the stored state, the group's NB and the address pools — with nothing
 * stored, enqueued, allocated or written.
 */

import type { ManagedResourceSpec, ResourceGroupSpec } from './objects.ts'

/** One change to Hydrazine's FRR: a /32 announced via a next hop, or withdrawn. */
export interface PlannedPrefix {
  /** `A.B.C.D/32`; null when the address would be taken from the pool at apply time. */
  readonly prefix: string | null
  readonly nextHop?: string
}

/** A job a DPU agent would be sent. */
export interface PlannedAgentJob {
  readonly dpu: string
  readonly job: 'configure' | 'isolate'
  readonly host: string
}

/** An address a pool would hand out or take back. */
export interface PlannedAddress {
  readonly pool: 'group' | 'public'
  readonly owner: string
  /** The address; null when the pool picks it at apply time. */
  readonly ip: string | null
}

export interface ChangePlan {
  /** The request was validated and planned; nothing was changed. */
  readonly dryRun: true
  /**
   * NB rows by id (`<table>/<key>`) in the group's central (`central`: its service name,
   * as status shows it; null: none running yet).
   */
  readonly nb: {
    readonly central: string | null
    readonly insert: readonly string[]
    readonly update: readonly string[]
    readonly delete: readonly string[]
  }
  readonly frr: {
    readonly announce: readonly PlannedPrefix[]
    readonly withdraw: readonly PlannedPrefix[]
  }
  readonly agentJobs: readonly PlannedAgentJob[]
  readonly addresses: {
    readonly allocate: readonly PlannedAddress[]
    readonly release: readonly PlannedAddress[]
  }
  /** Plain words for what else would happen (a spec unchanged, a pool entry added). */
  readonly notes: readonly string[]
}

/**
 * Plans of the four writes that touch a group's topology, computed the way the handlers
 * would (`functions/plan.ts`); the application asks it after its own checks. Undefined:
 * no such object.
 */
export interface Planner {
  group(name: string, spec: ResourceGroupSpec): Promise<ChangePlan>
  groupDeletion(name: string): Promise<ChangePlan | undefined>
  /** `spec` as the store would hold it (placed on its DPU). */
  host(name: string, spec: ManagedResourceSpec): Promise<ChangePlan>
  hostDeletion(name: string): Promise<ChangePlan | undefined>
}
