/**
 * Child jobs on BullMQ queues without flows. A child (a DPU agent's `configure`, an FRR
 * announce, another handler's job) never writes into its parent's queue: the agent's
 * Redis user may touch only its own queue's keys. Instead, a parent waiting for children
 * registers itself as their waiter and parks (delayed); the `ChildWatcher` reads the
 * children's queues' event streams and promotes the parent when one finishes. The parent
 * also wakes on its own after a while, so a missed event only costs time.
 */
import { DelayedError, type Queue } from 'bullmq'
import type { ChildJobs, ChildOutcome, ChildRef } from '../functions/internal/deps.ts'
import { HydrazineError } from '../lib/errors.ts'
import { wakeToFront } from '../lib/jobs/wake.ts'
import { within } from '../lib/process/within.ts'
import type { RedisClient } from '../lib/redis/connection.ts'
import { hashTagOf, isCluster } from '../lib/redis/slots.ts'

/** How child jobs are kept and retried. */
const CHILD_OPTIONS = {
  attempts: 8,
  backoff: { type: 'exponential', delay: 500 },
  removeOnComplete: { age: 24 * 3600, count: 20_000 },
  removeOnFail: { age: 7 * 24 * 3600, count: 10_000 },
} as const

/** A parked parent wakes on its own after this long at first, doubling up to the max. */
const PARK_MIN_MS = 1000
const PARK_MAX_MS = 30_000

/** Where waiters and watched queues are kept (next to BullMQ's own keys). */
export interface WaiterKeys {
  /** Set of `{queue, id}` JSON: the parents waiting for one child. */
  waiters(child: ChildRef): string
  /**
   * Sorted set of the queues whose children parents wait for, each scored by the latest
   * moment (ms since the epoch) a parent parked on one of them wakes on its own: until
   * then, some parent may still wait for that queue's events.
   */
  readonly watched: string
  /** The event stream BullMQ writes for a queue. */
  events(queue: string): string
}

export function waiterKeys(prefix = 'bull'): WaiterKeys {
  return {
    waiters: (child) => `${prefix}:hz-waiters:${child.queue}:${child.jobId}`,
    // A sorted set; the plain set an earlier version kept (`hz-watched-queues`) is left alone.
    watched: `${prefix}:hz-watched-queues-until`,
    events: (queue) => `${prefix}:${queue}:events`,
  }
}

/**
 * `ChildJobs` on BullMQ. `queueFor` gives the (shared) Queue of a name; `redis` is a
 * plain connection for the waiter sets, or the connection to the Redis a queue lives on
 * (the agents' queues may live on their own Redis: a child's waiters are kept next to
 * it, where its queue's `ChildWatcher` reads them); `park` says how long a parked parent
 * sleeps before it wakes on its own (the first time, doubling up to the max).
 */
