/**
 * The admin UI's sessions in Redis (`RedisSessions`), on a real redis-server: every replica
 * of Hydrazine knows every session (a browser balanced between two is signed in on both),
 * sign-out ends it everywhere, an idle session expires, a flash is shown once, Redis
 * never holds a session id a browser could present, and a token taken out of the tokens
 * file ends the sessions it opened. Failed sign-ins are counted per address and network:
 * they never refuse a valid token, nor a sign-in from elsewhere.
 */
import { request, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { serve } from '@hono/node-server'
import { Redis } from 'ioredis'
import t from 'tap'
import { createApp } from '../../api/http/app.ts'
import type { UiDeps } from '../../api/http/ui/routes.tsx'
import { RedisSessions, tokenDigest } from '../../api/http/ui/session.ts'
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

  const tenant = await one.create(
    { kind: 'tenant', tenant: 'tenant-a' },
    tokenDigest('a-token-of-tenant-a'),
  )
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

  const idle = await one.create({ kind: 'operator' }, tokenDigest('a-token-of-tenant-a'))
  await new Promise((r) => setTimeout(r, 900))
  t.ok(await two.get(idle.id), 'used within idleMs: kept, and its idle time starts over')
  await new Promise((r) => setTimeout(r, 900))
  t.ok(await one.get(idle.id), 'still: 0.9 s since its last use')
  await new Promise((r) => setTimeout(r, 1700))
  t.equal(await two.get(idle.id), undefined, 'idle longer than idleMs: gone')
})

t.test(
  'a token taken out of the tokens file, or moved to another principal, ends its sessions',
  async (t) => {
    const stack = await withStack(t)
    const redis = new Redis(stack.redis?.url ?? '', { maxRetriesPerRequest: 1 })
    redis.on('error', () => {})
    t.teardown(() => redis.disconnect())
    const tokenA = 'tenant-a-token-0123456789'
    const tokenB = 'tenant-b-token-0123456789'
    // Pages are never reached here: a signed-in request to no route is 404, one without a
    // session is sent to sign in. The client is not used.
    const ui = (tenants: Record<string, string[]>) =>
      createApp({
        readiness: {},
        ui: {
          client: {} as UiDeps['client'],
          tokens: { operator: [], tenants },
          sessions: new RedisSessions(redis),
        },
      })
    const signIn = async (app: ReturnType<typeof ui>, token: string) => {
      const res = await app.request('/ui/sign-in', {
        method: 'POST',
        body: new URLSearchParams({ token }),
      })
      return (res.headers.get('set-cookie') ?? '').split(';')[0] ?? ''
    }
    const status = async (app: ReturnType<typeof ui>, cookie: string) =>
      (await app.request('/ui/no-such-page', { headers: { cookie } })).status

    const before = ui({ 'tenant-a': [tokenA], 'tenant-b': [tokenB] })
    const a = await signIn(before, tokenA)
    const b = await signIn(before, tokenB)
    t.equal(await status(before, a), 404, "tenant-a's session is signed in")
    t.equal(await status(before, b), 404, "tenant-b's too")
    // A restart with tenant-a's token taken out; the sessions stay in Redis.
    const after = ui({ 'tenant-b': [tokenB] })
    t.equal(await status(after, a), 303, "tenant-a's session is over: sent to sign in")
    t.equal(await status(after, b), 404, "tenant-b's session goes on")
    t.equal(await status(before, a), 303, 'and it is gone from Redis, for every replica')

    // A token moved to another principal: the session it opened must not keep the old one.
    const operatorToken = 'operator-token-0123456789'
    const withOperator = (tokens: { operator: string[]; tenants: Record<string, string[]> }) =>
      createApp({
        readiness: {},
        ui: { client: {} as UiDeps['client'], tokens, sessions: new RedisSessions(redis) },
      })
    const first = withOperator({ operator: [operatorToken], tenants: { 'tenant-b': [tokenB] } })
    const op = await signIn(first, operatorToken)
    const moved = await signIn(first, tokenB)
    t.equal(await status(first, op), 404, "the operator's session is signed in")
    // A restart: the operator's token is now tenant-a's, tenant-b's is now tenant-c's.
    const later = withOperator({
      operator: [],
      tenants: { 'tenant-a': [operatorToken], 'tenant-c': [tokenB] },
    })
    t.equal(await status(later, op), 303, 'a demoted operator token no longer acts as operator')
    t.equal(
      await status(later, moved),
      303,
      "a token moved to another tenant no longer sees the old one's",
    )
  },
)

