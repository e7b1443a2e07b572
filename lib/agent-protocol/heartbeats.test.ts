import t from 'tap'
import { type DpuState, dpuStateOf } from './heartbeats.ts'

t.test("a DPU's state is the age of its newest beat, in the beat's own interval", async (t) => {
  const at = '2024-05-01T12:00:00.000Z'
  const after = (ms: number) => new Date(Date.parse(at) + ms)
  const cases: [string, number, number, DpuState][] = [
    ['just beat', 1000, 0, 'Online'],
    ['the next beat is due', 1000, 1000, 'Online'],
    ['half an interval late', 1000, 1499, 'Online'],
    ['one beat missed', 1000, 1500, 'Stale'],
    ['nearly two missed', 1000, 1999, 'Stale'],
    ['two missed: lost', 1000, 2000, 'Lost'],
    ['long gone', 1000, 3_600_000, 'Lost'],
    ['a slower agent is judged by its own interval', 5000, 7000, 'Online'],
    ['… and lost after two of them', 5000, 10_000, 'Lost'],
    ['a beat stamped ahead of our clock', 1000, -5000, 'Online'],
  ]
  for (const [what, intervalMs, age, expected] of cases) {
    t.equal(dpuStateOf({ at, intervalMs }, after(age)), expected, what)
  }
  t.equal(dpuStateOf({ at: 'yesterday', intervalMs: 1000 }, after(0)), 'Lost', 'an unreadable time')
  t.equal(dpuStateOf({ at, intervalMs: 0 }, after(10)), 'Lost', 'a zero interval')
})