export function bullChildJobs(
  queueFor: (name: string) => Queue,
  redis: RedisClient | ((queue: string) => RedisClient),
  keys: WaiterKeys,
  park: { readonly minMs?: number; readonly maxMs?: number } = {},
): ChildJobs {
  const { minMs = PARK_MIN_MS, maxMs = PARK_MAX_MS } = park
  const redisFor = typeof redis === 'function' ? redis : () => redis
  // The state first, the job after: a job read first and found finished by the state read
  // that follows may have finished in between, and its read holds no return value yet. A
  // job's result is written with its move to completed (or failed), so a job read after
  // the state said so has it; a finished job does not run again.
  const outcome = async (ref: ChildRef): Promise<ChildOutcome> => {
    const queue = queueFor(ref.queue)
    const state = await queue.getJobState(ref.jobId)
    if (state !== 'completed' && state !== 'failed') {
      return state === 'unknown' ? { state: 'missing' } : { state: 'pending' }
    }
    const job = await queue.getJob(ref.jobId)
    // Removed since (its queue keeps finished jobs for a while only).
    if (!job) return { state: 'missing' }
    if (state === 'completed') return { state: 'completed', value: job.returnvalue }
    return { state: 'failed', reason: job.failedReason ?? 'failed' }
  }
  // Whether a child is still to finish needs its state alone, not the job itself: a job
  // that is gone reads as `unknown`, as `outcome` calls it missing.
  const pending = async (refs: readonly ChildRef[]) =>
    (await Promise.all(refs.map((ref) => queueFor(ref.queue).getJobState(ref.jobId)))).some(
      (state) => state !== 'completed' && state !== 'failed' && state !== 'unknown',
    )

  return {
    async add(queueName, name, data, opts) {
      // A job with this id already exists (an earlier run of this work added it): BullMQ
      // leaves it as it is, and this parent reads its outcome by id.
      await queueFor(queueName).add(name, data, { ...CHILD_OPTIONS, jobId: opts.jobId })
      return { queue: queueName, jobId: opts.jobId }
    },
    outcome,
    async renew(ref, data) {
      const queue = queueFor(ref.queue)
      const state = await queue.getJobState(ref.jobId)
      if (state === 'completed' || state === 'failed' || state === 'unknown') return false
      const job = await queue.getJob(ref.jobId)
      if (!job) return false
      await job.updateData(data)
      return true
    },
    async park(job, token, refs) {
      if (!(await pending(refs))) return
      if (!job.id || !token) throw new Error(`job ${job.name} cannot wait without its lock`)
      const me = JSON.stringify({ queue: job.queueName, id: job.id })
      const waits = Number((job.data as { waits?: unknown }).waits ?? 0) || 0
      const wakeAt = Date.now() + Math.min(maxMs, minMs * 2 ** waits)
      // One command per key: on a Redis Cluster each child's waiters live in its queue's slot.
      const watched = new Map<RedisClient, Set<string>>()
      for (const ref of refs) {
        const on = redisFor(ref.queue)
        watched.set(on, (watched.get(on) ?? new Set()).add(ref.queue))
      }
      await Promise.all([
        ...refs.map((ref) => redisFor(ref.queue).sadd(keys.waiters(ref), me)),
        // Watched at least until this parent wakes on its own (GT: never sooner than
        // another parent parked on the queue asked).
        ...[...watched].map(([on, queues]) =>
          on.zadd(keys.watched, 'GT', ...[...queues].flatMap((q) => [wakeAt, q])),
        ),
      ])
      // A child that finished between the first look and the registration woke nobody.
      if (!(await pending(refs))) return
      await job.updateData({ ...(job.data as object), waits: waits + 1 })
      await job.moveToDelayed(wakeAt, token)
      // A child that finished after the look above, before the parent was delayed, found it
      // still running: the watcher's promotion was refused, and nothing else would wake it
      // before its timer (up to `maxMs`). Parked now, it wakes itself, to the front of its
      // queue as the watcher would have put it.
      if (!(await pending(refs))) await wakeToFront(job)
      throw new DelayedError()
    },
  }
}

export interface ChildWatcherOptions {
  /** A new connection; the watcher takes one, and one more per slot it blocks on. */
  readonly connection: () => RedisClient
  readonly keys: WaiterKeys
  /** The queue a parked parent lives in, by name. */
  readonly queueFor: (name: string) => Queue
  readonly onError?: (error: unknown) => void
  /**
   * A queue is read this long past the moment its last parked parent wakes on its own
   * (default `WATCH_GRACE_MS`): clocks of replicas differ, a timer fires late.
   */
  readonly graceMs?: number
}

/** How long past its parents' own wake a queue is still read (`graceMs`). */
export const WATCH_GRACE_MS = 10_000

/** Queues no parent has parked on for this long are removed from the watched set. */
const FORGET_AFTER_MS = 3600_000

/** How often the watcher looks for queues newly (or no longer) awaited. */
const DISCOVER_EVERY_MS = 250

