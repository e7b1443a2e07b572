/**
 * The producer side of the controller's queue: how the application (`app/`) enqueues the
 * job that converges an object, with an id derived from the object and its version, a
 * payload held to its contract (`lib/jobs/`), and the controller's retry and retention
 * options. The worker that runs these jobs is `worker.ts`.
 */
import { randomBytes } from 'node:crypto'
import type { Queue } from 'bullmq'
import * as v from 'valibot'
import { JOB_OPTIONS, type JobName, JobSchemas, jobId } from '../lib/jobs/index.ts'
import { type ControllerJobs, queueJobs } from '../lib/jobs/redrive.ts'

/** The controller's queue as the application adds work to it. */
export interface ControllerQueue {
  /** The queue as re-driving an object adds its new attempt (`lib/jobs/redrive.ts`). */
  readonly jobs: ControllerJobs
  /** Adds `name` for `object` at `version` unless that job exists; resolves to its id. */
  converge(name: JobName, object: string, version: number | string, data: object): Promise<string>
  /**
   * Adds `name` for `object` at `version` when no job of that id exists at all (waiting,
   * running or finished): resolves to its id then, else undefined. For a spec stored whose
   * job may never have been queued (the request failed between the two).
   */
  convergeIfMissing(
    name: JobName,
    object: string,
    version: number | string,
    data: object,
  ): Promise<string | undefined>
  /**
   * Adds a deletion's job; when that job already failed for good (a re-DELETE after the
   * cause went away), the failed job is removed and the work runs again.
   */
  deletion(name: JobName, object: string, version: string, data: object): Promise<string>
  /** One `reconcile` run now, under an id of its own; resolves to that id. */
  reconcileNow(): Promise<string>
}

/**
 * @example
 * const jobs = controllerQueue(queue)
 * await jobs.converge('group.create', 'group-a', 1, { group: 'group-a', specVersion: 1 })
 */
export function controllerQueue(queue: Queue): ControllerQueue {
  const converge = async (
    name: JobName,
    object: string,
    version: number | string,
    data: object,
  ) => {
    const id = jobId(name, object, version)
    // The payload contract holds for our own jobs too: a handler would refuse it anyway.
    await queue.add(name, v.parse(JobSchemas[name], data), { ...JOB_OPTIONS, jobId: id })
    return id
  }
  return {
    jobs: queueJobs(queue),
    converge,
    async convergeIfMissing(name, object, version, data) {
      if ((await queue.getJobState(jobId(name, object, version))) !== 'unknown') return undefined
      return converge(name, object, version, data)
    },
    async deletion(name, object, version, data) {
      const id = jobId(name, object, version)
      if ((await queue.getJobState(id)) === 'failed') await queue.remove(id)
      return converge(name, object, version, data)
    },
    async reconcileNow() {
      const id = `reconcile-now-${Date.now()}-${randomBytes(4).toString('hex')}`
      await queue.add('reconcile', {}, { jobId: id, removeOnComplete: 50, removeOnFail: 50 })
      return id
    },
  }
}
