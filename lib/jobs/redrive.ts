/**
 * Re-driving an object: a new attempt at its current spec version, with its own job ids
 * (so BullMQ runs it, and the agents and FRR run their children again). Used when a
 * tenant PUTs the same spec of a Failed object again, when the controller retries a
 * failure whose cause may have gone away, and when a repair must re-send a DPU its work.
 */
import * as v from 'valibot'
import { attemptOf, startAttempt } from '../model/attempts.ts'
import type {
  Condition,
  GroupPhase,
  HostPhase,
  ManagedResourceStatus,
  ResourceGroupStatus,
} from '../model/objects.ts'
import type { StateStore } from '../state/store.ts'
import { JOB_OPTIONS, type JobName, JobSchemas, jobId } from './index.ts'

/** The controller's own queue, as a handler or a write adds a job to it. */
export interface ControllerJobs {
  /** Adds a job unless one with this id exists already; `delayMs`: it runs no sooner. */
  add(name: JobName, data: object, jobId: string, options?: { delayMs?: number }): Promise<void>
}

/** The condition a new attempt starts with. */
type ConditionChange = Omit<Condition, 'lastTransitionTime'>

/** ControllerJobs on a BullMQ queue, with the controller's retry and retention options. */
export function queueJobs(queue: {
  add(name: string, data: object, opts: object): Promise<unknown>
}): ControllerJobs {
  return {
    async add(name, data, id, options) {
      const delay = options?.delayMs ? { delay: options.delayMs } : {}
      await queue.add(name, data, { ...JOB_OPTIONS, jobId: id, ...delay })
    },
  }
}

interface RedriveDeps {
  readonly store: Pick<StateStore, 'objects'>
  readonly jobs: ControllerJobs
}

/**
 * Starts the host's next attempt (`phase`, default `Attaching`; a repair of a Ready host
 * passes `Configuring`) with `cause` as its condition, and enqueues its `host.attach`.
 * Returns the job id, or undefined when the host is gone or being detached.
 *
 * @example
 * await redriveHost(deps, 'host-1', { type: 'Attached', status: 'Unknown', reason: 'Retrying', message: '…' })
 */
export function redriveHost(
  deps: RedriveDeps,
  name: string,
  cause: ConditionChange,
  phase: HostPhase = 'Attaching',
): Promise<string | undefined> {
  return redrive(deps, 'mr', name, cause, phase)
}

/** Starts the group's next attempt (`Provisioning`) and enqueues its `group.create`. */
export function redriveGroup(
  deps: RedriveDeps,
  name: string,
  cause: ConditionChange,
  phase: GroupPhase = 'Provisioning',
): Promise<string | undefined> {
  return redrive(deps, 'rg', name, cause, phase)
}

async function redrive(
  deps: RedriveDeps,
  kind: 'rg' | 'mr',
  name: string,
  cause: ConditionChange,
  phase: HostPhase | GroupPhase,
): Promise<string | undefined> {
  let started: { specVersion: number; attempt: number } | undefined
  await deps.store.objects.updateStatus<ManagedResourceStatus | ResourceGroupStatus>(
    kind,
    name,
    (current) => {
      if (current.deletion) return undefined
      const next = startAttempt(current.status, phase, cause)
      started = { specVersion: current.specVersion, attempt: attemptOf(next) }
      return next
    },
  )
  if (!started) return undefined
  const { specVersion, attempt } = started
  const [job, data] =
    kind === 'mr'
      ? (['host.attach', { host: name, specVersion, attempt }] as const)
      : (['group.create', { group: name, specVersion, attempt }] as const)
  const id = jobId(job, name, specVersion, attempt)
  await deps.jobs.add(job, validPayload(job, data), id)
  return id
}

/** Our own payloads hold to the contract the handler checks (a slip here is a bug). */
function validPayload(name: JobName, data: object): object {
  return v.parse(JobSchemas[name], data)
}
