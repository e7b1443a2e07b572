/**
 * The FRR queue's producer and consumer. Names, payload schemas, acks and job ids are
 * the queue's contract in `lib/jobs/frr.ts`.
 */
import { type ConnectionOptions, type JobsOptions, Queue, Worker } from 'bullmq'
import * as v from 'valibot'
import { ConfigError } from '../lib/errors.ts'
import {
  type AnnouncementSource,
  createChangeGate,
  type FrrController,
  RESYNC_MAX_WITHDRAWALS,
  type ResyncResult,
  resync,
} from '../lib/frr/index.ts'
import {
  AnnouncePayload,
  FRR_QUEUE,
  FRR_RESYNC_JOB,
  type FrrAck,
  type FrrJob,
  FrrJobName,
  type FrrPayload,
  frrJobId,
  WithdrawPayload,
} from '../lib/jobs/frr.ts'

const DEFAULT_JOB_OPTIONS: JobsOptions = {
  attempts: 5,
  backoff: { type: 'exponential', delay: 500 },
  removeOnComplete: { age: 24 * 3600, count: 10_000 },
  removeOnFail: { age: 7 * 24 * 3600, count: 10_000 },
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
        jobs.map(({ name, data }) => {
          const parsed = v.parse(
            name === FrrJobName.announce ? AnnouncePayload : WithdrawPayload,
            data,
          )
          return {
            name,
            data: parsed,
            opts: { ...DEFAULT_JOB_OPTIONS, jobId: frrJobId(name, parsed) },
          }
        }),
      ),
  }
}

/**
 * How many FRR jobs the consumer holds at once (128). BullMQ's worker fetches jobs one
 * Redis round trip at a time until it holds this many, and only then starts them; jobs
 * that finish fetch the next one in the same round trip. A window of 128 lets one batch
 * go to bgpd while the next is fetched: 1,000 queued announcements take ~0.4 s this way,
 * against ~0.7 s with a window of 512 that is first filled completely.
 */
export const FRR_CONCURRENCY = 128

export interface FrrConsumerOptions {
  /** BullMQ connection for the worker; needs `maxRetriesPerRequest: null`. */
  readonly connection: ConnectionOptions
  readonly frr: FrrController
  /** What must be announced; read at start and at every resync to repair FRR. */
  readonly source: AnnouncementSource
  /** The job handler, e.g. `createFrrSync({ frr })`. */
  readonly handler: (job: FrrJob) => Promise<FrrAck>
  /** Jobs handled at once; they are applied to FRR in batches (default `FRR_CONCURRENCY`). */
  readonly concurrency?: number
  /** BullMQ key prefix (default `bull`). */
  readonly prefix?: string
  /**
   * How often FRR is resynced with the source while the consumer runs, in ms (default
   * 30 s, as `reconcile`; 0 = only at start). Repairs drift: a `network` line removed or
   * added by hand, a withdrawal a lost job never made.
   */
  readonly resyncEveryMs?: number
  /** Most prefixes one resync may withdraw (default 16); see `planResync` in `lib/frr`. */
  readonly maxResyncWithdrawals?: number
  /**
   * What each periodic resync changed or held back (also its job's result); default: a
   * line on stderr when it held, failed or met a conflict.
   */
  readonly onResync?: (result: ResyncResult) => void
  /** Worker errors (lost Redis connection, …); default: a line on stderr. */
  readonly onError?: (error: Error) => void
}

export interface FrrConsumer {
  readonly worker: Worker<unknown, FrrAck | ResyncResult, string>
  /** What the start-up resync changed. */
  readonly resynced: ResyncResult
  close(): Promise<void>
}

/** How the periodic resync's jobs are kept: the latest results, for operators to read. */
const RESYNC_JOB_OPTIONS = {
  removeOnComplete: { count: 50, age: 24 * 3600 },
  removeOnFail: { count: 50, age: 7 * 24 * 3600 },
} as const

