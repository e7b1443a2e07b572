import t from 'tap'
import { csrfMatches, SessionStore, SignInLimiter } from './session.ts'

t.test('sessions: random ids, idle expiry, capped count', async (t) => {
  let now = 0
  const store = new SessionStore({ idleMs: 1000, maxSessions: 2 }, () => now)
  const a = store.create({ kind: 'operator' })
  t.match(a.id, /^[A-Za-z0-9_-]{43}$/, '32 random bytes')
  t.not(a.csrf, a.id)
  now = 900
  t.equal(store.get(a.id), a, 'used: kept')
  now = 1800
  t.equal(store.get(a.id), a, 'idle less than idleMs since its last use')
  now = 2801
  t.equal(store.get(a.id), undefined, 'idle too long: gone')

  const b = store.create({ kind: 'tenant', tenant: 't' })
  const c = store.create({ kind: 'operator' })
  store.get(b.id)
  const d = store.create({ kind: 'operator' })
  t.equal(store.size, 2)
  t.equal(store.get(c.id), undefined, 'the least recently used went first')
  t.ok(store.get(b.id) && store.get(d.id))
  store.delete(b.id)
  t.equal(store.get(b.id), undefined, 'signed out')
  t.equal(store.get(undefined), undefined)
})

t.test('CSRF tokens compare whole', async (t) => {
  const s = new SessionStore().create({ kind: 'operator' })
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
