/**
 * A job that waits for work of this process (its group's paced NB commit) without holding
 * its worker slot: it parks (delayed) and is promoted the moment the work settles. See
 * `ParkedWork`.
 */
import { DelayedError, type Job } from 'bullmq'
import { wakeToFront } from '../../lib/jobs/wake.ts'

/** A parked job wakes on its own after this long at first, doubling up to the max. */
const WAKE_MIN_MS = 5000
const WAKE_MAX_MS = 30_000

/**
 * How long a settled outcome is kept for its job's next run. A job resumed later (another
 * process took it, or it waited that long behind others) finds none and does the work
 * again itself; the work is idempotent, so this bounds memory, not correctness.
 */
const KEEP_MS = 120_000

/** What `ParkedWork.park` runs around delaying the job. */
export interface ParkHooks {
  /** Records, before the job is delayed, that its next run resumes (its step). */
  readonly record?: () => Promise<unknown>
  /** Runs once the job is delayed. */
  readonly parkedAt?: () => unknown
}

type Outcome<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly error: unknown }

interface Entry<T> {
  outcome?: Outcome<T>
  /** The job is delayed (or being delayed): a settled outcome promotes it. */
  parked: boolean
  /** How many times it parked on this work. */
  parks: number
  /** The job as its latest run holds it. */
  job: Job
  readonly work: Promise<T>
}

/**
 * Outcomes of work this process does for jobs that parked meanwhile, kept in memory for
 * their next run, keyed by job id and attempt.
 *
 * `park` moves the job to delayed and throws BullMQ's `DelayedError` (its worker slot is
 * free), unless the work has already settled; when the work settles, the job is promoted
 * and goes to the front of its queue (work under way finishes before new work starts).
 * Its next run calls `resume`: the outcome if it is kept here; parked again if the work
 * is still under way (its timer fired first); undefined when this process knows nothing
 * of it (another process runs it, or a restart): the caller then does the work itself,
 * waiting for it, so correctness never depends on this memory. The timer (5 s, doubling
 * to 30 s) wakes a job whose process died while it was parked.
 *
 * @example
 * const kept = step === 'applied' ? await parked.resume(job, token) : undefined
 * const done = kept ?? (await parked.park(job, token, work()))
 */
export class ParkedWork<T> {
  readonly #entries = new Map<string, Entry<T>>()
  readonly #wakeMinMs: number
  readonly #wakeMaxMs: number

  constructor(options: { readonly wakeMinMs?: number; readonly wakeMaxMs?: number } = {}) {
    this.#wakeMinMs = options.wakeMinMs ?? WAKE_MIN_MS
    this.#wakeMaxMs = options.wakeMaxMs ?? WAKE_MAX_MS
  }

  /**
   * Parks `job` until `work` settles (throws `DelayedError`). `record` runs first, once the
   * work's outcome is held here: it writes what sends the job's next run to `resume` (its
   * step). `parkedAt` runs once the job is delayed. Returns the work's value instead when
   * the job cannot park (no lock token) or the work settled before it was delayed.
   *
   * The work runs while `record` writes, which can wait for a Redis coming back (BullMQ's
   * connections retry forever) while the work's reads on the store's connection give up
   * (`MaxRetriesPerRequestError`): taking its outcome first, and not after `record`, keeps
   * that failure the job's, never an unhandled rejection.
   *
   * @example
   * await parked.park(job, token, converged, {
   *   record: () => job.updateData({ ...job.data, step: 'applied' }),
   * })
   */
  async park(
    job: Job,
    token: string | undefined,
    work: Promise<T>,
    hooks: ParkHooks = {},
  ): Promise<T> {
    if (!token || !job.id) return work
    const key = keyOf(job)
    const entry: Entry<T> = { parked: false, parks: 0, job, work }
    this.#entries.set(key, entry)
    work.then(
      (value) => this.#settle(key, entry, { ok: true, value }),
      (error: unknown) => this.#settle(key, entry, { ok: false, error }),
    )
    try {
      await hooks.record?.()
    } catch (error) {
      // This run fails before it parks: no later run resumes it, its retry works again.
      this.#entries.delete(key)
      throw error
    }
    return this.#delay(key, entry, token, hooks.parkedAt)
  }

  /**
   * The job's next run: the outcome kept for it (taken: read once), the job parked again
   * while the work is under way, or undefined when this process holds none for it.
   */
  async resume(job: Job, token: string | undefined): Promise<T | undefined> {
    if (!job.id) return undefined
    const key = keyOf(job)
    const entry = this.#entries.get(key)
    if (!entry) return undefined
    entry.job = job
    if (!entry.outcome) {
      if (token) return this.#delay(key, entry, token)
      // No lock to park with: it waits here.
      await entry.work.catch(() => undefined)
    }
    return this.#take(key, entry)
  }

  /** Parks the job; or, the work having settled before it was delayed, its outcome. */
  async #delay(key: string, entry: Entry<T>, token: string, parkedAt?: () => unknown): Promise<T> {
    if (entry.outcome) return this.#take(key, entry)
    const wakeMs = Math.min(this.#wakeMaxMs, this.#wakeMinMs * 2 ** entry.parks)
    entry.parks += 1
    await entry.job.moveToDelayed(Date.now() + wakeMs, token)
    entry.parked = true
    // Settled while the job was being delayed: nothing promoted it, it promotes itself.
    if (entry.outcome) void this.#wake(entry)
    await parkedAt?.()
    throw new DelayedError()
  }

  #settle(key: string, entry: Entry<T>, outcome: Outcome<T>): void {
    entry.outcome = outcome
    if (entry.parked) void this.#wake(entry)
    setTimeout(() => {
      if (this.#entries.get(key) === entry) this.#entries.delete(key)
    }, KEEP_MS).unref()
  }

  /** Promotes the parked job to the front of its queue (refused when it is not delayed). */
  async #wake(entry: Entry<T>): Promise<void> {
    entry.parked = false
    await wakeToFront(entry.job)
  }

  #take(key: string, entry: Entry<T>): T {
    this.#entries.delete(key)
    const { outcome } = entry
    if (!outcome) throw new Error(`no outcome kept for job ${key}`)
    if (!outcome.ok) throw outcome.error
    return outcome.value
  }
}

/** A job's run and its next share one attempt: parking spends none. */
function keyOf(job: Job): string {
  return `${job.queueName}/${job.id}/${job.attemptsMade}`
}
