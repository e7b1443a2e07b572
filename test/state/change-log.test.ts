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
