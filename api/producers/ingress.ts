/**
 * The queue producers' front door: a BullMQ worker on each configured producer's own queue
 * (`lib/jobs/producers.ts`), turning each job into the same operation an HTTP request
 * would be, made as that producer's principal (`app/operations.ts`), and each refusal into
 * a job failed for good that says why (its code, then every bad field).
 *
 * Who a job comes from is the queue it was taken from: the producer's Redis user reaches
 * no other. The job's own `producer` must name that producer; a job with none, or naming
 * another or an unknown one, is refused before its request is read, and nothing is done.
 */
import { type Job, UnrecoverableError, Worker } from 'bullmq'
import * as v from 'valibot'
import type { Operations } from '../../app/index.ts'
import { HydrazineError } from '../../lib/errors.ts'
import {
  isProducerRequestName,
  type Producer,
  type ProducerRequestName,
  ProducerRequests,
  type ProducerResult,
  producerQueueName,
} from '../../lib/jobs/producers.ts'
import type { Caller } from '../../lib/model/placement.ts'
import type { RedisClient } from '../../lib/redis/connection.ts'

/** What a producer's requests are made through: the operations of its principal. */
export type ProducerOperations = Pick<
  Operations,
  'applyGroup' | 'deleteGroup' | 'applyHost' | 'deleteHost'
>

export interface ProducerIngressOptions {
  readonly producers: readonly Producer[]
  /** A new BullMQ connection (`maxRetriesPerRequest: null`) to the producers' Redis. */
  readonly connection: () => RedisClient
  /** The operations of a caller (`createOperations({ client })`). */
  readonly operations: (caller: Caller) => ProducerOperations
  /** BullMQ key prefix (default `bull`). */
  readonly prefix?: string
  /** Requests handled at once per producer (default 8). */
  readonly concurrency?: number
  /** Told of each request refused or failed, with the producer's id. */
  readonly onFailed?: (producer: string, job: string | undefined, reason: string) => void
}

export interface ProducerIngress {
  close(): Promise<void>
}

const PRODUCER_REQUIRED = 'producer is required: the id this producer was configured with'
/** Whose a job says it is; a payload with no `producer` (or not an object) names none. */
const Claimed = v.object({ producer: v.string(PRODUCER_REQUIRED) }, PRODUCER_REQUIRED)

/**
 * The handler of one producer's queue.
 *
 * @example
 * const handle = producerRequestHandler(producer, ids, operations)
 * await handle({ name: 'group.apply', data: { producer: 'ci-a', name: 'g', spec } })
 */
export function producerRequestHandler(
  producer: Producer,
  known: ReadonlySet<string>,
  operations: (caller: Caller) => ProducerOperations,
): (job: Pick<Job, 'name' | 'data'>) => Promise<ProducerResult> {
  return async function producerRequest(job) {
    const claimed = v.safeParse(Claimed, job.data ?? {})
    if (!claimed.success) {
      throw new UnrecoverableError(`UNKNOWN_PRODUCER: producer: ${claimed.issues[0].message}`)
    }
    const who = claimed.output.producer
    if (who !== producer.id) {
      throw new UnrecoverableError(
        known.has(who)
          ? `UNKNOWN_PRODUCER: producer: ${JSON.stringify(who)} is not this queue's producer (${producer.id})`
          : `UNKNOWN_PRODUCER: producer: no producer ${JSON.stringify(who)} is configured`,
      )
    }
    if (!isProducerRequestName(job.name)) {
      throw new UnrecoverableError(
        `UNKNOWN_REQUEST: ${JSON.stringify(job.name)} is not a request; a producer may queue ${Object.keys(ProducerRequests).join(', ')}`,
      )
    }
    try {
      return await perform(operations(producer.principal), job.name, job.data)
    } catch (error) {
      if (error instanceof HydrazineError && !error.retryable) {
        throw new UnrecoverableError(`${error.code}: ${error.message}`)
      }
      throw error
    }
  }
}

async function perform(
  ops: ProducerOperations,
  name: ProducerRequestName,
  data: unknown,
): Promise<ProducerResult> {
  const parse = <S extends v.GenericSchema>(schema: S): v.InferOutput<S> => {
    const parsed = v.safeParse(schema, data)
    if (parsed.success) return parsed.output
    const fields = parsed.issues.map((i) => `${v.getDotPath(i) ?? '(payload)'}: ${i.message}`)
    throw new UnrecoverableError(`INVALID: ${fields.join('; ')}`)
  }
  const accepted = async (
    kind: ProducerResult['kind'],
    call: Promise<{ object: { name: string; specVersion: number }; jobId?: string }>,
  ): Promise<ProducerResult> => {
    const { object, jobId } = await call
    return { kind, name: object.name, specVersion: object.specVersion, ...(jobId ? { jobId } : {}) }
  }
  switch (name) {
    case 'group.apply': {
      const request = parse(ProducerRequests[name])
      return accepted('ResourceGroup', ops.applyGroup(request.name, request.spec))
    }
    case 'host.apply': {
      const request = parse(ProducerRequests[name])
      return accepted('ManagedResource', ops.applyHost(request.name, request.spec))
    }
    case 'group.delete': {
      const request = parse(ProducerRequests[name])
      return accepted('ResourceGroup', ops.deleteGroup(request.name, request.force))
    }
    case 'host.delete': {
      const request = parse(ProducerRequests[name])
      return accepted('ManagedResource', ops.deleteHost(request.name, request.force))
    }
  }
}

/** A worker on each producer's queue; `close` stops them all. */
export async function startProducerIngress(
  options: ProducerIngressOptions,
): Promise<ProducerIngress> {
  const known = new Set(options.producers.map((p) => p.id))
  const workers: { worker: Worker; connection: RedisClient }[] = []
  for (const producer of options.producers) {
    const connection = options.connection()
    const worker = new Worker(
      producerQueueName(producer.id),
      producerRequestHandler(producer, known, options.operations),
      {
        connection,
        concurrency: options.concurrency ?? 8,
        ...(options.prefix ? { prefix: options.prefix } : {}),
      },
    )
    worker.on('failed', (job, error) => options.onFailed?.(producer.id, job?.id, error.message))
    workers.push({ worker, connection })
  }
  await Promise.all(workers.map(({ worker }) => worker.waitUntilReady()))
  return {
    async close() {
      await Promise.all(workers.map(({ worker }) => worker.close()))
      for (const { connection } of workers) connection.disconnect()
    },
  }
}
