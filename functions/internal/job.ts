/**
 * Mechanics every handler shares: reading its payload, the two steps of a handler that
 * waits on children (converge, then await), and the parent reference for its children.
 */
import { type Job, UnrecoverableError, WaitingChildrenError } from 'bullmq'
import * as v from 'valibot'

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

/** Where a handler stands: `converge` on its first run, `await` once its children exist. */
export function stepOf(job: Job): Step {
  const step = (job.data as { step?: unknown } | undefined)?.step
  return step === 'await' ? 'await' : 'converge'
}

/** The parent reference for child jobs of `job`. */
export function parentOf(job: Job): { id: string; queue: string } {
  if (!job.id) throw new Error(`job ${job.name} has no id`)
  return { id: job.id, queue: job.queueQualifiedName }
}

/**
 * Ends the converge step: records that the children exist, then parks the job until
 * they have all completed (BullMQ's `moveToWaitingChildren`; the job runs again, in its
 * `await` step, once they did). Returns at once when no child is pending, so the caller
 * goes straight on to its await step.
 *
 * @example
 * if (stepOf(job) === 'converge') {
 *   await deps.children.add(queue, 'configure', payload, { jobId, parent: parentOf(job) })
 *   await waitForChildren(job, token)
 * }
 * const ack = await readAck(deps.children, ConfigureAck, queue, jobId)
 */
export async function waitForChildren(job: Job, token: string | undefined): Promise<void> {
  await job.updateData({ ...(job.data as object), step: 'await' })
  if (token && (await job.moveToWaitingChildren(token))) throw new WaitingChildrenError()
}
