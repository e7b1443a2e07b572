import type { Queue } from 'bullmq'
import type { ChildJobs } from '../functions/internal/deps.ts'

/** How child jobs are kept and retried. */
const CHILD_OPTIONS = {
  attempts: 8,
  backoff: { type: 'exponential', delay: 500 },
  removeOnComplete: { age: 24 * 3600 },
  removeOnFail: { age: 7 * 24 * 3600 },
} as const

/**
 * Child jobs on BullMQ queues: the `ChildJobs` handlers use to signal agents, FRR and
 * their own sub-steps, and to read acks. `queueFor` gives the (shared) Queue of a name.
 */
export function bullChildJobs(queueFor: (name: string) => Queue): ChildJobs {
  return {
    async add(queueName, name, data, opts) {
      const queue = queueFor(queueName)
      // A child with this id that another parent waits on (the same stale isolate asked
      // for by two attaches) stays that parent's: BullMQ would refuse to move it, and
      // this parent reads its ack by id anyway.
      const existing = await queue.getJob(opts.jobId)
      const parentKey = `${opts.parent.queue}:${opts.parent.id}`
      if (existing?.parentKey && existing.parentKey !== parentKey) return
      await queue.add(name, data, { ...CHILD_OPTIONS, jobId: opts.jobId, parent: opts.parent })
    },
    async result(queueName, id) {
      const job = await queueFor(queueName).getJob(id)
      return job?.returnvalue ?? undefined
    },
  }
}
