import t from 'tap'
import { MAX_WATCHED, watchedOf } from './live.ts'

t.test('?watch= keeps the keys of objects and leaves out the rest, never refusing', async (t) => {
  const cases: [string, string[], string[]][] = [
    ['groups and hosts by name', ['group/group-a', 'host/h1'], ['group/group-a', 'host/h1']],
    ['a DPU id as agents report it', ['dpu/DPU_7.rack-2'], ['dpu/DPU_7.rack-2']],
    ['an unknown kind or a bad name: left out', ['pool/p', 'host/H1', 'group/', 'x'], []],
    ['repeats once', ['host/h1', 'host/h1'], ['host/h1']],
  ]
  for (const [name, input, expected] of cases) t.same(watchedOf(input), expected, name)
  const many = Array.from({ length: MAX_WATCHED + 5 }, (_, i) => `host/h${i}`)
  t.equal(watchedOf(many).length, MAX_WATCHED, `at most ${MAX_WATCHED}`)
})