t.test(
  'a sign-in from another origin, or from none the browser would name, is refused',
  async (t) => {
    const stack = await withStack(t)
    const redis = new Redis(stack.redis?.url ?? '', { maxRetriesPerRequest: 1 })
    redis.on('error', () => {})
    t.teardown(() => redis.disconnect())
    const token = 'tenant-a-token-0123456789'
    const app = createApp({
      readiness: {},
      ui: {
        client: {} as UiDeps['client'],
        tokens: { operator: [], tenants: { 'tenant-a': [token] } },
        sessions: new RedisSessions(redis),
      },
    })
    const signIn = (origin?: string) =>
      app.request('http://hz.example/ui/sign-in', {
        method: 'POST',
        body: new URLSearchParams({ token }),
        headers: { host: 'hz.example', ...(origin ? { origin } : {}) },
      })
    t.equal((await signIn('http://hz.example')).status, 303, 'from the UI itself: signed in')
    for (const origin of ['http://evil.example', 'null']) {
      const res = await signIn(origin)
      t.equal(res.status, 403, `Origin ${origin}: refused`)
      t.notOk(res.headers.get('set-cookie'), 'with no session cookie')
    }
  },
)

t.test(
  "failed sign-ins from elsewhere never refuse a valid token, nor another network's",
  async (t) => {
    const stack = await withStack(t)
    const redis = new Redis(stack.redis?.url ?? '', { maxRetriesPerRequest: 1 })
    redis.on('error', () => {})
    t.teardown(() => redis.disconnect())
    const operatorToken = 'operator-token-0123456789abcdef'
    const app = createApp({
      readiness: {},
      ui: {
        client: {} as UiDeps['client'],
        tokens: { operator: [operatorToken], tenants: {} },
        sessions: new RedisSessions(redis),
      },
    })
    // A real server: the limiter counts by the address a request comes from.
    const server = await new Promise<Server>((resolve) => {
      const s = serve({ fetch: app.fetch, hostname: '127.0.0.1', port: 0 }, () =>
        resolve(s as Server),
      ) as Server
    })
    t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
    const { port } = server.address() as AddressInfo
    const signIn = (from: string, token: string) =>
      new Promise<number>((resolve, reject) => {
        const body = new URLSearchParams({ token }).toString()
        const req = request(
          {
            host: '127.0.0.1',
            port,
            localAddress: from,
            method: 'POST',
            path: '/ui/sign-in',
            headers: { 'content-type': 'application/x-www-form-urlencoded' },
          },
          (res) => {
            res.resume()
            res.on('end', () => resolve(res.statusCode ?? 0))
          },
        )
        req.on('error', reject)
        req.end(body)
      })

    // 100 bad sign-ins from 10 addresses of one /24.
    const statuses: number[] = []
    for (let i = 0; i < 100; i++) {
      statuses.push(await signIn(`127.0.0.${2 + (i % 10)}`, `wrong-token-${i}`))
    }
    t.equal(statuses[0], 403, 'a bad token is refused')
    t.equal(statuses.at(-1), 429, 'and, past the limit, answered 429')
    t.equal(
      await signIn('127.0.0.1', operatorToken),
      303,
      "the operator's token signs in, from the same /24",
    )
    t.equal(
      await signIn('127.0.0.2', operatorToken),
      303,
      'and from an address that failed many times',
    )
    t.equal(
      await signIn('127.0.1.1', 'a-mistyped-token'),
      403,
      'a mistyped token from another /24 is told so, not made to wait',
    )
  },
)