/**
 * Runs next to Hydrazine's FRR: first resyncs FRR with the source (announce what is
 * allocated, withdraw Hydrazine prefixes that are not), then consumes the FRR queue, and
 * resyncs again every `resyncEveryMs`.
 *
 * The periodic resync is this consumer's own job scheduler on the FRR queue, not a step
 * of (or a job enqueued by) the controller's `reconcile`: the consumer stays the one
 * writer of FRR state, and the only one that decides when to repair it — it may run on
 * another machine next to FRR, and repairs FRR whether or not a controller's reconcile
 * runs or is stuck on a slow OVN central. In this process a resync also waits for the
 * job changes in flight and holds new ones back (`createChangeGate`), so it never plans
 * from a running config that a concurrent batch is changing.
 */
export async function startFrrConsumer(options: FrrConsumerOptions): Promise<FrrConsumer> {
  const every = options.resyncEveryMs ?? 30_000
  if (!(Number.isInteger(every) && every >= 0))
    throw new ConfigError(`FRR resyncEveryMs must be an integer >= 0 (ms), not ${every}`)
  const maxWithdrawals = options.maxResyncWithdrawals ?? RESYNC_MAX_WITHDRAWALS
  if (!(Number.isInteger(maxWithdrawals) && maxWithdrawals >= 0))
    throw new ConfigError(
      `FRR maxResyncWithdrawals must be an integer >= 0, not ${options.maxResyncWithdrawals}`,
    )
  const onResync = options.onResync ?? reportTrouble
  const onError =
    options.onError ?? ((error: Error) => process.stderr.write(`frr consumer: ${error.message}\n`))
  const resyncNow = () => resync(options.frr, options.source, { maxWithdrawals })

  const resynced = await resyncNow()
  const gate = createChangeGate()
  let closed = false
  // bgpd came back after its connection dropped: it may have restarted from its startup
  // configuration. Resync at once rather than at the next period.
  options.frr.onReconnect(() => {
    if (closed) return
    gate
      .alone(resyncNow)
      .then(onResync, (error: unknown) =>
        onError(error instanceof Error ? error : new Error(String(error))),
      )
  })
  const prefix = options.prefix ? { prefix: options.prefix } : {}
  const worker = new Worker<unknown, FrrAck | ResyncResult, string>(
    FRR_QUEUE,
    async (job) => {
      if (job.name !== FRR_RESYNC_JOB) return gate.change(() => options.handler(job))
      const result = await gate.alone(resyncNow)
      onResync(result)
      return result
    },
    {
      connection: options.connection,
      concurrency: options.concurrency ?? FRR_CONCURRENCY,
      ...prefix,
    },
  )
  // An EventEmitter 'error' without a listener would crash the process.
  worker.on('error', onError)
  await worker.waitUntilReady()

  const queue = new Queue(FRR_QUEUE, { connection: options.connection, ...prefix })
  try {
    if (every > 0) {
      await queue.upsertJobScheduler(
        FRR_RESYNC_JOB,
        { every },
        { name: FRR_RESYNC_JOB, data: {}, opts: RESYNC_JOB_OPTIONS },
      )
    } else await queue.removeJobScheduler(FRR_RESYNC_JOB)
  } catch (error) {
    await worker.close()
    await queue.close()
    throw error
  }
  return {
    worker,
    resynced,
    async close() {
      closed = true
      await worker.close()
      await queue.close()
    },
  }
}

function reportTrouble(result: ResyncResult) {
  const trouble = [
    result.held.length > 0 ? `held (not withdrawn) ${result.held.join(' ')}` : '',
    result.failed.length > 0 ? `not shown in time ${result.failed.join(' ')}` : '',
    result.conflicts.length > 0 ? `configured by hand ${result.conflicts.join(' ')}` : '',
  ].filter(Boolean)
  if (trouble.length > 0) process.stderr.write(`frr resync: ${trouble.join('; ')}\n`)
}
