import t from 'tap'
import { buildFabricIsolatePayload } from '../lib/agent-protocol/fabric.ts'
import {
  type AgentJob,
  buildConfigurePayload,
  buildIsolatePayload,
  parseAgentJob,
} from '../lib/agent-protocol/index.ts'
import { JobSuperseded } from './errors.ts'
import { bindingOf, admitJob as check, KEPT_RECORDS, type Notes } from './job-order.ts'
import { jobSentKey } from './ovs.ts'

/** The agent's notes, as OVS keeps them (test/agent/job-order.test.ts has the real ones). */
function externalIds(initial: Record<string, string> = {}): Notes & {
  ids: Record<string, string>
} {
  const ids = { ...initial }
  return {
    ids,
    snapshot: async () => ({ notes: { ...ids } }),
    async setNotes(set) {
      Object.assign(ids, set)
      return true
    },
    async removeNotes(keys) {
      for (const key of keys) delete ids[key]
      return true
    },
  }
}

const group = { name: 'g', sbRemote: 'tcp:10.0.0.1:6642' }
const host = (name: string) => ({ name, logicalPort: `hz/g/${name}`, mac: '0a:00:00:00:00:01' })
const configure = (name = 'h1'): AgentJob => ({
  name: 'configure',
  payload: buildConfigurePayload('2.0', {
    dpuId: 'dpu-1',
    specVersion: 1,
    group,
    host: host(name),
  }),
})
const isolate = (name = 'h1'): AgentJob => ({
  name: 'isolate',
  payload: buildIsolatePayload('2.0', {
    dpuId: 'dpu-1',
    specVersion: 1,
    group: { name: 'g' },
    host: { name, logicalPort: `hz/g/${name}` },
  }),
})
const key = (name = 'h1') => jobSentKey(`hz/g/${name}`)

/** A job admitted that goes on to change the DPU. */
async function admitJob(...args: Parameters<typeof check>): Promise<void> {
  await (await check(...args)).record()
}

t.test('a configure sent before the last job of its host that ran is superseded', async (t) => {
  const ovs = externalIds()
  await admitJob(ovs, 'dpu-1', configure(), 1000)
  await admitJob(ovs, 'dpu-1', configure(), 1000)
  t.pass('the same job again (a retry) is admitted')
  await admitJob(ovs, 'dpu-1', configure(), 2000)
  const refused = await admitJob(ovs, 'dpu-1', configure(), 1000).catch((e: unknown) => e)
  t.type(refused, JobSuperseded, 'an older configure, after a newer one ran')
  t.equal((refused as JobSuperseded).retryable, false, 'never retried')
  t.match(
    (refused as Error).message,
    'this configure of hz/g/h1 was sent at 1970-01-01T00:00:01.000Z',
  )
  t.equal(ovs.ids[key()], '2000', 'the newest is kept')

  await admitJob(ovs, 'dpu-1', isolate(), 1500)
  t.equal(ovs.ids[key()], '2000', 'an older isolate runs (isolating is safe) and moves nothing')
  await admitJob(ovs, 'dpu-1', configure('h2'), 500)
  t.pass("another host's older configure is its own business")
})

t.test('a job admitted and refused later for another reason records nothing', async (t) => {
  const ovs = externalIds({ [key()]: '1000' })
  await check(ovs, 'dpu-1', configure(), 2000)
  t.same(ovs.ids, { [key()]: '1000' }, 'it did not call record(): the DPU is as it was')
  const refused = await check(ovs, 'dpu-1', configure(), 500).catch((e: unknown) => e)
  t.type(refused, JobSuperseded, 'the check alone refuses an older one')
})

t.test('a job the queue gave no moment is not ordered', async (t) => {
  const ovs = externalIds({ [key()]: '2000' })
  await admitJob(ovs, 'dpu-1', configure(), undefined)
  await admitJob(ovs, 'dpu-1', configure(), 0)
  t.same(ovs.ids, { [key()]: '2000' })
})

t.test('a Fabric host is its own binding, by group and host', async (t) => {
  const fabric = parseAgentJob(
    'isolate',
    buildFabricIsolatePayload({
      dpuId: 'dpu-1',
      specVersion: 1,
      group: { name: 'g', vni: 10 },
      host: { name: 'h1', addresses: ['10.0.0.5'] },
    }),
  )
  t.equal(bindingOf(fabric), 'fabric:g/h1')
  t.equal(bindingOf(isolate()), 'hz/g/h1')
})

t.test(`a DPU keeps the ${KEPT_RECORDS} newest records`, async (t) => {
  const ovs = externalIds({ unrelated: 'kept' })
  for (let n = 1; n <= KEPT_RECORDS + 10; n++) await admitJob(ovs, 'dpu-1', isolate(`h${n}`), n)
  const kept = Object.keys(ovs.ids).filter((k) => k.startsWith(jobSentKey('')))
  t.equal(kept.length, KEPT_RECORDS)
  t.notOk(key('h10') in ovs.ids, 'the oldest went')
  t.ok(key(`h${KEPT_RECORDS + 10}`) in ovs.ids, 'the newest stays')
  t.equal(ovs.ids.unrelated, 'kept', 'nothing else is touched')
})
