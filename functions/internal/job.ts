/**
 * Mechanics every handler shares: reading its payload, and the two steps of a handler
 * that waits on children (converge, then await).
 */
import { DelayedError, type Job, UnrecoverableError } from 'bullmq'
import * as v from 'valibot'
import type { StateStore } from '../../lib/state/store.ts'
import type { ChildJobs, ChildOutcome, ChildRef } from './deps.ts'
import { NotReady } from './errors.ts'

/**
 * The steps a handler that waits on children records in `job.data.step`; `applied`: the
 * converge step parked while its group's NB commit waits for the pace (host.attach).
 */
export type Step = 'converge' | 'applied' | 'await'

/**
 * Validates a job payload; a bad one fails the job at once (no retries) with every
 * invalid field named.
 */
export function parsePayload<S extends v.GenericSchema>(schema: S, job: Job): v.InferOutput<S> {
  // What the job records of its own progress is not part of its payload.
  const {
    step: _step,
    awaiting: _awaiting,
    waits: _waits,
    ...data
  } = (job.data ?? {}) as Record<string, unknown>
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
  return step === 'await' || step === 'applied' ? step : 'converge'
}

/**
 * Ends the converge step: records the children this job waits for, then parks it until
 * they have all finished (it runs again, in its `await` step, when one does). Returns at
 * once when none is pending, so the caller goes straight on to its await step.
 *
 * @example
 * if (stepOf(job) === 'converge') {
 *   const ref = await deps.children.add(queue, 'configure', payload, { jobId })
 *   await waitForChildren(job, token, deps.children, [ref])
 * } else {
 *   await stillWaiting(job, token, deps.children)
 * }
 */
export async function waitForChildren(
  job: Job,
  token: string | undefined,
  children: ChildJobs,
  refs: readonly ChildRef[],
): Promise<void> {
  await job.updateData({ ...(job.data as object), step: 'await', awaiting: refs })
  await children.park(job, token, refs)
}

/**
 * The await step's first line: while a child this job waits for is still pending, parks
 * it again. A child that vanished (never added: the converge step was cut off) sends
 * the job back to converge, which adds it.
 */
export async function stillWaiting(
  job: Job,
  token: string | undefined,
  children: ChildJobs,
): Promise<void> {
  const refs = awaitingOf(job)
  const outcomes = await Promise.all(refs.map((ref) => children.outcome(ref)))
  if (outcomes.some((o) => o.state === 'missing')) {
    await job.updateData({ ...(job.data as object), step: 'converge' })
    throw new NotReady(`a child of ${job.name} ${job.id} vanished; converging again`)
  }
  // Woken because they finished (the common case): no second look before reading them.
  if (outcomes.every((o) => o.state !== 'pending')) return
  await children.park(job, token, refs)
}

function awaitingOf(job: Job): ChildRef[] {
  const awaiting = (job.data as { awaiting?: unknown } | undefined)?.awaiting
  if (!Array.isArray(awaiting)) return []
  return awaiting.filter(
    (r): r is ChildRef =>
      typeof r === 'object' &&
      r !== null &&
      typeof (r as ChildRef).queue === 'string' &&
      typeof (r as ChildRef).jobId === 'string',
  )
}

/**
 * `children` for one run of a handler: a child that has finished (completed or failed, for
 * good) is read once, so that the await step's look at its children (`stillWaiting`) and
 * its reading of their acks share that read.
 */
export function readFinishedOnce(children: ChildJobs): ChildJobs {
  const finished = new Map<string, ChildOutcome>()
  return {
    add: (queue, name, data, opts) => children.add(queue, name, data, opts),
    park: (job, token, refs) => children.park(job, token, refs),
    renew: (ref, data) => children.renew(ref, data),
    async outcome(ref) {
      const key = `${ref.queue}/${ref.jobId}`
      const known = finished.get(key)
      if (known) return known
      const outcome = await children.outcome(ref)
      if (outcome.state === 'completed' || outcome.state === 'failed') finished.set(key, outcome)
      return outcome
    },
  }
}

/**
 * Runs `work` holding the object's lock (`store.locks`), so that two steps on one object
 * (a host's attach and its detach) never interleave. While another step holds it, the
 * job is delayed a moment and runs again, without spending one of its attempts.
 *
 * @example
 * return oneAtATime(deps.store, { job, token }, 'mr', host, () => attach(…))
 */
export async function oneAtATime<T>(
  store: Pick<StateStore, 'locks'>,
  { job, token }: { readonly job: Job; readonly token: string | undefined },
  kind: 'rg' | 'mr',
  name: string,
  work: () => Promise<T>,
): Promise<T> {
  const release = await store.locks.acquire(kind, name, `${job.queueName}/${job.id}`, token)
  if (!release) {
    const busy = `${kind === 'mr' ? 'host' : 'group'} ${name} is busy with another step`
    if (token === undefined) throw new NotReady(busy)
    await job.moveToDelayed(Date.now() + 50 + Math.floor(Math.random() * 100), token)
    throw new DelayedError(busy)
  }
  try {
    return await work()
  } finally {
    await release()
  }
}
