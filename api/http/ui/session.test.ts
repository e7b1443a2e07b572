import t from 'tap'
import { csrfMatches, MemorySessions, networkOf, SignInLimiter } from './session.ts'

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

t.test('failed sign-ins are limited per address and per network, never in all', async (t) => {
  let now = 0
  const limiter = new SignInLimiter({ windowMs: 1000, perAddress: 2, perNetwork: 3 }, () => now)
  limiter.failed('192.0.2.1')
  t.ok(limiter.allowed('192.0.2.1'))
  limiter.failed('192.0.2.1')
  t.notOk(limiter.allowed('192.0.2.1'), 'two failures: that address waits')
  t.ok(limiter.allowed('192.0.2.2'), 'another address of its /24 does not, yet')
  limiter.failed('192.0.2.2')
  t.notOk(limiter.allowed('192.0.2.3'), 'three in the /24: all of it waits')
  t.ok(limiter.allowed('198.51.100.1'), 'another network is not counted with it')
  for (const a of ['203.0.113.1', '203.0.113.2', '198.18.0.1', '198.18.1.1', '198.18.2.1']) {
    limiter.failed(a)
  }
  t.ok(limiter.allowed('2001:db8::1'), 'nor is anything counted in all')
  limiter.failed('2001:db8:0:1::1')
  limiter.failed('2001:db8:0:1::2')
  limiter.failed('2001:db8:0:1:ffff::3')
  t.notOk(limiter.allowed('2001:db8:0:1::4'), 'IPv6: per /64')
  t.ok(limiter.allowed('2001:db8:0:2::1'), 'the next /64 is another network')
  now = 1001
  t.ok(limiter.allowed('192.0.2.1'), 'the window moved on')
  t.ok(limiter.allowed('2001:db8:0:1::4'))
})

t.test('the network of an address: its /24 or /64', async (t) => {
  const cases: [string, string][] = [
    ['192.0.2.7', '192.0.2.0/24'],
    ['::ffff:192.0.2.7', '192.0.2.0/24'],
    ['2001:db8:1:2::7', '2001:db8:1:2::/64'],
    ['2001:0db8:0001:0002:0:0:0:7', '2001:db8:1:2::/64'],
    ['2001:db8::7', '2001:db8:0:0::/64'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1:2:3:4', 'fe80:0:0:0::/64'],
    ['unknown', 'unknown'],
  ]
  for (const [address, network] of cases) t.equal(networkOf(address), network, address)
})
