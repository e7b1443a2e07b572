import t from 'tap'
import type { Principal } from '../tokens.ts'
import { DEFAULT_LIVE_LIMITS, LiveChanges, MAX_WATCHED, watchedOf } from './live.ts'

const OPERATOR: Principal = { kind: 'operator' }
const TENANT_A: Principal = { kind: 'tenant', tenant: 'tenant-a' }
const TENANT_B: Principal = { kind: 'tenant', tenant: 'tenant-b' }

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
    const got = live.admit(session, OPERATOR)
    if (typeof got === 'string') throw new Error(`${session}: ${got}`)
    return got
  }
  const [a, b, c] = [slot('s1'), slot('s1'), slot('s2')]
  t.equal(live.admit('s1', OPERATOR), 'busy', 'two per session')
  t.equal(live.admit('s3', TENANT_A), 'busy', 'three in all')

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
  t.equal(live.admit('s1', OPERATOR), 'closed', 'and admits none')
  d.release()
})

t.test("one tenant's streams keep no other principal's out", async (t) => {
  const live = new LiveChanges({
    client: { watchChanges: () => Promise.reject(new Error('not listened to here')) },
    limits: DEFAULT_LIVE_LIMITS,
    sessionIsLive: async () => true,
  })
  t.teardown(() => live.close())
  const { perSession, perPrincipal, total } = DEFAULT_LIVE_LIMITS
  // Tenant A asks for as many streams as the UI holds, over as many sessions as it takes.
  const asked = Array.from({ length: total }, (_, i) =>
    live.admit(`a${Math.floor(i / perSession)}`, TENANT_A),
  )
  t.equal(asked.filter((s) => s !== 'busy').length, perPrincipal, `tenant A: ${perPrincipal} open`)
  t.not(live.admit('b', TENANT_B), 'busy', 'tenant B still opens one')
  t.not(live.admit('op', OPERATOR), 'busy', 'and the operator')
})

t.test("the operator's streams are bounded by its own cap only", async (t) => {
  const live = new LiveChanges({
    client: { watchChanges: () => Promise.reject(new Error('not listened to here')) },
    limits: { ...DEFAULT_LIVE_LIMITS, perSession: 2, perPrincipal: 2, total: 2 },
    sessionIsLive: async () => true,
  })
  t.teardown(() => live.close())
  t.not(live.admit('a', TENANT_A), 'busy')
  t.not(live.admit('b', TENANT_B), 'busy')
  t.equal(live.admit('c', { kind: 'tenant', tenant: 'tenant-c' }), 'busy', 'two in all')
  t.not(live.admit('op', OPERATOR), 'busy', 'the operator is not held to the total')
  t.not(live.admit('op', OPERATOR), 'busy')
  t.equal(live.admit('op2', OPERATOR), 'busy', 'but to its own cap')
})
