/**
 * Parents parked on child jobs are woken by the `ChildWatcher` when their children finish
 * (completed or failed), not by their own timer: here the timer is an hour, so every
 * parent that runs again was woken by the watcher. A queue whose event stream is not a
 * stream (a DPU may write its own queue's keys) is left out and reported, and holds up no
 * other queue's parents.
 */
import { type Job, Queue, UnrecoverableError, Worker } from 'bullmq'
import { Redis } from 'ioredis'
import t, { type Test } from 'tap'
import type { ChildRef } from '../../functions/internal/deps.ts'
import { freePort } from '../../lib/process/ports.ts'
import { bullChildJobs, ChildWatcher, waiterKeys } from '../../queues/children.ts'
import { redisConnections, withStack } from '../helpers/stack.ts'

const PARENTS = 200
const HOUR = 3600_000

t.test(`${PARENTS} children finishing at once each wake their parent`, async (t) => {
  const prefix = 'hzt-wake'
  const { connection, queueFor, keys, children } = await wakeRig(t, prefix)
  const watcher = new ChildWatcher({ connection, keys, queueFor })
  t.teardown(() => watcher.stop())

  const childOf = (job: Job): ChildRef => ({ queue: 'children', jobId: `child-${job.id}` })
  const parents = new Worker(
    'parents',
    async (job: Job, token?: string) => {
      const ref = childOf(job)
      if (!(job.data as { parked?: boolean }).parked) {
        await children.add(ref.queue, 'child', { fail: job.id?.endsWith('1') }, ref)
        await job.updateData({ parked: true })
      }
      await children.park(job, token, [ref])
      return (await children.outcome(ref)).state
    },
    { connection: connection(), prefix, concurrency: 50 },
  )
  t.teardown(() => parents.close())
  const results = new Map<string, unknown>()
  parents.on('completed', (job, result) => results.set(job.id ?? '', result))

  for (let i = 0; i < PARENTS; i++) await queueFor('parents').add('parent', {}, { jobId: `p${i}` })
  await until(async () => (await queueFor('parents').getDelayedCount()) === PARENTS)
  t.equal(await queueFor('parents').getDelayedCount(), PARENTS, 'every parent is parked')

  const finisher = new Worker(
    'children',
    async (job: Job) => {
      if ((job.data as { fail?: boolean }).fail) throw new UnrecoverableError('refused')
      return 'done'
    },
    { connection: connection(), prefix, concurrency: PARENTS },
  )
  t.teardown(() => finisher.close())
  await until(async () => results.size === PARENTS)
  const states = [...results.values()]
  t.equal(states.filter((s) => s === 'completed').length, PARENTS - PARENTS / 10)
  t.equal(states.filter((s) => s === 'failed').length, PARENTS / 10, 'a failed child wakes too')
  const left = await connection().keys(`${prefix}:hz-waiters:*`)
  t.same(left, [], 'no waiter is left registered')
})

t.test(
  "a queue whose event stream is not a stream holds up no other queue's parents",
  async (t) => {
    const prefix = 'hzt-wrongtype'
    const { connection, queueFor, keys, children } = await wakeRig(t, prefix)
    const reported: unknown[] = []
    const watcher = new ChildWatcher({
      connection,
      keys,
      queueFor,
      onError: (e) => reported.push(e),
    })
    t.teardown(() => watcher.stop())

    // Parents p0-p9 wait for a child on a good DPU's queue, `bad` on the bad DPU's queue.
    const childOf = (job: Job): ChildRef => ({
      queue: job.id === 'bad' ? 'agent-bad' : 'agent-good',
      jobId: `child-${job.id}`,
    })
    const parents = new Worker(
      'parents',
      async (job: Job, token?: string) => {
        const ref = childOf(job)
        if (!(job.data as { parked?: boolean }).parked) {
          await children.add(ref.queue, 'child', {}, ref)
          await job.updateData({ parked: true })
        }
        await children.park(job, token, [ref])
        return (await children.outcome(ref)).state
      },
      { connection: connection(), prefix, concurrency: 20 },
    )
    t.teardown(() => parents.close())
    const done = new Set<string>()
    parents.on('completed', (job) => done.add(job.id ?? ''))
    for (const id of ['bad', ...Array.from({ length: 10 }, (_, i) => `p${i}`)]) {
      await queueFor('parents').add('parent', {}, { jobId: id })
    }
    await until(async () => (await queueFor('parents').getDelayedCount()) === 11)

    // The bad DPU's agent may write its own queue's keys: it makes its event stream a string.
    const redis = connection()
    await redis.del(keys.events('agent-bad'))
    await redis.set(keys.events('agent-bad'), 'not a stream')
    await new Promise((r) => setTimeout(r, 1000))

    const finisher = new Worker('agent-good', async () => 'done', {
      connection: connection(),
      prefix,
      concurrency: 10,
    })
    t.teardown(() => finisher.close())
    const began = Date.now()
    await until(async () => done.size === 10, 10_000)
    t.equal(done.size, 10, `the good DPU's children woke their parents (${Date.now() - began} ms)`)
    t.notOk(done.has('bad'), "the bad DPU's parent waits for its timer")
    t.match(
      reported,
      [{ code: 'EVENT_STREAM_UNREADABLE', queue: 'agent-bad' }],
      'the bad queue is reported, once',
    )
  },
)

