/**
 * The one rule for what a handler does with an error, and the typed errors that say
 * "retry later". BullMQ's `UnrecoverableError` / `WaitingChildrenError` are the model:
 * a typed error tells the queue what to do.
 */
import { UnrecoverableError } from 'bullmq'
import * as v from 'valibot'
import { HydrazineError } from '../../lib/errors.ts'
import type { ChildJobs, ChildRef } from './deps.ts'

/** Something this work needs is not there yet (a group still provisioning): retry later. */
export class NotReady extends HydrazineError {
  constructor(message: string) {
    super('NOT_READY', message, { retryable: true })
  }
}

/**
 * A group's SB admits only its chassis, and no identity of the DPU is on record yet: its
 * agent presents none the controller takes (an agent older than the controller, or one
 * whose certificate is not of the DPUs' CA for it). Retry: it is recorded from the
 * agent's heartbeat once it presents one.
 */
export class DpuIdentityAwaited extends HydrazineError {
  constructor(
    readonly group: string,
    readonly dpuId: string,
    why: string,
  ) {
    super(
      'DPU_IDENTITY_AWAITED',
      `DPU ${dpuId} waits to join the SB of group ${group}: no identity of it is on record and ${why}; an agent of this version presents its certificate in its heartbeat`,
      { retryable: true },
    )
  }
}

/** A child job has not returned its ack yet: retry later. */
export class AwaitingAck extends HydrazineError {
  constructor(message: string) {
    super('AWAITING_ACK', message, { retryable: true })
  }
}

/**
 * What the group's members are sent (its networks, its DHCP server) changed while this work
 * computed from the spec it read, e.g. an attach whose group's `network6` moved: retry
 * later, and the next run reads the new spec (or finds itself superseded by the members'
 * re-drive). `cause` is what the old spec led to, if it failed.
 */
export class GroupChanged extends HydrazineError {
  constructor(
    readonly group: string,
    readonly specVersion: number,
    cause?: HydrazineError,
  ) {
    super(
      'GROUP_CHANGED',
      `resource group ${group} changed since its spec version ${specVersion} was read${cause ? ` (${cause.code}: ${cause.message})` : ''}`,
      { retryable: true, cause },
    )
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

/** A child's ack as its parent reads it: the value checked against its schema, or why not. */
export type Ack<T> =
  | { readonly state: 'acked'; readonly value: T }
  /** Failed for good, or answered something its schema refuses. */
  | { readonly state: 'failed'; readonly reason: string }
  | { readonly state: 'pending' }

/**
 * A child's ack, read by its deterministic job id and checked against its schema.
 *
 * @example
 * const ack = await readAck(deps.children, ConfigureAck, { queue, jobId })
 * if (ack.state === 'failed') … // the host is Failed, with ack.reason
 */
export async function readAck<S extends v.GenericSchema>(
  children: Pick<ChildJobs, 'outcome'>,
  schema: S,
  ref: ChildRef,
): Promise<Ack<v.InferOutput<S>>> {
  const outcome = await children.outcome(ref)
  if (outcome.state === 'failed') return { state: 'failed', reason: outcome.reason }
  if (outcome.state !== 'completed') return { state: 'pending' }
  const parsed = v.safeParse(schema, outcome.value)
  if (parsed.success) return { state: 'acked', value: parsed.output }
  const issues = parsed.issues.map((i) => `${v.getDotPath(i) ?? '(ack)'}: ${i.message}`)
  return { state: 'failed', reason: `${ref.jobId} answered an invalid ack: ${issues.join('; ')}` }
}
