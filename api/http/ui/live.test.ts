import t from 'tap'
import { DEFAULT_LIVE_LIMITS, LiveChanges, MAX_WATCHED, watchedOf } from './live.ts'

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

t.test("a session's streams: bounded, and ended with the session or the UI", async (t) => {
  const signedIn = new Set(['s1', 's2'])
  const live = new LiveChanges({
    client: { watchChanges: () => Promise.reject(new Error('not listened to here')) },
    limits: { ...DEFAULT_LIVE_LIMITS, perSession: 2, total: 3, sessionCheckMs: 20 },
    sessionIsLive: async (id) => signedIn.has(id),
  })
  const slot = (session: string) => {
    const got = live.admit(session)
    if (typeof got === 'string') throw new Error(`${session}: ${got}`)
    return got
  }
  const [a, b, c] = [slot('s1'), slot('s1'), slot('s2')]
  t.equal(live.admit('s1'), 'busy', 'two per session')
  t.equal(live.admit('s3'), 'busy', 'three in all')

  live.endSession('s1')
  t.same([a.ended.aborted, b.ended.aborted, c.ended.aborted], [true, true, false], 'its own only')
  a.release()
  b.release()
  const d = slot('s1')
  t.notOk(d.ended.aborted, 'released: room for another')

  signedIn.delete('s2')
  await new Promise((resolve) => setTimeout(resolve, 60))
  t.same([c.ended.aborted, d.ended.aborted], [true, false], 'a session that is over: checked')
  c.release()

  live.close()
  t.ok(d.ended.aborted, 'closing the UI ends every stream')
  t.equal(live.admit('s1'), 'closed', 'and admits none')
  d.release()
})
