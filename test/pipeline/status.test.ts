/**
 * Honest status (issue "nothing stays wrong silently, nothing is stuck for good"):
 * a Failed object is re-driven by a re-PUT of the same spec or by the controller once
 * its cause went away; a Ready object keeps no False condition from an older attempt;
 * a job that vanished does not leave its object converging for ever; and every
 * transition and repair is in the object's events.
 */
import { Redis } from 'ioredis'
import t from 'tap'
import { createApp } from '../../api/http/app.ts'
import type { ChildJobs } from '../../functions/internal/deps.ts'
import { retryDue } from '../../functions/internal/retries.ts'
import { queueJobs } from '../../lib/jobs/redrive.ts'
import type { ObjectEvent } from '../../lib/model/events.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { groupSpec, hostSpec, type Pipeline, startPipeline, until } from './fixtures.ts'
import { runReconcile, startPipelineFrr } from './scenarios.ts'

const OPERATOR = 'operator-token-0123456789abcdef'

function api(p: Pipeline) {
  const app = createApp({
    readiness: {},
    v1: { client: p.client, tokens: { operator: [OPERATOR], tenants: {} } },
  })
  return async (path: string): Promise<{ status: number; body: unknown }> => {
    const res = await app.request(path, { headers: { authorization: `Bearer ${OPERATOR}` } })
    return { status: res.status, body: await res.json() }
  }
}

const failedFor =
  (reason: string) =>
  (h: { status: { phase: string; conditions: { reason: string }[] } } | undefined) =>
    h?.status.phase === 'Failed' && h.status.conditions.some((c) => c.reason === reason)

t.test(
  'a PublicAccess host Failed on an empty pool is re-driven, and Ready keeps no stale condition',
  async (t) => {
    const p = await startPipeline(t, { frr: true })
    await startPipelineFrr(t, p)
    await p.agent('dpu-1')
    await p.client.applyGroup('group-p', groupSpec())
    const spec = hostSpec('group-p', 'dpu-1', 1, { hostAccess: 'PublicAccess' })
    const first = await p.client.applyHost('host-p', spec)
    const failed = await until(
      () => p.controller.store.hosts.get('host-p'),
      failedFor('POOL_EXHAUSTED'),
    )
    t.equal(failed?.status.phase, 'Failed', 'no public IP in the pool: Failed, saying why')

    await t.test('re-PUT of the same spec while Failed changes nothing', async (t) => {
      const again = await p.client.applyHost('host-p', spec)
      t.not(again.jobId, undefined, 'but a new attempt is enqueued')
      t.not(again.jobId, first.jobId, 'under its own job id')
      t.equal(again.object.specVersion, 1, 'at the same spec version')
      t.equal(again.object.status.attempt, 2, 'as attempt 2')
      await until(() => p.controller.store.hosts.get('host-p'), failedFor('POOL_EXHAUSTED'))
    })

    await p.client.registerPublicIp('203.0.113.9')
    const redriven = await p.client.applyHost('host-p', spec)
    t.ok(redriven.jobId, 'after the operator added a public IP, the same PUT re-drives it')
    const ready = await until(
      () => p.controller.store.hosts.get('host-p'),
      (h) => h?.status.phase === 'Ready',
    )
    t.equal(ready?.status.hostAccessIPs?.publicIP, '203.0.113.9', 'it got the new public IP')
    t.same(
      ready?.status.conditions.filter((c) => c.status === 'False'),
      [],
      'Ready: no False condition left from an earlier attempt',
    )
    t.equal(ready?.status.observedVersion, 1)
    t.equal(ready?.status.configsSynced, true)

    // A transition's events are written with the status it records: there already.
    const events = (await api(p)('/v1/managed-resources/host-p/events')).body as {
      items: ObjectEvent[]
    }
    const reasons = events.items.map((e) => e.reason).reverse()
    t.match(
      reasons.join(' '),
      /^Created .*POOL_EXHAUSTED.*Failed.*Retrying.*Ready/,
      'the events tell the story, oldest to newest',
    )
    t.ok(
      events.items.every((e) => typeof e.at === 'string' && typeof e.message === 'string'),
      'each event has a time and a message',
    )
  },
)

