/**
 * A parked job woken while its earlier run is still ending, on a real Redis and BullMQ
 * worker: its new run keeps its lock however long it works (BullMQ forgets the job's lock
 * by id when the earlier run ends), so it is not taken for stalled and run a third time,
 * and its completion is accepted.
 */
import { DelayedError, type Job, Queue, Worker } from 'bullmq'
import t from 'tap'
import { keepLocksOfOverlappingRuns } from '../../queues/overlapping-runs.ts'
import { eventually } from '../helpers/processes.ts'
import { redisConnections, withStack } from '../helpers/stack.ts'

const LOCK_MS = 1000
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

t.test('a run that began before the parked run ended keeps its lock', async (t) => {
  const stack = await withStack(t)
  const connection = redisConnections(t, stack.redis?.url ?? '')
  const queue = new Queue('overlap', { connection: connection() })
  t.teardown(() => queue.close())
  const runs: number[] = []
  const errors: string[] = []
  const processor = async (job: Job, token?: string) => {
    const run = runs.push(performance.now())
    if (run === 1) {
      // The park: delayed, then woken at once (its work was done), while this run still
      // has a step to take (the object lock's release) before it ends.
      await job.moveToDelayed(Date.now() + 60_000, token)
      await job.promote()
      await eventually(async () => runs.length >= 2, 5000)
      await sleep(50)
      throw new DelayedError()
    }
    // The woken run works for longer than a lock lasts.
    await sleep(LOCK_MS * 2.5)
    return `run ${run}`
  }
  const worker = new Worker('overlap', keepLocksOfOverlappingRuns(processor, LOCK_MS), {
    connection: connection(),
    concurrency: 2,
    lockDuration: LOCK_MS,
    stalledInterval: LOCK_MS / 2,
    maxStalledCount: 1,
  })
  worker.on('error', (error) => errors.push(error.message))
  t.teardown(() => worker.close(true))
  const job = await queue.add('parks', {}, { jobId: 'parks-once' })
  await eventually(async () => ['completed', 'failed'].includes(await job.getState()), 15_000)
  const done = await queue.getJob('parks-once')
  t.equal(await done?.getState(), 'completed', 'the job completed')
  t.equal(done?.returnvalue, 'run 2', 'with the result of the run woken from its park')
  t.equal(runs.length, 2, 'and ran twice only: the woken run was never taken for stalled')
  t.same(
    errors.filter((e) => /lock/i.test(e)),
    [],
    'no lost lock was reported',
  )
})
