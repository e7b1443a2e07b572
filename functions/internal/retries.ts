/**
 * The controller's own retries, run by reconcile: nothing stays Failed for a cause that
 * went away, and nothing stays half-done because its job gave up or vanished.
 *
 * - A Failed object whose failure may cure itself (not a refused spec) gets a new attempt
 *   once its backoff (`retryAt`) has passed.
 * - An object still converging (`Provisioning`, `Attaching`, `Configuring`) whose current
 *   job failed for good is marked Failed with the job's reason (`RetriesExhausted`), and is
 *   then retried as above; one whose job finished or vanished without reporting is
 *   re-driven at once (`Stalled`).
 * - An object whose deletion was asked for and whose deletion job never got into the
 *   queue (the process died between the two) has it added (`DeletionResumed`). One whose
 *   deletion job failed is left Failed, saying why: a re-DELETE (or a forced one) retries.
 */
import { CONTROLLER_QUEUE, deletionVersion, type JobName, jobId } from '../../lib/jobs/index.ts'
import { type ControllerJobs, redriveGroup, redriveHost } from '../../lib/jobs/redrive.ts'
import { attemptOf, failureOf, retryAt } from '../../lib/model/attempts.ts'
import { type Condition, type StoredObject, setCondition } from '../../lib/model/objects.ts'
import type { HandlerDeps } from './deps.ts'

/** An object a run re-drove or marked Failed, and why. */
export interface Retried {
  readonly kind: 'rg' | 'mr'
  readonly name: string
  /** `Retrying` (a Failed object's new attempt), `Stalled`, or `RetriesExhausted`. */
  readonly action: 'Retrying' | 'Stalled' | 'RetriesExhausted' | 'DeletionResumed'
  readonly message: string
}

export interface RetryOptions {
  readonly now?: Date
  /**
   * How long after its last change a converging object is left to its job before its job
   * is looked at (a request is stored before its job is added). Default 60 s.
   */
  readonly graceMs?: number
}

type RetryDeps = Pick<HandlerDeps, 'store' | 'children'> & { readonly jobs: ControllerJobs }

interface Converging {
  readonly phase: string
  readonly conditions: readonly Condition[]
  readonly configsSynced: boolean
  readonly observedVersion: number
  readonly attempt?: number
}

const CONVERGING = new Set(['Provisioning', 'Attaching', 'Configuring'])

/**
 * Retries what is due, for every group and host the store has.
 *
 * @example
 * const retried = await retryDue(deps) // [{ kind: 'mr', name: 'h1', action: 'Retrying', … }]
 */
export async function retryDue(deps: RetryDeps, options: RetryOptions = {}): Promise<Retried[]> {
  const now = options.now ?? new Date()
  const graceMs = options.graceMs ?? 60_000
  const retried: Retried[] = []
  const kinds = [
    { kind: 'rg', job: 'group.create', objects: await deps.store.groups.list() },
    { kind: 'mr', job: 'host.attach', objects: await deps.store.hosts.list() },
  ] as const
  for (const { kind, job, objects } of kinds) {
    for (const object of objects as StoredObject<unknown, Converging>[]) {
      const outcome = object.deletion
        ? await resumeDeletion(deps, kind, object, now, graceMs)
        : await retryOne(deps, kind, job, object, now, graceMs)
      if (outcome) retried.push(outcome)
    }
  }
  return retried
}

/** Adds the deletion job of an object whose deletion was asked for, if it never was. */
async function resumeDeletion(
  deps: RetryDeps,
  kind: 'rg' | 'mr',
  object: StoredObject<unknown, Converging>,
  now: Date,
  graceMs: number,
): Promise<Retried | undefined> {
  const deletion = object.deletion
  if (!deletion || now.getTime() - Date.parse(deletion.requestedAt) < graceMs) return undefined
  const name = kind === 'rg' ? 'group.delete' : 'host.detach'
  const id = jobId(name, object.name, deletionVersion(object.specVersion, deletion.force))
  if ((await deps.children.outcome({ queue: CONTROLLER_QUEUE, jobId: id })).state !== 'missing') {
    return undefined
  }
  const data =
    kind === 'rg'
      ? { group: object.name, force: deletion.force }
      : { host: object.name, specVersion: object.specVersion, force: deletion.force }
  await deps.jobs.add(name, data, id)
  const message = `${id} was never queued (or was removed): added`
  return { kind, name: object.name, action: 'DeletionResumed', message }
}