t.test('a child that finishes while its parent is parking still wakes it', async (t) => {
  const prefix = 'hzt-window'
  const { connection, queueFor, keys, children } = await wakeRig(t, prefix)
  const watcher = new ChildWatcher({ connection, keys, queueFor })
  t.teardown(() => watcher.stop())

  const ref: ChildRef = { queue: 'children', jobId: 'child-p' }
  /** Runs the child to its end, as a fast agent does, and waits until it has. */
  const finishChild = async () => {
    const finisher = new Worker('children', async () => 'done', {
      connection: connection(),
      prefix,
    })
    await until(async () => (await children.outcome(ref)).state === 'completed')
    // The watcher reads the event at once and finds the parent still running: its
    // promotion is refused, as it is for any parent not parked yet.
    await new Promise((r) => setTimeout(r, 300))
    await finisher.close()
  }
  let runs = 0
  const parents = new Worker(
    'parents',
    async (job: Job, token?: string) => {
      runs++
      if (runs === 1) {
        await children.add(ref.queue, 'child', {}, ref)
        // The child finishes after the parent's last look, before it is delayed.
        const parking: Job = Object.create(job)
        parking.moveToDelayed = async (timestamp: number, lockToken?: string) => {
          await finishChild()
          return job.moveToDelayed(timestamp, lockToken)
        }
        await children.park(parking, token, [ref])
      }
      return (await children.outcome(ref)).state
    },
    { connection: connection(), prefix },
  )
  t.teardown(() => parents.close())
  let result: unknown
  parents.on('completed', (_job, value) => {
    result = value
  })
  await queueFor('parents').add('parent', {}, { jobId: 'p' })
  await until(async () => result !== undefined, 15_000)
  t.equal(result, 'completed', 'the parent ran again and read its child done (its timer: an hour)')
  t.equal(runs, 2)
})

t.test('a parent woken by its child goes before the jobs queued while it was parked', async (t) => {
  const prefix = 'hzt-first'
  const { connection, queueFor, keys, children } = await wakeRig(t, prefix)
  const watcher = new ChildWatcher({ connection, keys, queueFor })
  t.teardown(() => watcher.stop())

  const ref: ChildRef = { queue: 'children', jobId: 'child-p' }
  let release: () => void = () => {}
  const held = new Promise<void>((resolve) => {
    release = resolve
  })
  /** The order in which the one worker slot took jobs (the parent: `p` each run). */
  const taken: string[] = []
  const parents = new Worker(
    'parents',
    async (job: Job, token?: string) => {
      taken.push(job.id ?? '')
      if (job.id === 'busy') return held
      if (job.id !== 'p') return 'done'
      if (!(job.data as { parked?: boolean }).parked) {
        await children.add(ref.queue, 'child', {}, ref)
        await job.updateData({ parked: true })
      }
      await children.park(job, token, [ref])
      return (await children.outcome(ref)).state
    },
    { connection: connection(), prefix, concurrency: 1 },
  )
  t.teardown(() => parents.close())
  await queueFor('parents').add('parent', {}, { jobId: 'p' })
  await until(async () => (await queueFor('parents').getDelayedCount()) === 1)
  // The only slot is taken, and work queues behind it while the parent is parked.
  await queueFor('parents').add('busy', {}, { jobId: 'busy' })
  await until(async () => taken.includes('busy'))
  for (let i = 0; i < 5; i++) await queueFor('parents').add('later', {}, { jobId: `later-${i}` })
  const finisher = new Worker('children', async () => 'done', { connection: connection(), prefix })
  t.teardown(() => finisher.close())
  await until(async () => (await queueFor('parents').getDelayedCount()) === 0)
  t.equal(await queueFor('parents').getWaitingCount(), 6, 'woken: waiting with the 5 queued jobs')
  release()
  await until(async () => taken.length === 8)
  t.same(
    taken,
    ['p', 'busy', 'p', 'later-0', 'later-1', 'later-2', 'later-3', 'later-4'],
    'the woken parent ran first once the slot was free',
  )
})

