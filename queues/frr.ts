import { isIPv4 } from 'node:net'
import { type ConnectionOptions, type Job, type JobsOptions, type Queue, Worker } from 'bullmq'
import * as v from 'valibot'
import {
  type AnnouncementSource,
  type FrrController,
  type ResyncResult,
  resync,
} from '../lib/frr/index.ts'

/**
 * The FRR queue: jobs that make Hydrazine's FRR announce or withdraw a public IP /32.
 * The job's return value is the ack (`FrrAck`), given once FRR's BGP table shows it.
 */
export const FRR_QUEUE = 'frr'

export const FrrJobName = { announce: 'announce', withdraw: 'withdraw' } as const
export type FrrJobName = (typeof FrrJobName)[keyof typeof FrrJobName]

const ipv4 = v.pipe(
  v.string(),
  v.check(isIPv4, 'must be an IPv4 address (IPv6 NAT is not supported)'),
)
const owner = v.pipe(v.string(), v.minLength(1, 'must name the owning object, e.g. the host'))
const specVersion = v.pipe(v.number(), v.integer(), v.minValue(0))

/** `announce`: announce `publicIp/32` with next hop `nextHop` (the host's DPU NAT IP). */
export const AnnouncePayload = v.object({ publicIp: ipv4, nextHop: ipv4, owner, specVersion })
export type AnnouncePayload = v.InferOutput<typeof AnnouncePayload>

/** `withdraw`: stop announcing `publicIp/32`. `nextHop` is informational. */
export const WithdrawPayload = v.object({
  publicIp: ipv4,
  nextHop: v.optional(ipv4),
  owner,
  specVersion,
})
export type WithdrawPayload = v.InferOutput<typeof WithdrawPayload>

export type FrrPayload = AnnouncePayload | WithdrawPayload

/** The ack: what FRR's BGP table showed for the prefix when the job finished. */
export interface FrrAck {
  readonly publicIp: string
  readonly prefix: string
  /** True when the table shows the prefix (via `nextHop`), false when it is gone. */
  readonly announced: boolean
  readonly nextHop: string | null
  readonly owner: string
  readonly specVersion: number
  /** ISO time the table was read. */
  readonly observedAt: string
}

/** What the handler reads of a job; a BullMQ `Job` is one. */
export type FrrJob = Pick<Job<unknown, FrrAck, string>, 'name' | 'data'>

/**
 * A job id that makes duplicates harmless: the same change of the same owner at the same
 * spec version is one job. (BullMQ ids may not contain ':'.)
 *
 * @example frrJobId('announce', p) // 'frr-announce-203.0.113.7-host-a-v3'
 */
export function frrJobId(name: FrrJobName, payload: FrrPayload): string {
  const ownerPart = payload.owner.replace(/[^A-Za-z0-9._-]/g, '_')
  return `frr-${name}-${payload.publicIp}-${ownerPart}-v${payload.specVersion}`
}

const DEFAULT_JOB_OPTIONS: JobsOptions = {
  attempts: 5,
  backoff: { type: 'exponential', delay: 500 },
  removeOnComplete: { age: 24 * 3600, count: 10_000 },
  removeOnFail: { age: 7 * 24 * 3600 },
}

/** Typed producer for the FRR queue: validates the payload before anything is enqueued. */
export function createFrrProducer(queue: Queue) {
  const add = (name: FrrJobName, payload: FrrPayload, opts: JobsOptions = {}) =>
    queue.add(name, payload, { ...DEFAULT_JOB_OPTIONS, jobId: frrJobId(name, payload), ...opts })
  return {
    announce: (payload: AnnouncePayload, opts?: JobsOptions) =>
      add(FrrJobName.announce, v.parse(AnnouncePayload, payload), opts),
    withdraw: (payload: WithdrawPayload, opts?: JobsOptions) =>
      add(FrrJobName.withdraw, v.parse(WithdrawPayload, payload), opts),
    /** Many changes in one round trip (e.g. a group's hosts). */
    addBulk: (jobs: readonly { name: FrrJobName; data: FrrPayload }[]) =>
      queue.addBulk(
        jobs.map(({ name, data }) => ({
          name,
          data: v.parse(name === FrrJobName.announce ? AnnouncePayload : WithdrawPayload, data),
          opts: { ...DEFAULT_JOB_OPTIONS, jobId: frrJobId(name, data) },
        })),
      ),
  }
}

export interface FrrConsumerOptions {
  /** BullMQ connection for the worker; needs `maxRetriesPerRequest: null`. */
  readonly connection: ConnectionOptions
  readonly frr: FrrController
  /** What must be announced; read once at start to resync FRR. */
  readonly source: AnnouncementSource
  /** The job handler, e.g. `createFrrSync({ frr })`. */
  readonly handler: (job: FrrJob) => Promise<FrrAck>
  /** Jobs handled at once; they are applied to FRR in batches (default 512). */
  readonly concurrency?: number
  /** BullMQ key prefix (default `bull`). */
  readonly prefix?: string
  /** Worker errors (lost Redis connection, …); default: a line on stderr. */
  readonly onError?: (error: Error) => void
}

export interface FrrConsumer {
  readonly worker: Worker<unknown, FrrAck, string>
  /** What the start-up resync changed. */
  readonly resynced: ResyncResult
  close(): Promise<void>
}

/**
 * Runs next to Hydrazine's FRR: first resyncs FRR with the source (announce what is
 * allocated, withdraw Hydrazine prefixes that are not), then consumes the FRR queue.
 */
export async function startFrrConsumer(options: FrrConsumerOptions): Promise<FrrConsumer> {
  const resynced = await resync(options.frr, options.source)
  const worker = new Worker<unknown, FrrAck, string>(FRR_QUEUE, options.handler, {
    connection: options.connection,
    concurrency: options.concurrency ?? 512,
    ...(options.prefix ? { prefix: options.prefix } : {}),
  })
  // An EventEmitter 'error' without a listener would crash the process.
  worker.on(
    'error',
    options.onError ?? ((error) => process.stderr.write(`frr consumer: ${error.message}\n`)),
  )
  await worker.waitUntilReady()
  return { worker, resynced, close: () => worker.close() }
}
