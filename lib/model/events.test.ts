import t from 'tap'
import { transitionEvents } from './events.ts'
import type { Condition } from './objects.ts'

const c = (type: string, status: Condition['status'], reason: string, message = ''): Condition => ({
  type,
  status,
  reason,
  message,
  lastTransitionTime: '2026-01-01T00:00:00.000Z',
})

const cases = [
  {
    name: 'a new object: its phase and each condition',
    before: undefined,
    after: { phase: 'Attaching', conditions: [c('Attached', 'Unknown', 'Pending')] },
    want: [
      { type: 'Normal', reason: 'Attaching', message: 'Attaching' },
      { type: 'Normal', reason: 'Pending', message: 'Attached=Unknown' },
    ],
  },
  {
    name: 'a failure: the phase names its cause, the condition is a warning',
    before: { phase: 'Attaching', conditions: [] },
    after: { phase: 'Failed', conditions: [c('Attached', 'False', 'POOL_EXHAUSTED', 'no IP')] },
    want: [
      { type: 'Warning', reason: 'Failed', message: 'Attaching → Failed: POOL_EXHAUSTED: no IP' },
      { type: 'Warning', reason: 'POOL_EXHAUSTED', message: 'Attached=False: no IP' },
    ],
  },
  {
    name: 'nothing changed: no event',
    before: { phase: 'Ready', conditions: [c('A', 'True', 'Ok')] },
    after: { phase: 'Ready', conditions: [c('A', 'True', 'Ok', 'other words')] },
    want: [],
  },
  {
    name: 'a condition whose reason changed is an event; one that went away is not',
    before: {
      phase: 'Configuring',
      conditions: [c('A', 'False', 'Waiting'), c('B', 'True', 'Ok')],
    },
    after: { phase: 'Configuring', conditions: [c('A', 'False', 'Stuck')] },
    want: [{ type: 'Warning', reason: 'Stuck', message: 'A=False' }],
  },
]
for (const k of cases) {
  t.test(k.name, async (t) => {
    t.same(transitionEvents(k.before, k.after), k.want)
  })
}