t.test('the controller retries a Failed host once its backoff passed', async (t) => {
  const p = await startPipeline(t, { frr: true })
  await startPipelineFrr(t, p)
  await p.agent('dpu-1')
  await p.client.applyGroup('group-q', groupSpec())
  await p.client.applyHost(
    'host-q',
    hostSpec('group-q', 'dpu-1', 2, { hostAccess: 'PublicAccess' }),
  )
  await until(() => p.controller.store.hosts.get('host-q'), failedFor('POOL_EXHAUSTED'))
  // Its group is Ready again (its host failed for a reason of its own): nothing of it to retry.
  await until(
    () => p.controller.store.groups.get('group-q'),
    (g) => g?.status.phase === 'Ready',
  )
  await p.client.registerPublicIp('203.0.113.10')
  const deps = {
    store: p.controller.store,
    children: {} as ChildJobs,
    jobs: queueJobs(p.controller.queue),
  }

  t.same(await retryDue(deps), [], 'not before its backoff')
  const later = new Date(Date.now() + 60_000)
  const retried = await retryDue(deps, { now: later })
  t.match(retried, [{ kind: 'mr', name: 'host-q', action: 'Retrying' }], 'after it, a new attempt')
  const ready = await until(
    () => p.controller.store.hosts.get('host-q'),
    (h) => h?.status.phase === 'Ready',
  )
  t.equal(ready?.status.hostAccessIPs?.publicIP, '203.0.113.10')
  t.equal(ready?.status.attempt, 2)
  t.same(await retryDue(deps, { now: later }), [], 'a Ready host is left alone')
})

t.test('a host whose job vanished is re-driven, not left Attaching', async (t) => {
  const p = await startPipeline(t)
  await p.agent('dpu-1')
  await p.client.applyGroup('group-s', groupSpec())
  await until(
    () => p.controller.store.groups.get('group-s'),
    (g) => g?.status.phase === 'Ready',
  )
  // Stored, then the process died before its job was added.
  const accepted = await p.client.applyHost('host-s', hostSpec('group-s', 'dpu-1', 3))
  const job = await p.controller.queue.getJob(accepted.jobId ?? '')
  await until(
    () => p.controller.store.hosts.get('host-s'),
    (h) => h?.status.phase === 'Ready',
  )
  // Ready is written before its job finishes: a job still locked by its worker stays.
  await until(
    () => p.controller.queue.getJobState(accepted.jobId ?? ''),
    (state) => state === 'completed',
  )
  await job?.remove()
  await p.controller.store.hosts.updateStatus('host-s', (h) => ({
    ...h.status,
    phase: 'Attaching',
  }))

  const children = {
    outcome: async (ref: { jobId: string }) =>
      (await p.controller.queue.getJob(ref.jobId)) ? { state: 'pending' } : { state: 'missing' },
  } as unknown as ChildJobs
  const deps = { store: p.controller.store, children, jobs: queueJobs(p.controller.queue) }
  t.same(await retryDue(deps), [], 'left to its job for a grace period')
  const retried = await retryDue(deps, { now: new Date(Date.now() + 120_000) })
  t.match(retried, [{ name: 'host-s', action: 'Stalled' }])
  const ready = await until(
    () => p.controller.store.hosts.get('host-s'),
    (h) => h?.status.phase === 'Ready' && h.status.attempt === 2,
  )
  t.equal(ready?.status.configsSynced, true, 'converged again')
})

