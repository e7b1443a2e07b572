/**
 * The admin UI's sessions in Redis (`RedisSessions`), on a real redis-server: every replica
 * of Hydrazine knows every session (a browser balanced between two is signed in on both),
 * sign-out ends it everywhere, an idle session expires, a flash is shown once, and Redis
 * never holds a session id a browser could present.
 */
import { Redis } from 'ioredis'
import t from 'tap'
import { RedisSessions } from '../../api/http/ui/session.ts'
import { scanKeys } from '../../lib/redis/slots.ts'
import { withStack } from '../helpers/stack.ts'

t.test("sessions in Redis are every replica's", async (t) => {
  const stack = await withStack(t)
  const clients: Redis[] = []
  const client = () => {
    const redis = new Redis(stack.redis?.url ?? '', { maxRetriesPerRequest: 1 })
    redis.on('error', () => {})
    clients.push(redis)
    return redis
  }
  t.teardown(() => {
    for (const c of clients) c.disconnect()
  })
  // Two replicas, each with its own connection.
  const one = new RedisSessions(client(), { idleMs: 1500 })
  const two = new RedisSessions(client(), { idleMs: 1500 })

  const tenant = await one.create({ kind: 'tenant', tenant: 'tenant-a' })
  t.same(await two.get(tenant.id), tenant, 'signed in on one replica, known on the other')
  t.equal(await two.get(`${tenant.id}x`), undefined, 'another id is no session')
  t.equal(await two.get(undefined), undefined)

  await one.flash(tenant.id, 'host h1 force-deleted')
  t.equal(
    await two.takeFlash(tenant.id),
    'host h1 force-deleted',
    'a flash set on one, shown by the other',
  )
  t.equal(await one.takeFlash(tenant.id), undefined, 'once')

  const keys = await scanKeys(client(), 'hz:{ui}:session:*')
  t.equal(keys.length, 1, 'one key per session')
  t.notOk(
    keys.some((k) => k.includes(tenant.id)),
    'keyed by a digest: the id is not in Redis',
  )
  const stored = Object.values(await client().hgetall(keys[0] ?? ''))
  t.notOk(
    stored.some((v) => v.includes(tenant.id)),
    'nor in its fields',
  )

  await two.delete(tenant.id)
  t.equal(await one.get(tenant.id), undefined, 'signed out on one replica: out on both')
  await one.flash(tenant.id, 'late')
  t.equal(await two.get(tenant.id), undefined, 'a late flash does not bring it back')

  const idle = await one.create({ kind: 'operator' })
  await new Promise((r) => setTimeout(r, 900))
  t.ok(await two.get(idle.id), 'used within idleMs: kept, and its idle time starts over')
  await new Promise((r) => setTimeout(r, 900))
  t.ok(await one.get(idle.id), 'still: 0.9 s since its last use')
  await new Promise((r) => setTimeout(r, 1700))
  t.equal(await two.get(idle.id), undefined, 'idle longer than idleMs: gone')
})
