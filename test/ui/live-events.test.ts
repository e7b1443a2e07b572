/**
 * The admin UI's live stream (`GET /ui/events`) over real HTTP, on a running system (real
 * Redis and OVN, stand-in agents, sessions in Redis as Hydrazine keeps them): a tenant's
 * stream says nothing at all of another tenant's objects; signing out, here or on another
 * replica, or a session expiring ends its streams; many streams all hear each change,
 * read once per principal; one tenant's streams keep no other principal's out; closing
 * the UI ends its streams and its change-log reader.
 */
import t from 'tap'
import type { ApiDeps } from '../../api/http/app.ts'
import type { LiveLimits } from '../../api/http/ui/live.ts'
import { RedisSessions } from '../../api/http/ui/session.ts'
import { within } from '../../lib/process/within.ts'
import type { RedisClient } from '../../lib/redis/connection.ts'
import { OPERATOR, TENANT_A, TENANT_B, TEST_TOKENS } from '../helpers/tokens.ts'
import { groupSpec, hostSpec, type Pipeline, startPipeline, until } from '../pipeline/fixtures.ts'
import { serveApp } from './browser.ts'
import { type LiveStream, openStream, signIn, signOut } from './live-client.ts'

const BEATING = { protocolVersions: ['1.0', '2.0'] }

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

/** Resolves once the server has ended every stream, or after `ms`, whichever is first. */
const endedWithin = (streams: readonly LiveStream[], ms: number) =>
  within(Promise.all(streams.map((s) => s.ended)), ms, undefined)

/** How many times Redis has run `command` since it started (`INFO commandstats`). */
async function callsOf(redis: RedisClient, command: string): Promise<number> {
  const stats = await redis.info('commandstats')
  return Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0)
}

/**
 * Connections reading a stream (the change log's reader is one) opened since `since` (a
 * `Date.now()`): others of the system read streams too, and have for longer.
 */
async function streamReadersSince(redis: RedisClient, since: number): Promise<number> {
  const maxAge = Math.ceil((Date.now() - since) / 1000)
  const clients = String(await redis.call('CLIENT', 'LIST')).split('\n')
  return clients.filter((line) => {
    const age = Number(/ age=(\d+) /.exec(line)?.[1] ?? Number.POSITIVE_INFINITY)
    return / cmd=xread /.test(line) && age <= maxAge
  }).length
}

const ready = (p: Pipeline, name: string) =>
  until(
    () => p.client.getHost(name),
    (h) => h?.status.phase === 'Ready',
    30_000,
  )

