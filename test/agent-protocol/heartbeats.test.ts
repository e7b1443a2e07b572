/**
 * One DPU's newest beat (`Heartbeats.newest`), on a real Redis: its live beat (recorded as
 * it is read), else the controller's record of its last one, without listing every DPU.
 * What an agent writes under its key is read only within bounds: its size (asked before it
 * is read), every string and list, its interval, and a time not ahead of the controller's.
 */
import { Redis } from 'ioredis'
import t from 'tap'
import { heartbeatKeyOf } from '../../lib/agent-protocol/credentials.ts'
import {
  dpuStateOf,
  Heartbeats,
  MAX_CLOCK_SKEW_MS,
  MAX_HEARTBEAT_BYTES,
} from '../../lib/agent-protocol/heartbeats.ts'
import { MAX_REPORTED_PORTS } from '../../lib/agent-protocol/index.ts'
import { withStack } from '../helpers/stack.ts'
import { heartbeat } from '../pipeline/stand-in-agent.ts'

t.test("a DPU's newest beat: live, else the last one recorded, else none", async (t) => {
  const stack = await withStack(t)
  const redis = new Redis(stack.redis?.url ?? '')
  t.teardown(() => redis.disconnect())
  const beats = new Heartbeats(redis)
  const at = (iso: string) => ({ ...heartbeat('dpu-1', ['2.0']), at: iso })

  t.equal(await beats.newest('dpu-1'), undefined, 'never seen: none')
  await beats.write(at('2026-01-01T00:00:00.000Z'), 60_000)
  t.equal((await beats.newest('dpu-1'))?.at, '2026-01-01T00:00:00.000Z', 'its live beat')

  await beats.remove('dpu-1') // the agent stops: its live beat is gone
  t.equal(
    (await beats.newest('dpu-1'))?.at,
    '2026-01-01T00:00:00.000Z',
    'silent: the recorded last beat',
  )
  await beats.write(at('2026-01-01T00:01:00.000Z'), 60_000)
  t.equal(
    (await beats.newest('dpu-1'))?.at,
    '2026-01-01T00:01:00.000Z',
    'back: the newer live beat',
  )
  t.equal(await beats.newest('dpu-2'), undefined, "another DPU's beats are not this one's")
  // An agent writes its own key only, but may write anything there.
  await redis.set(
    heartbeatKeyOf('dpu-1'),
    JSON.stringify({ ...at('2026-01-01T00:02:00.000Z'), dpuId: 'dpu-2' }),
  )
  t.equal(await beats.newest('dpu-2'), undefined, "a beat naming another DPU is not that DPU's")
  t.equal(
    (await beats.newest('dpu-1'))?.at,
    '2026-01-01T00:01:00.000Z',
    "nor the writer's newer one",
  )
  t.same(
    (await beats.list()).map((b) => b.dpuId),
    ['dpu-1'],
    'nor listed, nor recorded, as dpu-2',
  )
  t.equal(await beats.newest('dpu-2'), undefined)
  await beats.forget('dpu-1')
  t.equal(await beats.newest('dpu-1'), undefined, 'forgotten: none')
})

t.test('what a DPU writes under its heartbeat key is read only within bounds', async (t) => {
  const stack = await withStack(t)
  const redis = new Redis(stack.redis?.url ?? '')
  t.teardown(() => redis.disconnect())
  const beats = new Heartbeats(redis)
  const key = heartbeatKeyOf('dpu-1')
  const record = () => redis.hstrlen('hz:{beats}:last-beat', 'dpu-1')
  const listed = async () => (await beats.list()).find((b) => b.dpuId === 'dpu-1')
  const beat = (extra: object = {}) => ({ ...heartbeat('dpu-1', ['2.0']), ...extra })

  const first = beat()
  await beats.write(first, 60_000)
  t.equal((await listed())?.at, first.at, 'a beat as agents write it: listed')
  const recorded = await record()

  // 2 MB beats: one a valid beat padded with whitespace (JSON allows it), one whose agent
  // version is 2 MB long.
  const later = (s: number) => beat({ at: new Date(Date.parse(first.at) + s * 1000).toISOString() })
  const big = 2 * 1024 * 1024
  for (const raw of [
    JSON.stringify(later(1)) + ' '.repeat(big),
    JSON.stringify({ ...later(2), agentVersion: 'v'.repeat(big) }),
  ]) {
    await redis.set(key, raw)
    t.equal(
      await beats.read('dpu-1'),
      undefined,
      `one of 2 MB is not read (over ${MAX_HEARTBEAT_BYTES} bytes)`,
    )
    t.equal((await listed())?.at, first.at, 'the DPU is listed with its last beat within bounds')
  }
  t.equal(await record(), recorded, 'and the big one is not copied into the record')

  // A record made before there was a bound is dropped, not read on every list.
  await redis.hset(
    'hz:{beats}:last-beat',
    'dpu-2',
    JSON.stringify(beat({ dpuId: 'dpu-2' })) + ' '.repeat(1024 * 1024),
  )
  t.notOk(
    (await beats.list()).some((b) => b.dpuId === 'dpu-2'),
    'an oversized record is not listed',
  )
  t.equal(await redis.hexists('hz:{beats}:last-beat', 'dpu-2'), 0, 'and is removed')

  await redis.del(key)
  await redis.rpush(key, 'not a beat')
  t.equal(await beats.read('dpu-1'), undefined, 'a key of another type is no beat')
  t.equal((await listed())?.at, first.at, 'and lists nothing new')

  const ports = (n: number) =>
    Array.from({ length: n }, (_, i) => ({
      port: `p${i}`,
      logicalPort: `l${i}`,
      group: 'g',
      ovnInstalled: true,
    }))
  const many = beat({ observed: { ...first.observed, boundPorts: ports(MAX_REPORTED_PORTS + 1) } })
  await redis.set(key, JSON.stringify(many))
  t.equal(
    await beats.read('dpu-1'),
    undefined,
    `more than ${MAX_REPORTED_PORTS} bound ports: no beat`,
  )
  await redis.set(key, JSON.stringify(beat({ agentVersion: 'v'.repeat(10_000) })))
  t.equal(await beats.read('dpu-1'), undefined, 'nor a 10,000-character agent version')

  await redis.set(key, JSON.stringify(beat({ intervalMs: 1e12 })))
  const slow = await beats.read('dpu-1')
  t.equal(slow?.intervalMs, 60_000, 'an interval of 30 years is taken as a minute')
  t.equal(
    dpuStateOf(slow ?? beat(), new Date(Date.now() + 3 * 60_000)),
    'Lost',
    'so its DPU is Lost minutes after it went silent, not years',
  )
  await redis.set(key, JSON.stringify(beat({ intervalMs: 1 })))
  t.equal((await beats.read('dpu-1'))?.intervalMs, 100, 'and one of 1 ms as 100 ms')

  const ahead = (ms: number) => beat({ at: new Date(Date.now() + ms).toISOString() })
  await redis.set(key, JSON.stringify(ahead(3_600_000)))
  t.equal(await beats.read('dpu-1'), undefined, 'a beat stamped an hour ahead is refused')
  t.ok(
    ((await listed())?.at ?? '') < new Date().toISOString(),
    'nor recorded: the record keeps a beat of the past',
  )
  await redis.set(key, JSON.stringify(ahead(MAX_CLOCK_SKEW_MS / 2)))
  t.ok(await beats.read('dpu-1'), 'one a little ahead (clock skew) is taken')
})