/** Polls `check` every 20 ms for up to `ms` (30 s). */
t.test(
  'a child that finishes between two reads is never read as done without its result',
  async (t) => {
    const prefix = 'hzt-outcome'
    const { connection, queueFor } = await wakeRig(t, prefix)
    let release: () => void = () => {}
    const running = new Promise<void>((r) => {
      release = r
    })
    const worker = new Worker(
      'children',
      async () => {
        await running
        return { publicIp: '203.0.113.7' }
      },
      { connection: connection(), prefix },
    )
    t.teardown(() => worker.close())
    const ref: ChildRef = { queue: 'children', jobId: 'child-1' }
    await queueFor('children').add('child', {}, { jobId: ref.jobId })
    await until(async () => (await queueFor('children').getJobState(ref.jobId)) === 'active')

    // The child finishes right after the first read of it, before any second one.
    let armed = true
    const finishNow = async () => {
      if (!armed) return
      armed = false
      release()
      await until(async () => (await queueFor('children').getJobState(ref.jobId)) === 'completed')
    }
    const racing = (name: string): Queue => {
      const queue = queueFor(name)
      if (name !== 'children') return queue
      return new Proxy(queue, {
        get(target, key, receiver) {
          const value = Reflect.get(target, key, receiver)
          if ((key !== 'getJob' && key !== 'getJobState') || typeof value !== 'function')
            return value
          return async (...args: unknown[]) => {
            const answer = await value.apply(target, args)
            await finishNow()
            return answer
          }
        },
      })
    }
    const children = bullChildJobs(racing, connection(), waiterKeys(prefix))
    const first = await children.outcome(ref)
    t.not(
      first.state === 'completed' && first.value === null,
      true,
      `read while it finished: ${JSON.stringify(first)} (never "completed" with no result)`,
    )
    t.same(
      await children.outcome(ref),
      { state: 'completed', value: { publicIp: '203.0.113.7' } },
      'read again: done, with its result',
    )
  },
)

