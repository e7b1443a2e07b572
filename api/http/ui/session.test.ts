import t from 'tap'
import { csrfMatches, MemorySessions, SignInLimiter } from './session.ts'

t.test('sessions in memory: random ids, idle expiry, capped count, flash once', async (t) => {
  let now = 0
  const store = new MemorySessions({ idleMs: 1000, maxSessions: 2 }, () => now)
  const a = await store.create({ kind: 'operator' }, 'digest')
  t.match(a.id, /^[A-Za-z0-9_-]{43}$/, '32 random bytes')
  t.not(a.csrf, a.id)
  now = 900
  t.same(await store.get(a.id), a, 'used: kept')
  now = 1800
  t.same(await store.get(a.id), a, 'idle less than idleMs since its last use')
  await store.flash(a.id, 'done')
  t.equal(await store.takeFlash(a.id), 'done', 'the next page shows the flash')
  t.equal(await store.takeFlash(a.id), undefined, 'once')
  t.ok(await store.isLive(a.id), 'live')
  now = 2700
  t.ok(await store.isLive(a.id), 'asking whether it is live is no use of it')
  now = 2801
  t.notOk(await store.isLive(a.id), 'idle too long since its last use')
  t.equal(await store.get(a.id), undefined, 'idle too long: gone')

  const b = await store.create({ kind: 'tenant', tenant: 't' }, 'digest')
  const c = await store.create({ kind: 'operator' }, 'digest')
  await store.get(b.id)
  const d = await store.create({ kind: 'operator' }, 'digest')
  t.equal(store.size, 2)
  t.equal(await store.get(c.id), undefined, 'the least recently used went first')
  t.ok((await store.get(b.id)) && (await store.get(d.id)))
  await store.delete(b.id)
  t.equal(await store.get(b.id), undefined, 'signed out')
  t.equal(await store.get(undefined), undefined)
})

t.test('CSRF tokens compare whole', async (t) => {
  const s = await new MemorySessions().create({ kind: 'operator' }, 'digest')
  t.ok(csrfMatches(s, s.csrf))
  t.notOk(csrfMatches(s, s.csrf.slice(1)))
  t.notOk(csrfMatches(s, ''))
})

t.test('failed sign-ins are limited per address and in all', async (t) => {
  let now = 0
  const limiter = new SignInLimiter({ windowMs: 1000, perAddress: 2, total: 3 }, () => now)
  limiter.failed('a')
  t.ok(limiter.allowed('a'))
  limiter.failed('a')
  t.notOk(limiter.allowed('a'), 'two failures: a waits')
  t.ok(limiter.allowed('b'), 'b is another address')
  limiter.failed('b')
  t.notOk(limiter.allowed('c'), 'three in all: everyone waits')
  now = 1001
  t.ok(limiter.allowed('a'), 'the window moved on')
  t.ok(limiter.allowed('c'))
})
