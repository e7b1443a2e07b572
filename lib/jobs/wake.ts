/**
 * Waking a parked job: it left its worker slot to wait (delayed) for something another
 * job or process does, and that happened.
 */
import type { Job } from 'bullmq'

/**
 * Promotes a delayed job and puts it at the front of its queue (`lifo`): it has waited
 * already, and the jobs queued meanwhile go after it. Resolves false when it was not
 * delayed (already woken, or not parked yet), which is no error.
 *
 * @example
 * if (done) await wakeToFront(parkedJob)
 */
export async function wakeToFront(job: Job): Promise<boolean> {
  return job
    .promote()
    .then(() => job.changePriority({ priority: 0, lifo: true }))
    .then(
      () => true,
      () => false,
    )
}