t.test('a queue is read while a parent awaits it, and no longer after', async (t) => {
  const prefix = 'hzt-watching'
  const { connection, queueFor, keys } = await wakeRig(t, prefix)
  const watcher = new ChildWatcher({ connection, keys, queueFor, graceMs: 200 })
  t.teardown(() => watcher.stop())
  // Parents that wake on their own within a second; then parents that would sleep an hour.
  const brief = bullChildJobs(queueFor, connection(), keys, { minMs: 1000, maxMs: 1000 })
  const long = bullChildJobs(queueFor, connection(), keys, { minMs: HOUR, maxMs: HOUR })
  const results = new Map<string, unknown>()
  const parents = new Worker(
    'parents',
    async (job: Job, token?: string) => {
      const children = (job.data as { long?: boolean }).long ? long : brief
      const ref: ChildRef = { queue: 'agent-a', jobId: `child-${job.id}` }
      if (!(job.data as { added?: boolean }).added) {
        await children.add(ref.queue, 'child', {}, ref)
        await job.updateData({ ...(job.data as object), added: true })
      }
      await children.park(job, token, [ref])
      return (await children.outcome(ref)).state
    },
    { connection: connection(), prefix, concurrency: 5 },
  )
  t.teardown(() => parents.close())
  parents.on('completed', (job, result) => results.set(job.id ?? '', result))
  const watching = async (queue: string) => {
    await until(async () => watcher.watching().includes(queue), 5000)
    return watcher.watching().includes(queue)
  }
  const notWatching = async (queue: string) => {
    await until(async () => !watcher.watching().includes(queue), 10_000)
    return !watcher.watching().includes(queue)
  }
  t.same(watcher.watching(), [], 'no queue is read before a parent waits')

  await queueFor('parents').add('parent', {}, { jobId: 'p1' })
  t.ok(await watching('agent-a'), 'its child queue is read while the parent waits')
  const finisher = () =>
    new Worker('agent-a', async () => 'done', { connection: connection(), prefix })
  let worker = finisher()
  await until(async () => results.has('p1'))
  t.equal(results.get('p1'), 'completed', 'the parent got its child')
  await worker.close()
  t.ok(await notWatching('agent-a'), 'no parent waits: the queue is read no longer')

  // Awaited again: read again, and this parent (an hour from its own wake) is woken by it.
  await queueFor('parents').add('parent', { long: true }, { jobId: 'p2' })
  t.ok(await watching('agent-a'), 'awaited again: read again')
  await until(async () => (await queueFor('parents').getDelayedCount()) === 1)
  worker = finisher()
  t.teardown(() => worker.close())
  await until(async () => results.has('p2'))
  t.equal(results.get('p2'), 'completed', 'woken by its child, not by its hour-long timer')
})

async function until(check: () => Promise<boolean>, ms = 30_000): Promise<void> {
  const deadline = Date.now() + ms
  while (!(await check()) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20))
}

t.test(
  'a watcher whose Redis is unreachable reports it once, not as unhandled errors',
  async (t) => {
    // Nothing listens here: every connect and reconnect fails.
    const url = `redis://127.0.0.1:${await freePort('127.0.0.1')}`
    const printed: string[] = []
    const consoleError = console.error
    console.error = (...args: unknown[]) => {
      printed.push(args.map(String).join(' '))
    }
    const connections: Redis[] = []
    const reported: unknown[] = []
    let stopMs = Number.POSITIVE_INFINITY
    try {
      const watcher = new ChildWatcher({
        connection: () => {
          const redis = new Redis(url, { maxRetriesPerRequest: null, retryStrategy: () => 50 })
          connections.push(redis)
          return redis
        },
        keys: waiterKeys('hzt-unreachable'),
        queueFor: () => {
          throw new Error('no queue is needed')
        },
        onError: (error) => reported.push(error),
      })
      // Many reconnect attempts (every 50 ms) fail meanwhile.
      await new Promise((r) => setTimeout(r, 1000))
      const began = Date.now()
      await watcher.stop()
      stopMs = Date.now() - began
    } finally {
      for (const c of connections) c.disconnect()
      console.error = consoleError
    }
    t.ok(stopMs < 5000, `stop() returned while Redis is still down (${stopMs} ms)`)
    t.equal(reported.length, 1, 'the outage is reported once')
    t.match(String(reported[0]), /ECONNREFUSED/)
    t.same(
      printed.filter((line) => line.includes('Unhandled error event')),
      [],
      'ioredis printed no unhandled error',
    )
  },
)

/**
 * A private Redis with the queues, waiter keys and child jobs of `prefix`, every
 * connection and queue closed at teardown.
 */
async function wakeRig(t: Test, prefix: string) {
  const stack = await withStack(t)
  const connection = redisConnections(t, stack.redis?.url ?? '')
  const queues = new Map<string, Queue>()
  const queueFor = (name: string) => {
    let queue = queues.get(name)
    if (!queue) {
      queue = new Queue(name, { connection: connection(), prefix })
      queues.set(name, queue)
    }
    return queue
  }
  t.teardown(() => Promise.all([...queues.values()].map((q) => q.close())))
  const keys = waiterKeys(prefix)
  const children = bullChildJobs(queueFor, connection(), keys, { minMs: HOUR, maxMs: HOUR })
  return { connection, queueFor, keys, children }
}
