/**
 * Leadership on a real Redis: of several processes running the same lease, exactly one
 * runs the work; when it stops or loses Redis, another takes over, and the two never run
 * at once.
 */
import { Redis } from 'ioredis'
import t from 'tap'
import { Leadership, Leases } from '../../lib/state/leases.ts'
import { eventually } from '../helpers/processes.ts'
import { withStack } from '../helpers/stack.ts'

const PREFIX = 'hz:{store}:'
const TTL = 900

/** Who ran the work, from when to when (`to` undefined while running). */
interface Term {
  readonly who: string
  readonly from: number
  to?: number
}

t.test('one leader at a time, handed over on stop and on a lost Redis', async (t) => {
  const stack = await withStack(t)
  const url = stack.redis?.url ?? ''
  const clients: Redis[] = []
  const client = () => {
    const redis = new Redis(url, { maxRetriesPerRequest: 1 })
    redis.on('error', () => {})
    clients.push(redis)
    return redis
  }
  t.teardown(() => {
    for (const c of clients) c.disconnect()
  })
  const terms: Term[] = []
  const replica = (who: string, redis: Redis) =>
    new Leadership({
      leases: new Leases(redis, PREFIX),
      name: 'work',
      holder: who,
      ttlMs: TTL,
      follow: async () => {
        follows.set(who, (follows.get(who) ?? 0) + 1)
      },
      lead: async () => {
        const term: Term = { who, from: Date.now() }
        terms.push(term)
        return async () => {
          term.to = Date.now()
        }
      },
    })
  const follows = new Map<string, number>()
  const running = () => terms.filter((term) => term.to === undefined).map((term) => term.who)

  const lostRedis = client()
  const a = replica('a', lostRedis)
  await eventually(async () => running().length === 1, 5000)
  const b = replica('b', client())
  const c = replica('c', client())
  t.teardown(async () => {
    for (const r of [a, b, c]) await r.stop()
  })
  await new Promise((r) => setTimeout(r, TTL * 2))
  t.same(running(), ['a'], 'the first to ask leads; the others wait')
  t.equal(await new Leases(client(), PREFIX).holder('work'), 'a')
  t.same(
    Object.fromEntries(follows),
    { b: 1, c: 1 },
    'each follower ran its follow once (keeping its own speaker silent), not at every renewal',
  )

  // The leader loses Redis: it stops its work before its lease runs out, then one other
  // takes over.
  lostRedis.disconnect()
  t.ok(
    await eventually(async () => running().length === 1 && running()[0] !== 'a', TTL * 4),
    'another replica took over',
  )
  const [first, second] = terms
  t.ok(first?.to !== undefined && second && first.to <= second.from, 'never two at once')
  t.ok(
    await eventually(async () => follows.get('a') === 1, TTL * 2),
    'with others about, the leader that lost Redis ran its follow (silenced its speaker)',
  )

  // The new leader stops cleanly: it hands over at once, not after the lease.
  const leader = running()[0] === 'b' ? b : c
  const stoppedAt = Date.now()
  await leader.stop()
  t.ok(await eventually(async () => running().length === 1, TTL * 2), 'the last one took over')
  const third = terms[2]
  t.ok(third && third.from - stoppedAt < TTL, 'within a renewal, not a whole lease')
  t.equal(terms.length, 3, 'three terms in all')
  for (let i = 1; i < terms.length; i++) {
    t.ok((terms[i - 1]?.to ?? Infinity) <= (terms[i]?.from ?? 0), `term ${i} began after ${i - 1}`)
  }
})

t.test('alone, a leader that loses Redis keeps its work (and its speaker)', async (t) => {
  const stack = await withStack(t)
  const redis = new Redis(stack.redis?.url ?? '', { maxRetriesPerRequest: 1 })
  redis.on('error', () => {})
  let running = false
  let followed = 0
  const alone = new Leadership({
    leases: new Leases(redis, PREFIX),
    name: 'alone',
    holder: 'solo',
    ttlMs: TTL,
    follow: async () => {
      followed++
    },
    lead: async () => {
      running = true
      return async () => {
        running = false
      }
    },
  })
  t.teardown(() => alone.stop())
  t.ok(await eventually(async () => running, 5000), 'it leads')
  redis.disconnect()
  await new Promise((r) => setTimeout(r, TTL * 3))
  t.ok(running, 'still working with Redis gone: nobody else could take over')
  t.equal(followed, 0, 'and its speaker was not silenced')
})