async function retryOne(
  deps: RetryDeps,
  kind: 'rg' | 'mr',
  job: JobName,
  object: StoredObject<unknown, Converging>,
  now: Date,
  graceMs: number,
): Promise<Retried | undefined> {
  const { status, name } = object
  const redrive = (action: Retried['action'], message: string) => {
    const cause = { type: conditionOf(kind), status: 'Unknown', reason: action, message } as const
    return kind === 'rg' ? redriveGroup(deps, name, cause) : redriveHost(deps, name, cause)
  }

  if (status.phase === 'Failed') {
    const at = retryAt(status)
    if (!at || at > now) return undefined
    const failure = failureOf(status)
    const message = `attempt ${attemptOf(status) + 1}, after ${failure?.reason ?? 'a failure'}: ${failure?.message ?? ''}`
    return (await redrive('Retrying', message))
      ? { kind, name, action: 'Retrying', message }
      : undefined
  }

  if (!CONVERGING.has(status.phase)) return undefined
  // A group Configuring with its spec in place waits for its hosts (`group-hosts.ts`),
  // each of which is retried on its own: its group.create is done, not stalled.
  if (
    kind === 'rg' &&
    status.phase === 'Configuring' &&
    status.observedVersion === object.specVersion
  ) {
    return undefined
  }
  if (now.getTime() - lastChange(object) < graceMs) return undefined
  const ref = {
    queue: CONTROLLER_QUEUE,
    jobId: jobId(job, name, object.specVersion, attemptOf(status)),
  }
  const outcome = await deps.children.outcome(ref)
  if (outcome.state === 'pending') return undefined
  if (outcome.state === 'failed') {
    const message = `${ref.jobId} gave up: ${outcome.reason}`
    await markFailed(deps, kind, name, object.specVersion, attemptOf(status), message)
    return { kind, name, action: 'RetriesExhausted', message }
  }
  const message =
    outcome.state === 'missing'
      ? `${ref.jobId} is gone while the object was ${status.phase}`
      : `${ref.jobId} finished while the object stayed ${status.phase}`
  return (await redrive('Stalled', message))
    ? { kind, name, action: 'Stalled', message }
    : undefined
}

/** The condition type that says how an object's attempt went. */
function conditionOf(kind: 'rg' | 'mr'): string {
  return kind === 'rg' ? 'OvnConfigured' : 'Attached'
}

/** When the object last changed: its spec, or any of its conditions. */
function lastChange(object: StoredObject<unknown, Converging>): number {
  const times = [object.updatedAt, ...object.status.conditions.map((c) => c.lastTransitionTime)]
  return Math.max(...times.map((t) => Date.parse(t)).filter((t) => !Number.isNaN(t)), 0)
}

async function markFailed(
  deps: RetryDeps,
  kind: 'rg' | 'mr',
  name: string,
  specVersion: number,
  attempt: number,
  message: string,
): Promise<void> {
  const condition = {
    type: conditionOf(kind),
    status: 'False',
    reason: 'RetriesExhausted',
    message,
  } as const
  await deps.store.objects.updateStatus<Converging>(kind, name, (current) => {
    if (current.specVersion !== specVersion || attemptOf(current.status) !== attempt) return
    if (!CONVERGING.has(current.status.phase)) return
    return {
      ...current.status,
      phase: 'Failed',
      configsSynced: false,
      conditions: setCondition(current.status.conditions, condition),
    }
  })
}
