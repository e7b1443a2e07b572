/**
 * The one rule for what a handler does with an error, and the typed errors that say
 * "retry later". BullMQ's `UnrecoverableError` / `WaitingChildrenError` are the model:
 * a typed error tells the queue what to do.
 */
import { UnrecoverableError } from 'bullmq'
import * as v from 'valibot'
import { HydrazineError } from '../../lib/errors.ts'
import type { ChildJobs } from './deps.ts'

/** Something this work needs is not there yet (a group still provisioning): retry later. */
export class NotReady extends HydrazineError {
  constructor(message: string) {
    super('NOT_READY', message, { retryable: true })
  }
}

/** A child job has not returned its ack yet: retry later. */
export class AwaitingAck extends HydrazineError {
  constructor(message: string) {
    super('AWAITING_ACK', message, { retryable: true })
  }
}

/** True when retrying the same work cannot help: a Hydrazine error that says so. */
export function isPermanent(error: unknown): error is HydrazineError {
  return error instanceof HydrazineError && !error.retryable
}

/**
 * Permanent or retry later, decided in one place: a permanent error (`isPermanent`) is
 * recorded by `onPermanent` (the object's status says why) and fails the job at once;
 * anything else — retryable, or unexpected — is rethrown for BullMQ to retry with backoff.
 *
 * @example
 * const { ip } = await deps.ipam.allocate(group, host).catch((error: unknown) =>
 *   failOrRetry(error, (e) => markFailed(e)),
 * )
 */
export async function failOrRetry(
  error: unknown,
  onPermanent: (error: HydrazineError) => Promise<void>,
): Promise<never> {
  if (!isPermanent(error)) throw error
  await onPermanent(error)
  throw new UnrecoverableError(`${error.code}: ${error.message}`)
}

/**
 * A child's ack, read by its deterministic job id and checked against its schema;
 * undefined while the child has not completed (or returned something else).
 */
export async function readAck<S extends v.GenericSchema>(
  children: Pick<ChildJobs, 'result'>,
  schema: S,
  queue: string,
  jobId: string,
): Promise<v.InferOutput<S> | undefined> {
  const parsed = v.safeParse(schema, await children.result(queue, jobId))
  return parsed.success ? parsed.output : undefined
}