t.test('the live stream, on a running system', async (t) => {
  const p = await startPipeline(t)
  await p.agent('dpu-1', BEATING)
  await p.agent('dpu-2', BEATING)
  await p.client.applyGroup('group-a', groupSpec('tenant-a'))
  await p.client.applyHost('host-a1', hostSpec('group-a', 'dpu-1', 1))
  await ready(p, 'host-a1')
  const redis = p.controller.redis

  /** A replica of the UI, sessions in the pipeline's Redis. */
  const replica = (
    limits: Partial<LiveLimits> = {},
    sessions = new RedisSessions(redis),
    closing?: AbortController,
  ) => {
    const deps: ApiDeps = {
      readiness: {},
      ui: { client: p.client, tokens: TEST_TOKENS, sessions, liveLimits: limits },
    }
    return serveApp(t, deps, closing)
  }
  const base = await replica()

  await t.test("a tenant's stream says nothing of another tenant's objects", async (t) => {
    const [a, b, operator] = await Promise.all([
      signIn(base, TENANT_A),
      signIn(base, TENANT_B),
      signIn(base, OPERATOR),
    ])
    // Tenant A's overview; it asks for tenant B's objects by name too, as a crafted page could.
    const mine = await openStream(t, base, a, [
      'group/group-a',
      'host/host-a1',
      'group/group-b',
      'host/host-b1',
      'dpu/dpu-2',
    ])
    const theirs = await openStream(t, base, b)
    const everyone = await openStream(t, base, operator, ['group/group-a'])
    await until(
      async () => [...mine.names(), ...everyone.names()],
      (names) => names.includes('host/host-a1') && names.includes('group/group-a'),
    )

    // Tenant B's group and host: created, through their phases to Ready, deleted.
    await p.client.applyGroup('group-b', groupSpec('tenant-b', '10.20.0.0/24', '10.20.0.1'))
    await p.client.applyHost('host-b1', hostSpec('group-b', 'dpu-2', 2))
    await ready(p, 'host-b1')
    await p.client.deleteHost('host-b1')
    await until(
      () => p.client.getHost('host-b1'),
      (h) => h === undefined,
      30_000,
    )
    await p.client.deleteGroup('group-b')
    await until(
      () => p.client.getGroup('group-b'),
      (g) => g === undefined,
      30_000,
    )
    // Then a change of tenant A's own: a stream hears changes in order, so once it hears
    // this one it has been told (or not) of every change before it.
    await p.client.applyHost('host-a2', hostSpec('group-a', 'dpu-1', 3))
    await until(
      async () => mine.events,
      (events) => events.some((e) => e.name === 'host-a2' && e.phase === 'Ready'),
      30_000,
    )
    await until(
      async () => [everyone.events, theirs.events],
      (heard) => heard.every((events) => events.some((e) => e.name === 'group-b' && e.gone)),
    )

    t.ok(
      mine.events.some((e) => e.name === 'host-a2' && e.phase === 'Ready'),
      "tenant A's own new host arrives on its stream",
    )
    t.same(
      mine.names().filter((n) => !['group/group-a', 'host/host-a1', 'host/host-a2'].includes(n)),
      [],
      "nothing at all of tenant B's group, host or DPU reaches tenant A's stream",
    )
    for (const [who, stream] of [
      ['the operator', everyone],
      ['tenant B', theirs],
    ] as const) {
      // In whatever order the changes came (a group's Ready may come after its host's first).
      const heard = new Set(
        stream.events
          .filter((e) => e.name === 'group-b' || e.name === 'host-b1')
          .map((e) => `${e.kind}/${e.name}`),
      )
      t.same(
        [...heard].sort(),
        ['group/group-b', 'host/host-b1'],
        `${who} heard of group-b and host-b1: the changes were there to leak`,
      )
      t.ok(
        stream.events.some((e) => e.name === 'host-b1' && e.gone) &&
          stream.events.some((e) => e.name === 'group-b' && e.gone),
        `${who} heard of their removal`,
      )
    }
  })

  await t.test("signing out ends the session's streams, on every replica", async (t) => {
    // Another replica, checking its streams' sessions every 0.2 s (this one: every 5 s).
    const other = await replica({ sessionCheckMs: 200 })
    const leaving = await signIn(base, TENANT_A)
    const staying = await signIn(base, TENANT_A)
    const here = await Promise.all([
      openStream(t, base, leaving, ['group/group-a']),
      openStream(t, base, leaving, ['host/host-a1']),
    ])
    const there = await openStream(t, other, leaving, ['group/group-a'])
    const kept = await openStream(t, base, staying, ['group/group-a'])
    const all = [...here, there, kept]
    await until(
      async () => all.map((s) => s.events.length),
      (counts) => counts.every((n) => n > 0),
    )

    t.equal(await signOut(base, leaving), 303, 'signed out')
    await endedWithin(here, 1000)
    t.ok(
      here.every((s) => s.endedByServer()),
      'its streams on this replica are ended at once',
    )
    await endedWithin([there], 2000)
    t.ok(there.endedByServer(), 'and on the other replica at its next check')
    t.notOk(kept.endedByServer(), "another session's stream goes on")
    const heard = kept.events.length
    await p.controller.store.changeLog.append('rg', 'group-a')
    await until(
      async () => kept.events.length,
      (n) => n > heard,
    )
    t.ok(kept.events.length > heard, 'and still hears changes')
    t.equal(
      (await openStream(t, base, leaving)).status,
      401,
      'the signed-out session opens no new stream',
    )
  })

  await t.test('a session that expires ends its streams', async (t) => {
    const brief = await replica(
      { sessionCheckMs: 200 },
      new RedisSessions(redis, { idleMs: 1000, prefix: 'hz:{ui}:brief:' }),
    )
    const session = await signIn(brief, TENANT_A)
    const stream = await openStream(t, brief, session, ['group/group-a'])
    await until(
      async () => stream.events.length,
      (n) => n > 0,
    )
    await endedWithin([stream], 4000)
    t.ok(stream.endedByServer(), 'ended once idle for idleMs (an open stream is no use)')
    t.equal((await openStream(t, brief, session)).status, 401, 'the session is over')
  })

  await t.test('many streams all hear each change, read once per principal', async (t) => {
    const [a1, a2, operator] = await Promise.all([
      signIn(base, TENANT_A),
      signIn(base, TENANT_A),
      signIn(base, OPERATOR),
    ])
    // Overviews, group pages and host pages of two sessions of tenant A and of an operator.
    const overview = ['group/group-a', 'host/host-a1', 'host/host-a2']
    const pages = [
      [a1, overview],
      [a1, ['group/group-a', 'host/host-a1']],
      [a1, ['host/host-a1']],
      [a2, overview],
      [a2, ['host/host-a2']],
      [operator, overview],
      [operator, ['group/group-a']],
      [operator, ['host/host-a1']],
    ] as const
    const streams = await Promise.all(pages.map(([s, watch]) => openStream(t, base, s, watch)))
    // A stream sends what it watches once it listens: each has sent something, each listens.
    await until(
      async () => streams.map((s) => s.events.length),
      (counts) => counts.every((n, i) => n >= (pages[i]?.[1].length ?? 0)),
    )
    const before = streams.map((s) => s.events.length)

    // The change log announces a change of group-a 20 times (as the store does after
    // each write of it); each is read (one HGETALL) for a stream's principal.
    const changes = 20
    const reads = await callsOf(redis, 'hgetall')
    for (let i = 0; i < changes; i++) await p.controller.store.changeLog.append('rg', 'group-a')
    await until(
      async () => streams.map((s, i) => s.events.length - (before[i] ?? 0)),
      (heard) => heard.every((n) => n >= changes),
    )
    const read = (await callsOf(redis, 'hgetall')) - reads

    streams.forEach((s, i) => {
      t.same(
        s.events.slice(before[i]),
        Array.from({ length: changes }, () => ({ kind: 'group', name: 'group-a', phase: 'Ready' })),
        `stream ${i + 1} (${pages[i]?.[1].join(' ')}) heard each change of group-a as it is`,
      )
    })
    // Two principals (tenant A, the operator): 2 reads a change, not one per stream (8).
    t.ok(
      read <= 2 * changes + 10,
      `${read} reads for ${changes} changes heard by ${streams.length} streams of 2 principals`,
    )
  })

  await t.test("one tenant's streams keep no operator's out", async (t) => {
    const limits = { perSession: 2, perPrincipal: 4, total: 8 }
    const capped = await replica(limits)
    // Tenant A opens all the streams it can, over as many sessions as it takes.
    const sessions = await Promise.all(Array.from({ length: 5 }, () => signIn(capped, TENANT_A)))
    const opened = await Promise.all(
      sessions.flatMap((s) => [openStream(t, capped, s), openStream(t, capped, s)]),
    )
    t.equal(
      opened.filter((s) => s.status === 200).length,
      limits.perPrincipal,
      `tenant A: ${limits.perPrincipal} streams, the rest 429`,
    )
    const operator = await signIn(capped, OPERATOR)
    t.equal((await openStream(t, capped, operator)).status, 200, "the operator's stream opens")
    const b = await signIn(capped, TENANT_B)
    t.equal((await openStream(t, capped, b)).status, 200, "and tenant B's")
  })

  await t.test('closing the UI ends its streams and its change-log reader', async (t) => {
    // The streams of the tests before are closed (no one listens to the change log), and
    // a second has passed: a reader opened from now on is this UI's.
    await sleep(1000)
    const since = Date.now()
    const closing = new AbortController()
    const closable = await replica({}, new RedisSessions(redis), closing)
    const session = await signIn(closable, OPERATOR)
    const streams = await Promise.all([
      openStream(t, closable, session, ['group/group-a']),
      openStream(t, closable, session, ['host/host-a1']),
    ])
    await until(
      async () => streams.map((s) => s.events.length),
      (counts) => counts.every((n) => n > 0),
    )
    t.equal(await streamReadersSince(redis, since), 1, 'one reader of the change log for the UI')

    closing.abort()
    await endedWithin(streams, 1000)
    t.ok(
      streams.every((s) => s.endedByServer()),
      'every stream is ended',
    )
    t.equal(
      await until(
        () => streamReadersSince(redis, since),
        (n) => n === 0,
      ),
      0,
      'and the change-log reader is closed',
    )
    t.equal((await openStream(t, closable, session)).status, 503, 'no stream opens any more')
  })
})
