import { DelayedError, type Job } from 'bullmq'
import t from 'tap'
import { ParkedWork } from './parked-work.ts'

/** The part of a BullMQ job `ParkedWork` uses, and the state a queue would show. */
function fakeJob() {
  const job = {
    id: 'host.attach:host-1',
    queueName: 'hydrazine',
    attemptsMade: 0,
    data: {},
    state: 'active' as 'active' | 'delayed' | 'waiting',
    async moveToDelayed() {
      job.state = 'delayed'
    },
    async promote() {
      if (job.state !== 'delayed') throw new Error('not delayed')
      job.state = 'waiting'
    },
    async changePriority() {},
  }
  return job
}
const asJob = (job: ReturnType<typeof fakeJob>) => job as unknown as Job

/** A promise and the hands that settle it. */
function deferred<T>() {
  let resolve: (value: T) => void = () => {}
  let reject: (error: unknown) => void = () => {}
  const promise = new Promise<T>((res, rej) => {
    resolve = res
    reject = rej
  })
  return { promise, resolve, reject }
}

const nextTurn = () => new Promise((r) => setImmediate(r))

/** The unhandled rejections while the test runs (none is expected). */
function unhandledRejections(t: { teardown(fn: () => void): void }): unknown[] {
  const seen: unknown[] = []
  const listener = (reason: unknown) => seen.push(reason)
  process.on('unhandledRejection', listener)
  t.teardown(() => {
    process.off('unhandledRejection', listener)
  })
  return seen
}

t.test(
  "work that fails while the job's step is recorded fails the run; none is unhandled",
  async (t) => {
    const unhandled = unhandledRejections(t)
    const job = fakeJob()
    const work = deferred<string>()
    // BullMQ's connection waits for a Redis that is restarting; the store's gave up.
    const recorded = deferred<void>()
    const parked = new ParkedWork<string>()
    const run = parked.park(asJob(job), 'token', work.promise, { record: () => recorded.promise })
    const gaveUp = new Error('Reached the max retries per request limit (which is 3)')
    work.reject(gaveUp)
    await nextTurn()
    recorded.resolve()
    await t.rejects(run, gaveUp, "the run fails with the work's error (BullMQ retries it)")
    t.equal(job.state, 'active', 'not parked: the outcome was there before the job was delayed')
    t.same(unhandled, [], 'no unhandled rejection')
  },
)

t.test("a record that fails fails the run; the work failing later is no one's", async (t) => {
  const unhandled = unhandledRejections(t)
  const job = fakeJob()
  const work = deferred<string>()
  const parked = new ParkedWork<string>()
  const lost = new Error('Connection is closed.')
  const run = parked.park(asJob(job), 'token', work.promise, {
    record: () => Promise.reject(lost),
  })
  await t.rejects(run, lost)
  work.reject(new Error('Reached the max retries per request limit (which is 3)'))
  await nextTurn()
  t.equal(await parked.resume(asJob(job), 'token'), undefined, 'nothing kept: the retry works')
  t.same(unhandled, [], 'no unhandled rejection')
})

t.test('a job parked until its work settles wakes, and its next run takes the value', async (t) => {
  const job = fakeJob()
  const work = deferred<string>()
  const parked = new ParkedWork<string>()
  let recorded = false
  const run = parked.park(asJob(job), 'token', work.promise, {
    record: async () => {
      recorded = true
    },
  })
  await t.rejects(run, DelayedError, 'parked: its worker slot is free')
  t.ok(recorded, 'its step was recorded before it was delayed')
  t.equal(job.state, 'delayed')
  work.resolve('applied')
  await nextTurn()
  t.equal(job.state, 'waiting', 'woken once the work settled')
  t.equal(await parked.resume(asJob(job), 'token'), 'applied')
})
