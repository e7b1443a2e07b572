/**
 * A job that parks (moves itself to delayed, `DelayedError`) can be woken and fetched
 * again by another worker slot of this process before its earlier run has ended: the
 * earlier run still has steps after its park (releasing its object lock, the throw). When
 * that run ends, BullMQ stops renewing the lock of the job by its id — the new run's too,
 * which then expires after `lockDuration` however long the run still works: the job is
 * taken for stalled and run again beside it, and its completion is refused.
 */
import type { Job } from 'bullmq'

type Processor<T> = (job: Job, token?: string) => Promise<T>

/**
 * Wraps a worker's processor so that a run that began while an earlier run of the same
 * job was still ending in this process keeps its lock: once the earlier run has ended
 * (and BullMQ has forgotten the job's lock), the new run renews its lock itself, every
 * half `lockDurationMs`, until it ends.
 *
 * @example
 * new Worker(queue, keepLocksOfOverlappingRuns(processor, 30_000), { lockDuration: 30_000 })
 */
export function keepLocksOfOverlappingRuns<T>(
  processor: Processor<T>,
  lockDurationMs: number,
): Processor<T> {
  /** Per job id: the end of its latest run in this process (after BullMQ's own steps). */
  const ending = new Map<string, Promise<void>>()
  return async (job, token) => {
    const id = job.id
    if (id === undefined) return processor(job, token)
    const earlier = ending.get(id)
    const run = processor(job, token)
    const ended = run
      .then(
        () => undefined,
        () => undefined,
      )
      // BullMQ forgets the job's lock right after the processor settles, in its own
      // continuation: a macrotask later it has.
      .then(() => new Promise<void>((resolve) => setImmediate(resolve)))
    ending.set(id, ended)
    void ended.then(() => {
      if (ending.get(id) === ended) ending.delete(id)
    })
    let renewal: NodeJS.Timeout | undefined
    let over = false
    if (earlier && token) {
      void earlier.then(() => {
        if (over) return
        const renew = () => void job.extendLock(token, lockDurationMs).catch(() => undefined)
        renew()
        renewal = setInterval(renew, lockDurationMs / 2)
        renewal.unref()
      })
    }
    try {
      return await run
    } finally {
      over = true
      clearInterval(renewal)
    }
  }
}