t.test("reconcile's repairs are in the group's and the host's events", async (t) => {
  const p = await startPipeline(t)
  await p.agent('dpu-1')
  await p.client.applyGroup('group-r', groupSpec())
  await p.client.applyHost(
    'host-r',
    hostSpec('group-r', 'dpu-1', 4, { hostAccess: 'FabricAccess' }),
  )
  await until(
    () => p.controller.store.hosts.get('host-r'),
    (h) => h?.status.phase === 'Ready',
  )
  await until(
    () => p.controller.store.groups.get('group-r'),
    (g) => g?.status.phase === 'Ready',
  )
  const port = topologyNames.hostPort('group-r', 'host-r')
  await p.nbctl('lsp-del', port)

  await runReconcile(p, 'reconcile-events')
  t.match(await p.nbctl('lsp-list', topologyNames.switch('group-r')), port, 'the port is back')

  const get = api(p)
  const host = (await get('/v1/managed-resources/host-r/events')).body as { items: ObjectEvent[] }
  t.match(
    host.items[0],
    { type: 'Warning', reason: 'Repaired', message: new RegExp(port) },
    "the host's newest event is the repair of its port",
  )
  const group = (await get('/v1/resource-groups/group-r/events')).body as { items: ObjectEvent[] }
  t.match(group.items[0], { reason: 'Repaired', message: /Logical_Switch_Port/ })

  // A hand-deleted gateway router: repaired, and listed in the group's events.
  const gateway = topologyNames.gatewayRouter('group-r', 'dpu-1')
  await p.nbctl('lr-del', gateway)
  await runReconcile(p, 'reconcile-events-gw')
  t.match(await p.nbctl('lr-list'), gateway, 'the gateway router is back')
  const after = (await get('/v1/resource-groups/group-r/events')).body as { items: ObjectEvent[] }
  t.match(after.items[0], { reason: 'Repaired', message: /Logical_Router\/gw\/dpu-1/ })

  t.equal((await get('/v1/managed-resources/nobody/events')).status, 404)
  const bad = await get('/v1/managed-resources/host-r/events?limit=0')
  t.equal(bad.status, 400, 'a limit out of range is refused, naming it')
  t.match(bad.body, { error: { issues: [{ path: 'limit' }] } })
  const one = (await get('/v1/managed-resources/host-r/events?limit=1')).body as {
    items: ObjectEvent[]
  }
  t.equal(one.items.length, 1)
})

t.test(
  'a deletion is not lost: never queued, it is resumed; failed, a re-DELETE runs it again',
  async (t) => {
    const p = await startPipeline(t)
    await p.agent('dpu-1')
    await p.client.applyGroup('group-d', groupSpec())
    for (const [name, n] of [
      ['host-d1', 5],
      ['host-d2', 6],
    ] as const) {
      await p.client.applyHost(name, hostSpec('group-d', 'dpu-1', n))
      await until(
        () => p.controller.store.hosts.get(name),
        (h) => h?.status.phase === 'Ready',
      )
    }
    const children = {
      outcome: async (ref: { jobId: string }) =>
        (await p.controller.queue.getJob(ref.jobId)) ? { state: 'pending' } : { state: 'missing' },
    } as unknown as ChildJobs
    const deps = { store: p.controller.store, children, jobs: queueJobs(p.controller.queue) }

    // DELETE was stored, then the process died before its job was added.
    await p.controller.store.objects.requestDeletion('mr', 'host-d1', false)
    t.same(await retryDue(deps), [], 'left alone for a grace period')
    const resumed = await retryDue(deps, { now: new Date(Date.now() + 120_000) })
    t.match(resumed, [{ kind: 'mr', name: 'host-d1', action: 'DeletionResumed' }])
    await until(
      () => p.controller.store.hosts.get('host-d1'),
      (h) => h === undefined,
    )
    t.pass('host-d1 was detached')
    const redis = new Redis(p.redisUrl)
    t.teardown(() => redis.disconnect())
    const versionKey = 'hz:{store}:version:mr:host-d1'
    const ttl = await redis.pttl(versionKey)
    t.ok(ttl > 7 * 24 * 3600 * 1000, 'its version counter expires, once its jobs are gone')
    const again1 = await p.client.applyHost('host-d1', hostSpec('group-d', 'dpu-1', 5))
    t.equal(again1.object.specVersion, 2, 'created again meanwhile, it goes on from its version')
    t.equal(await redis.pttl(versionKey), -1, 'and keeps its counter while it lives')
    await until(
      () => p.controller.store.hosts.get('host-d1'),
      (h) => h?.status.phase === 'Ready',
    )

    // A detach job that failed for good (here: one with a payload its handler refuses).
    await p.controller.store.objects.requestDeletion('mr', 'host-d2', false)
    const id = 'host.detach-host-d2-v1'
    await p.controller.queue.add('host.detach', { host: 'host-d2', bogus: true }, { jobId: id })
    await until(
      () => p.controller.queue.getJobState(id),
      (s) => s === 'failed',
    )
    const again = await p.client.deleteHost('host-d2')
    t.equal(again.jobId, id, 'the same job id runs again')
    await until(
      () => p.controller.store.hosts.get('host-d2'),
      (h) => h === undefined,
    )
    t.pass('host-d2 was detached after the re-DELETE')
  },
)
