/**
 * The FRR queue's producer and consumer. Names, payload schemas, acks and job ids are
 * the queue's contract in `lib/jobs/frr.ts`.
 */
import { type ConnectionOptions, type JobsOptions, type Queue, Worker } from 'bullmq'
import * as v from 'valibot'
import {
  type AnnouncementSource,
  type FrrController,
  type ResyncResult,
  resync,
} from '../lib/frr/index.ts'
import {
  AnnouncePayload,
  FRR_QUEUE,
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
