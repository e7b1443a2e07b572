import t from 'tap'
import { createApp } from '../../api/http/app.ts'
import { signEvent } from '../../api/http/events.ts'
import { groupSpec, hostSpec, type Pipeline, startPipeline, until } from '../pipeline/fixtures.ts'
import { groupsSettled } from '../pipeline/scenarios.ts'

const SECRET = 'carbide-shared-secret-0123456789abcdef'
const OPERATOR = 'operator-token-0123456789abcdef'

interface Delivery {
  secret?: string
  /** The timestamp the signature was made over, when not the one sent (a replay). */
  signedTimestamp?: string
  /** Seconds added to the current time in `X-Hydrazine-Timestamp`. */
  skewS?: number
  signature?: string
}

function webhook(p: Pipeline) {
  const app = createApp({
    readiness: {},
    events: { secret: SECRET, client: p.client },
    v1: { client: p.client, tokens: { operator: [OPERATOR], tenants: {} } },
  })
  const deliver = async (event: unknown, d: Delivery = {}) => {
    const body = JSON.stringify(event)
    const timestamp = String(Math.floor(Date.now() / 1000) + (d.skewS ?? 0))
    const res = await app.request('/v1/events', {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'x-hydrazine-signature':
          d.signature ?? signEvent(d.secret ?? SECRET, d.signedTimestamp ?? timestamp, body),
        'x-hydrazine-timestamp': timestamp,
      },
      body,
    })
    // biome-ignore lint/suspicious/noExplicitAny: response bodies are inspected loosely in tests
    const json: any = await res.json()
    return { status: res.status, json }
  }
  return { app, deliver }
}

async function snapshot(p: Pipeline) {
  await groupsSettled(p)
  const counts = await p.controller.queue.getJobCounts()
  return {
    groups: await p.controller.store.groups.list(),
    hosts: await p.controller.store.hosts.list(),
    jobs: Object.values(counts).reduce((a, b) => a + b, 0),
  }
}

t.test('Carbide events drive the same calls as the REST API', async (t) => {
  const p = await startPipeline(t)
  await p.agent('dpu-1')
  const { app, deliver } = webhook(p)
  const applyGroup = {
    type: 'resource-group.applied',
    id: 'evt-1',
    name: 'group-a',
    generation: 1,
    spec: groupSpec('tenant-a'),
  }

  const first = await deliver(applyGroup)
  t.equal(first.status, 202)
  t.match(first.json, { id: 'evt-1', object: { name: 'group-a', specVersion: 1 }, jobId: String })
  await until(
    () => p.controller.store.groups.get('group-a'),
    (g) => g?.status.phase === 'Ready',
  )

  const before = await snapshot(p)
  const again = await deliver(applyGroup)
  t.same(again, { status: 200, json: { duplicate: true, id: 'evt-1' } }, 'a redelivery is ignored')
  t.same(await snapshot(p), before, 'and changes nothing')

  const refused: [string, unknown, Delivery, number, string][] = [
    [
      'wrong secret',
      { ...applyGroup, id: 'evt-2' },
      { secret: `${SECRET}x` },
      401,
      'BAD_SIGNATURE',
    ],
    ['no signature', { ...applyGroup, id: 'evt-2' }, { signature: '' }, 401, 'BAD_SIGNATURE'],
    [
      'a captured delivery replayed under a fresh timestamp',
      { ...applyGroup, id: 'evt-2' },
      { signedTimestamp: String(Math.floor(Date.now() / 1000) - 86_400) },
      401,
      'BAD_SIGNATURE',
    ],
    [
      'timestamp 6 minutes old',
      { ...applyGroup, id: 'evt-2' },
      { skewS: -360 },
      401,
      'STALE_EVENT',
    ],
    [
      'timestamp 6 minutes ahead',
      { ...applyGroup, id: 'evt-2' },
      { skewS: 360 },
      401,
      'STALE_EVENT',
    ],
    ['unknown type', { ...applyGroup, id: 'evt-2', type: 'x.applied' }, {}, 400, 'INVALID'],
    ['no generation', { ...applyGroup, id: 'evt-2', generation: undefined }, {}, 400, 'INVALID'],
    [
      'invalid spec',
      { ...applyGroup, id: 'evt-3', name: 'group-b', spec: { tenantId: 'Bad' } },
      {},
      400,
      'INVALID',
    ],
  ]
  for (const [name, event, delivery, status, code] of refused) {
    const snap = await snapshot(p)
    const res = await deliver(event, delivery)
    t.equal(res.status, status, `${name}: status`)
    t.equal(res.json.error?.code, code, `${name}: code`)
    t.same(await snapshot(p), snap, `${name}: nothing changed`)
  }

  const corrected = await deliver({
    ...applyGroup,
    id: 'evt-3',
    name: 'group-b',
    spec: groupSpec('tenant-b', '10.20.0.0/24', '10.20.0.1'),
  })
  t.equal(corrected.status, 202, 'an id whose delivery failed can be delivered again')

  const host = await deliver({
    type: 'managed-resource.applied',
    id: 'evt-4',
    name: 'host-1',
    generation: 1,
    spec: hostSpec('group-a', 'dpu-1', 1),
  })
  t.equal(host.status, 202)
  await until(
    () => p.controller.store.hosts.get('host-1'),
    (h) => h?.status.phase === 'Ready',
  )
  const detach = await deliver({
    type: 'managed-resource.deleted',
    id: 'evt-5',
    name: 'host-1',
    generation: 2,
  })
  t.equal(detach.status, 202)
  await until(
    () => p.controller.store.hosts.get('host-1'),
    (h) => h === undefined,
  )
  // The `applied` before it, retried late (as a new delivery): stale, it recreates nothing.
  const snap = await snapshot(p)
  const late = await deliver({
    type: 'managed-resource.applied',
    id: 'evt-4-retry',
    name: 'host-1',
    generation: 1,
    spec: hostSpec('group-a', 'dpu-1', 1),
  })
  t.equal(late.status, 409, 'an event older than the one applied is refused')
  t.match(late.json.error, { code: 'STALE', issues: [{ path: 'generation' }] })
  t.same(await snapshot(p), snap, 'and changes nothing: the host is not recreated')
  const remove = await deliver({
    type: 'resource-group.deleted',
    id: 'evt-6',
    name: 'group-b',
    generation: 2,
  })
  t.equal(remove.status, 202)
  t.ok(remove.json.object.deletion, 'deletion recorded')

  const unsigned = await app.request('/v1/resource-groups')
  t.equal(unsigned.status, 401, 'the webhook does not open the bearer-token routes')
})
