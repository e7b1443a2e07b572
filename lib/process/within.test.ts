import t from 'tap'
import { within } from './within.ts'

const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length

t.test('the value of work done in time, and no timer left behind', async (t) => {
  const before = timers()
  t.equal(await within(Promise.resolve('done'), 60_000, 'late'), 'done')
  t.equal(timers(), before, 'its 60 s timer is cleared')
})

t.test('late when the time passes first', async (t) => {
  t.equal(await within(new Promise(() => {}), 20, 'late'), 'late')
})

t.test("work's rejection in time is passed on, its timer cleared", async (t) => {
  const before = timers()
  await t.rejects(within(Promise.reject(new Error('no')), 60_000, 'late'), /no/)
  t.equal(timers(), before)
})