/**
 * Wakes parked parents: reads the event streams of every queue whose children a parked
 * parent awaits (until that parent would wake on its own, `WaiterKeys.watched`) and, for
 * each child that completed or failed, promotes the parents registered as its waiters.
 * A queue nobody waits on any more is read no longer: what the watcher costs follows the
 * queues under way, not every DPU that ever had a job (10,000 idle agent queues read by
 * one XREAD ten times a second cost this 2-core VM 13 % of a core in the controller and
 * 18 % in Redis). One blocking XREAD covers every queue of one Redis; on a Redis Cluster, where
 * one command's keys must share a slot, there is one reader per hash tag (the agent
 * queues' shards, FRR's, the controller's: `lib/redis/slots.ts`). A queue whose event
 * stream key holds something else is left out of it and reported (`UnreadableEventStream`):
 * it costs only its own children's parents, which wake by their timers.
 */
export class ChildWatcher {
  readonly #options: ChildWatcherOptions
  readonly #redis: RedisClient
  readonly #readers = new Map<string, ShardReader>()
  #running = true
  readonly #done: Promise<void>

  constructor(options: ChildWatcherOptions) {
    this.#options = options
    this.#redis = options.connection()
    reportOutages(this.#redis, options.onError)
    this.#done = this.#discover()
  }

  async stop(): Promise<void> {
    this.#running = false
    await settled(this.#done)
    await Promise.all([...this.#readers.values()].map((reader) => reader.stop()))
    this.#redis.disconnect()
  }

  /** The queues read now (for a look from outside: tests, diagnostics). */
  watching(): string[] {
    return [...this.#readers.values()].flatMap((reader) => reader.queues()).sort()
  }

  /**
   * Hands each queue newly awaited to the reader of its slot, and takes from the readers
   * the queues no parent awaits any more.
   */
  async #discover(): Promise<void> {
    const { keys } = this.#options
    const grace = this.#options.graceMs ?? WATCH_GRACE_MS
    const cluster = isCluster(this.#redis)
    let forgotten = 0
    while (this.#running) {
      try {
        const now = Date.now()
        const awaited = await this.#redis.zrangebyscore(keys.watched, now - grace, '+inf')
        const byShard = new Map<string, Set<string>>()
        for (const queue of awaited) {
          const shard = cluster ? hashTagOf(keys.events(queue)) : ''
          byShard.set(shard, (byShard.get(shard) ?? new Set()).add(queue))
        }
        for (const [shard, queues] of byShard) {
          let reader = this.#readers.get(shard)
          if (!reader) {
            reader = new ShardReader(this.#options, this.#redis)
            this.#readers.set(shard, reader)
          }
          for (const queue of queues) reader.watch(queue)
        }
        for (const [shard, reader] of this.#readers) {
          reader.keepOnly(byShard.get(shard) ?? new Set())
        }
        if (now - forgotten > FORGET_AFTER_MS / 60) {
          forgotten = now
          await this.#redis.zremrangebyscore(keys.watched, '-inf', now - FORGET_AFTER_MS)
        }
      } catch (error) {
        if (!this.#running) return
        this.#options.onError?.(error)
      }
      await sleep(DISCOVER_EVERY_MS)
    }
  }
}

/**
 * How long one XREAD blocks before it is sent again. A queue watched for the first time
 * (a DPU's first child) joins the next XREAD, not the one blocking now: this bounds how
 * late that child's parent wakes (at 1 s, one host in ten of the lab's attaches waited up
 * to a second between its DPU's ack and Ready). An idle reader costs 10 XREADs a second.
 */
const READ_BLOCK_MS = 100

/** How long `stop()` waits for a loop's command in flight. */
const STOP_WAIT_MS = 1000

/** How often a queue left out for an unreadable event stream is looked at again. */
const UNREADABLE_RECHECK_MS = 10_000

/**
 * A queue's event stream key holds something else than a stream (a DPU's agent may write
 * its own queue's keys, this one too): the one XREAD would fail for every queue, so that
 * queue is left out of it, and its children's parents wake by their own timers, until
 * the key is a stream again (or gone).
 */
export class UnreadableEventStream extends HydrazineError {
  constructor(
    readonly queue: string,
    readonly type: string,
  ) {
    super(
      'EVENT_STREAM_UNREADABLE',
      `the event stream of queue ${queue} is a ${type}, not a stream: left out of the child watcher's reads until it is one again`,
    )
  }
}

/**
 * Waits for a loop to end, but not for longer than `STOP_WAIT_MS`: while Redis is down,
 * ioredis keeps a command queued for the next connection and `disconnect()` neither sends
 * nor rejects it, so a loop waiting on one would keep `stop()` (and the controller's
 * shutdown) waiting until Redis came back. The abandoned command can do no harm: its
 * client never reconnects.
 */
async function settled(done: Promise<void>): Promise<void> {
  await within(done, STOP_WAIT_MS, undefined)
}

/**
 * Hands a connection's errors to `onError`, the first of each outage only (ioredis emits
 * one per failed reconnect while it retries). Without a listener ioredis prints every one
 * as an "Unhandled error event".
 */
function reportOutages(redis: RedisClient, onError: ((error: unknown) => void) | undefined): void {
  let down = false
  redis.on('error', (error: unknown) => {
    if (down) return
    down = true
    onError?.(error)
  })
  redis.on('ready', () => {
    down = false
  })
}

/** Reads the event streams of queues whose keys share one slot, with one blocking XREAD. */
class ShardReader {
  readonly #options: ChildWatcherOptions
  readonly #redis: RedisClient
  readonly #reader: RedisClient
  readonly #cursor = new Map<string, string>()
  /** Queues left out of the XREAD (`UnreadableEventStream`), and when last looked at. */
  readonly #unreadable = new Map<string, number>()
  #running = true
  readonly #done: Promise<void>

  constructor(options: ChildWatcherOptions, redis: RedisClient) {
    this.#options = options
    this.#redis = redis
    this.#reader = options.connection()
    reportOutages(this.#reader, options.onError)
    this.#done = this.#loop()
  }

  /**
   * Reads `queue`'s events too from the next XREAD on. A queue watched for the first time:
   * its last few seconds too, in case a child finished while its parent was registering.
   */
  watch(queue: string): void {
    if (!this.#cursor.has(queue) && !this.#unreadable.has(queue)) {
      this.#cursor.set(queue, `${Date.now() - 5000}-0`)
    }
  }

  /** Stops reading every queue not in `queues` (no parent awaits it any more). */
  keepOnly(queues: ReadonlySet<string>): void {
    for (const queue of this.#cursor.keys()) if (!queues.has(queue)) this.#cursor.delete(queue)
    for (const queue of this.#unreadable.keys()) {
      if (!queues.has(queue)) this.#unreadable.delete(queue)
    }
  }

  /** The queues this reader reads now. */
  queues(): string[] {
    return [...this.#cursor.keys()]
  }

  async stop(): Promise<void> {
    this.#running = false
    this.#reader.disconnect()
    await settled(this.#done)
  }

  async #loop(): Promise<void> {
    const { keys } = this.#options
    while (this.#running) {
      try {
        await this.#recheckUnreadable()
        const queues = [...this.#cursor.keys()]
        if (queues.length === 0) {
          await sleep(100)
          continue
        }
        const reply = (await this.#reader.xread(
          'COUNT',
          1000,
          'BLOCK',
          READ_BLOCK_MS,
          'STREAMS',
          ...queues.map((q) => keys.events(q)),
          ...queues.map((q) => this.#cursor.get(q) ?? '$'),
        )) as [string, [string, string[]][]][] | null
        const finished: ChildRef[] = []
        const read = new Map<string, string>()
        const queueOf = new Map(queues.map((q) => [keys.events(q), q]))
        for (const [stream, entries] of reply ?? []) {
          const queue = queueOf.get(stream)
          if (!queue) continue
          for (const [id, fields] of entries) {
            read.set(queue, id)
            const event = fieldOf(fields, 'event')
            const jobId = fieldOf(fields, 'jobId')
            if ((event === 'completed' || event === 'failed') && jobId) {
              finished.push({ queue, jobId })
            }
          }
        }
        if (finished.length > 0) await this.#wake(finished)
        // Past these events only once their parents were woken: a failed wake reads them
        // again. A queue dropped meanwhile (no parent awaits it) stays dropped.
        for (const [queue, id] of read) if (this.#cursor.has(queue)) this.#cursor.set(queue, id)
      } catch (error) {
        if (!this.#running) return
        // One queue's stream of another type fails the XREAD of all: leave it out, go on.
        if (String(error).includes('WRONGTYPE') && (await this.#leaveOutUnreadable())) continue
        this.#options.onError?.(error)
        await sleep(500)
      }
    }
  }

  /** Leaves out the queues whose event stream is not a stream; true when there was one. */
  async #leaveOutUnreadable(): Promise<boolean> {
    const { keys, onError } = this.#options
    const queues = [...this.#cursor.keys()]
    const types = await Promise.all(queues.map((q) => this.#redis.type(keys.events(q))))
    let found = false
    queues.forEach((queue, i) => {
      const type = types[i] ?? 'none'
      if (type === 'stream' || type === 'none') return
      found = true
      this.#cursor.delete(queue)
      this.#unreadable.set(queue, Date.now())
      onError?.(new UnreadableEventStream(queue, type))
    })
    return found
  }

  /** Reads again, from now, the queues left out whose event stream is readable again. */
  async #recheckUnreadable(): Promise<void> {
    const { keys } = this.#options
    const now = Date.now()
    for (const [queue, checked] of this.#unreadable) {
      if (now - checked < UNREADABLE_RECHECK_MS) continue
      const type = await this.#redis.type(keys.events(queue))
      if (type === 'stream' || type === 'none') {
        this.#unreadable.delete(queue)
        this.watch(queue)
      } else {
        this.#unreadable.set(queue, now)
      }
    }
  }

  /**
   * Promotes the parents waiting for any of `children`, all at once: a child finishing
   * every few milliseconds must not wait behind the wakes of the ones before it. Each
   * child's waiters are taken atomically, every child's in one round trip (their keys
   * share this reader's slot).
   */
  async #wake(children: readonly ChildRef[]): Promise<void> {
    const { keys, queueFor } = this.#options
    const taken = this.#redis.multi()
    for (const child of children) taken.smembers(keys.waiters(child)).del(keys.waiters(child))
    const replies = (await taken.exec()) ?? []
    const parents = new Set<string>()
    for (let i = 0; i < replies.length; i += 2) {
      for (const raw of (replies[i]?.[1] as string[] | undefined) ?? []) parents.add(raw)
    }
    await Promise.all(
      [...parents].map((raw) => {
        const parent = JSON.parse(raw) as { queue: string; id: string }
        const backend = queueFor(parent.queue).getBackend()
        // Refused when the parent is not delayed: it is running, or already woke; it
        // reads the outcome itself. Woken, it goes to the front of its queue (`lifo`; the
        // parents here carry no priority): it finishes work already under way, which
        // behind the jobs queued meanwhile would wait for them to free a worker slot
        // (`npm run bench -- attach`, on a loaded machine: ack -> await step p50 433–514 ms
        // instead of 569–762, Ready p50 2.4–3.1 s instead of 2.9–3.9 s, two runs each).
        return backend
          .promote(parent.id)
          .then(() => backend.changePriority(parent.id, 0, true))
          .catch(() => {})
      }),
    )
  }
}

function fieldOf(fields: readonly string[], name: string): string | undefined {
  for (let i = 0; i + 1 < fields.length; i += 2) if (fields[i] === name) return fields[i + 1]
  return undefined
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))
