import t from 'tap'
import { until } from './fixtures.ts'
import { startScheduledController } from './scenarios.ts'

t.test('the repeatable reconcile keeps a bounded number of its finished runs', async (t) => {
  // The embedded default with no group yet: one central per group, none running.
  const controller = await startScheduledController(t, {
    reconcileEveryMs: 50,
    prefix: 'hzsched',
  })

  let runs = 0
  controller.worker.on('completed', (job) => {
    if (job.name === 'reconcile') runs++
  })
  // Well past the number of results an operator is given to read (50).
  await until(
    async () => runs,
    (n) => n >= 80,
    30_000,
  )
  t.ok(runs >= 80, `reconcile ran ${runs} times`)

  const kept = await controller.queue.getCompleted(0, -1)
  t.ok(kept.length > 0, 'recent results stay for operators to read')
  t.ok(kept.length <= 50, `completed reconcile jobs kept: ${kept.length} (at most 50)`)
  t.ok(
    kept.every((job) => job.name === 'reconcile'),
    'nothing but reconcile ran',
  )
  t.match(kept[0]?.returnvalue, { checkedGroups: 0 }, "the newest run's report is readable")
  t.equal(await controller.queue.getFailedCount(), 0, 'no run failed')
})
