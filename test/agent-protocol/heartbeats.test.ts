/**
 * One DPU's newest beat (`Heartbeats.newest`), on a real Redis: its live beat (recorded as
 * it is read), else the controller's record of its last one, without listing every DPU.
 */
import { Redis } from 'ioredis'
import t from 'tap'
import { heartbeatKeyOf } from '../../lib/agent-protocol/credentials.ts'
import { Heartbeats } from '../../lib/agent-protocol/heartbeats.ts'
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
