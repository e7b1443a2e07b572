/**
 * The store's change log on a real Redis: versions rise, `since` reads every change after
 * a version in order, and refuses (RESOURCE_VERSION_TOO_OLD) a version whose successors
 * were trimmed away — but not one older than everything when nothing was ever trimmed.
 * The live feed hears every change after its position, through one connection.
 */
import { Redis } from 'ioredis'
import t from 'tap'
import {
  type Change,
  ChangeFeed,
  ChangeLog,
  compareVersions,
  ResourceVersionTooOld,
  VERSION_ZERO,
} from '../../lib/state/changes.ts'
import { StateStore } from '../../lib/state/store.ts'
import { withStack } from '../helpers/stack.ts'
import { until } from '../pipeline/fixtures.ts'

t.test('change log: since, trimming, and the live feed', async (t) => {
  const stack = await withStack(t)
  if (!stack.redis) throw new Error('stack without redis')
  const redis = new Redis(stack.redis.url)
  t.teardown(() => redis.disconnect())
  const log = new ChangeLog(redis, 'test:{store}:changes', 10)

  t.equal(await log.latest(), VERSION_ZERO, 'an empty log is at version zero')
  t.same(await log.since(VERSION_ZERO, 10), [], 'nothing since zero')
  const first = await log.append('rg', 'a')
  const second = await log.append('mr', 'h', { tenant: 't1' })
  const third = await log.append('rg', 'gone', {})
  t.ok(compareVersions(first, second) < 0 && compareVersions(second, third) < 0, 'versions rise')
  t.equal(await log.latest(), third)
  t.same(await log.since(VERSION_ZERO, 10), [
    { kind: 'rg', name: 'a', version: first },
    { kind: 'mr', name: 'h', version: second, removed: { tenant: 't1' } },
    { kind: 'rg', name: 'gone', version: third, removed: {} },
  ])
  t.same(
    (await log.since(first, 1)).map((c) => c.name),
    ['h'],
    'after a version, at most count',
  )

  const feed = new ChangeFeed(() => redis.duplicate(), log)
  t.teardown(() => feed.close())
  const heard: Change[] = []
  const { position, stop } = await feed.subscribe((c) => heard.push(c))
  t.equal(position, third, 'the feed starts at the newest change')
  const versions: string[] = []
  for (let i = 0; i < 30; i++) versions.push(await log.append('rg', `g${i}`))
  await until(
    async () => heard.length,
    (n) => n === 30,
  )
  t.same(
    heard.map((c) => c.version),
    versions,
    'every change after the position, in order',
  )
  stop()
  t.equal(feed.size, 0)

  // 33 entries in a log that keeps about 10: the oldest are trimmed.
  await redis.xtrim(log.key, 'MAXLEN', 10)
  await t.rejects(log.since(first, 10), ResourceVersionTooOld, 'trimmed successors: too old')
  await t.rejects(log.since(VERSION_ZERO, 10), ResourceVersionTooOld)
  const kept = versions.at(-10) ?? ''
  t.same(
    (await log.since(kept, 100)).map((c) => c.version),
    versions.slice(-9),
    'from a version still kept: everything after it',
  )
})

t.test(
  'a purge and its change-log entry are one step: nobody finds it gone but unlogged',
  async (t) => {
    const stack = await withStack(t)
    if (!stack.redis) throw new Error('stack without redis')
    const redis = new Redis(stack.redis.url)
    const reader = new Redis(stack.redis.url)
    t.teardown(() => {
      redis.disconnect()
      reader.disconnect()
    })
    const store = new StateStore(redis)
    const keys = { group: 'hz:{store}:rg:group-a', changes: store.changeLog.key }
    await store.groups.put('group-a', {
      tenantId: 'tenant-a',
      network: { cidr: '10.10.10.0/24', gateway: '10.10.10.1' },
    })
    // A reader asking, over and over in one MULTI each, "is it gone, and does the log say so?"
    let purged = false
    const unlogged: string[] = []
    const watch = (async () => {
      while (!purged) {
        const [[, exists], [, newest]] = (await reader
          .multi()
          .exists(keys.group)
          .xrevrange(keys.changes, '+', '-', 'COUNT', 1)
          .exec()) as [[null, number], [null, [string, string[]][]]]
        const fields = newest[0]?.[1] ?? []
        if (exists === 0 && !(fields.includes('group-a') && fields.includes('removed'))) {
          unlogged.push(newest[0]?.[0] ?? 'none')
        }
      }
    })()
    await new Promise((r) => setTimeout(r, 50))
    await store.groups.purge('group-a', 'tenant-a')
    await new Promise((r) => setTimeout(r, 50))
    purged = true
    await watch
    t.same(unlogged, [], 'never gone without its removal in the log')
    const [last] = await store.changeLog.since(VERSION_ZERO, 100).then((c) => c.slice(-1))
    t.match(last, { kind: 'rg', name: 'group-a', removed: { tenant: 'tenant-a' } })
  },
)
