/**
 * The narrow interfaces handlers depend on. Only the wiring in `queues/worker.ts`
 * constructs the real clients behind them.
 */
import type { Job } from 'bullmq'
import { UnrecoverableError } from 'bullmq'
import * as v from 'valibot'
import type { ProtocolVersion } from '../lib/agent-protocol/index.ts'
import type { Ipam } from '../lib/ipam/index.ts'
import type { NbTopologyCache, OvsdbClient } from '../lib/ovn/index.ts'
import type { StateStore } from '../lib/state/store.ts'
import type { OvnCentralProvider } from '../queues/ovn-provider.ts'

/** Fabric facts every gateway router needs (seed 000, "Network Fabric Requirements"). */
export interface FabricSettings {
  /** Reserved address with prefix on each gateway router's fabric port, e.g. `172.18.0.254/24`. */
  readonly dummyIp: string
  /** Fabric next hop for traffic leaving the gateway routers. */
  readonly gateway?: string
  /** The DPUs' bridge mapping name for localnet ports. */
  readonly physicalNetwork: string
}

/** A long-lived connection to one NB database and the monitor-fed cache of its rows. */
export interface NbConnection {
  readonly client: OvsdbClient
  readonly cache: NbTopologyCache
}

/** NB connections, one per remote, opened on first use. */
export interface NbClients {
  get(nbRemote: string): Promise<NbConnection>
}

/** Adds a child job whose return value the parent waits for (the ack). */
export interface ChildJobs {
  add(
    queue: string,
    name: string,
    data: object,
    opts: { jobId: string; parent: { id: string; queue: string } },
  ): Promise<void>
  /**
   * The return value (the ack) of a completed child, or undefined while it has none.
   * Child ids are deterministic, so a parent reads each ack by id — also when a second
   * run of the parent found the child already done under the first run.
   */
  result(queue: string, jobId: string): Promise<unknown>
}

/** What the controller knows of DPU agents from their heartbeats. */
export interface AgentDirectory {
  /** The newest protocol version the DPU's agent speaks (the oldest shipped if unknown). */
  protocolFor(dpuId: string): Promise<ProtocolVersion>
}

export interface HandlerDeps {
  readonly store: StateStore
  readonly ipam: Ipam
  readonly ovn: OvnCentralProvider
  readonly nb: NbClients
  readonly children: ChildJobs
  readonly agents: AgentDirectory
  readonly fabric: FabricSettings
  /**
   * Called at each named step a handler reaches (e.g. `attach:topology-applied`). A no-op
   * in production; crash-safety tests kill the worker process at a chosen one.
   */
  readonly checkpoint: (point: string) => void
}

/** The steps a handler that waits on children records in `job.data.step`. */
export type Step = 'converge' | 'await'

/**
 * Validates a job payload; a bad one fails the job at once (no retries) with every
 * invalid field named.
 */
export function parsePayload<S extends v.GenericSchema>(schema: S, job: Job): v.InferOutput<S> {
  const { step: _step, ...data } = (job.data ?? {}) as Record<string, unknown>
  const result = v.safeParse(schema, data)
  if (!result.success) {
    const fields = result.issues.map((i) => `${v.getDotPath(i) ?? '(payload)'}: ${i.message}`)
    throw new UnrecoverableError(`invalid ${job.name} payload: ${fields.join('; ')}`)
  }
  return result.output
}

export function stepOf(job: Job): Step {
  const step = (job.data as { step?: unknown } | undefined)?.step
  return step === 'await' ? 'await' : 'converge'
}

/** The parent reference for child jobs of `job`. */
export function parentOf(job: Job): { id: string; queue: string } {
  if (!job.id) throw new Error(`job ${job.name} has no id`)
  return { id: job.id, queue: job.queueQualifiedName }
}
