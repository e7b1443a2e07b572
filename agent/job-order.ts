/**
 * The order in which the controller sent a DPU's jobs, kept per binding (an Overlay host's
 * logical port, a Fabric host in its group), so that a `configure` sent before another job
 * of the same binding that already ran here is refused rather than undoing it.
 *
 * The agent takes one job at a time, but not always in the order they were sent: a
 * `configure` that failed waits out its retry backoff while the detach's `isolate`, sent
 * after it, runs at once; when the retry came, it plugged the detached host back into its
 * old group (or, for a Fabric host, back into the tenant's VRF) behind the controller's
 * back, and held the DPU for its install timeout on every remaining attempt. A job is
 * placed by when it was sent (BullMQ's `timestamp`, stamped by the producer and kept
 * across retries): each job that starts here records that moment for its binding among
 * the agent's notes in the OVS database (`ovs.ts`: on the integration bridge, which
 * ovn-controller does not follow; they outlive the agent and a reboot, as a waiting retry
 * does), and a `configure` sent earlier than the recorded one is `JobSuperseded`,
 * touching nothing. An `isolate` is never refused: isolating is always safe to repeat.
 */
import type { AgentJob } from '../lib/agent-protocol/index.ts'
import { JobSuperseded } from './errors.ts'
import { jobSentKey } from './ovs.ts'

/**
 * How many bindings' records a DPU keeps: the newest, by when their job was sent. A
 * superseded `configure` is a retry that waits seconds, not hundreds of other jobs.
 */
export const KEPT_RECORDS = 256

/** What this needs of the DPU's OVS database: the agent's notes (`ovs.ts`). */
export interface Notes {
  snapshot(): Promise<{ readonly notes: Readonly<Record<string, string>> }>
  setNotes(notes: Readonly<Record<string, string>>): Promise<boolean>
  removeNotes(keys: readonly string[]): Promise<boolean>
}

/**
 * The binding a job is about: the logical port of an Overlay host, the host in its group
 * for a Fabric one.
 *
 * @example bindingOf({ name: 'isolate', payload }) // 'hz/group-a/host-a'
 */
export function bindingOf(job: AgentJob): string {
  switch (job.name) {
    case 'configure':
    case 'isolate':
      return job.payload.host.logicalPort
    case 'fabric-configure':
    case 'fabric-isolate':
      return `fabric:${job.payload.group.name}/${job.payload.host.name}`
  }
}

/** The jobs queued on this DPU behind the one under way (`queued-jobs.ts` reads them). */
export interface QueuedJobs {
  /**
   * When the earliest job of `binding` queued here was sent, of those sent after `sentAt`
   * (ms since the epoch); undefined when none is.
   */
  sentLaterFor(binding: string, sentAt: number): Promise<number | undefined>
}

/** Records a job's moment for its binding: called by the job at its first change. */
export interface JobOrder {
  record(): Promise<void>
  /**
   * A job of the same binding sent later and queued here behind this one, as the error
   * that ends this one (`queued-jobs.ts`); undefined when none is, or nothing is known.
   */
  laterQueued(): Promise<JobSuperseded | undefined>
}

/** The order of a job the queue gave no moment: nothing to check or record. */
export const UNORDERED: JobOrder = {
  record: async () => {},
  laterQueued: async () => undefined,
}

/**
 * Admits a job about to run, sent at `sentAt` (ms since the epoch; undefined when the
 * queue gave none: not ordered), reading only: throws `JobSuperseded` for a `configure`
 * sent before the last job of its binding that started changing this DPU. The job calls
 * `record()` before its first change (a job refused for another reason leaves the DPU as
 * it was, this record too): `sentAt` is kept for the binding when it is the newest, with
 * the `KEPT_RECORDS` newest records.
 */
export async function admitJob(
  ovs: Notes,
  dpuId: string,
  job: AgentJob,
  sentAt: number | undefined,
  queued?: QueuedJobs,
): Promise<JobOrder> {
  if (sentAt === undefined || !Number.isSafeInteger(sentAt) || sentAt <= 0) return UNORDERED
  const binding = bindingOf(job)
  const key = jobSentKey(binding)
  const configure = job.name === 'configure' || job.name === 'fabric-configure'
  // Read once: the DPU runs one job at a time, so no other job records meanwhile.
  const { notes } = await ovs.snapshot()
  const before = recordedIn(notes, key)
  if (before !== undefined && configure && sentAt < before) {
    throw new JobSuperseded(dpuId, binding, sentAt, before)
  }
  return {
    async record() {
      if (before !== undefined && sentAt <= before) return
      await ovs.setNotes({ [key]: String(sentAt) })
      const others = Object.entries(notes)
        .filter(([k]) => k.startsWith(jobSentKey('')) && k !== key)
        .sort(([, a], [, b]) => Number(b) - Number(a))
      const dropped = others.slice(KEPT_RECORDS - 1).map(([k]) => k)
      if (dropped.length > 0) await ovs.removeNotes(dropped)
    },
    async laterQueued() {
      const later = await queued?.sentLaterFor(binding, sentAt).catch(() => undefined)
      return later === undefined
        ? undefined
        : new JobSuperseded(dpuId, binding, sentAt, later, true)
    },
  }
}

/**
 * Watches for a job of the order's binding sent later and queued behind it: from `afterMs`
 * on, every `everyMs` (a job waiting that long is one that may wait in vain). `found`
 * settles with it, once, and `seen` holds it from then on; `stop` ends the watch. Never
 * rejects.
 */
export function watchLaterQueued(
  order: JobOrder,
  { afterMs = 1_000, everyMs = 1_000 }: { afterMs?: number; everyMs?: number } = {},
): { found: Promise<JobSuperseded>; readonly seen: JobSuperseded | undefined; stop(): void } {
  let timer: NodeJS.Timeout | undefined
  let stopped = false
  let seen: JobSuperseded | undefined
  const found = new Promise<JobSuperseded>((resolve) => {
    const look = async () => {
      const later = await order.laterQueued()
      if (stopped) return
      if (later) {
        seen = later
        resolve(later)
      } else timer = setTimeout(look, everyMs)
    }
    timer = setTimeout(look, afterMs)
  })
  return {
    found,
    get seen() {
      return seen
    },
    stop() {
      stopped = true
      clearTimeout(timer)
    },
  }
}

/** The moment recorded under `key`, when it is one. */
function recordedIn(ids: Readonly<Record<string, string>>, key: string): number | undefined {
  const recorded = Number(ids[key])
  return Number.isSafeInteger(recorded) && recorded > 0 ? recorded : undefined
}
