/**
 * gRPC Watch against a running pipeline: the snapshot and its BOOKMARK, then changes;
 * resuming from a `resource_version` (every change after it, no snapshot; removals a
 * tenant may see), a version the change log no longer keeps (OUT_OF_RANGE,
 * RESOURCE_VERSION_TOO_OLD), the bounds on streams; and the health service.
 */
import * as grpc from '@grpc/grpc-js'
import t from 'tap'
import type { WatchEvent } from '../../api/grpc/protocol.ts'
import { statusDetailsOf } from '../../api/grpc/status.ts'
import { compareVersions } from '../../lib/state/changes.ts'
import { groupSpec, startPipeline, until } from '../pipeline/fixtures.ts'
import { hostMessage, startIngress, TENANT_A, TENANT_B } from './grpc-fixture.ts'

const phaseOf = (e: WatchEvent) =>
  e.resourceGroup?.status?.phase ?? e.managedResource?.status?.phase ?? e.type
const last = (events: WatchEvent[]) => events.at(-1)?.resourceVersion ?? ''

t.test('Watch: snapshot, changes and resume', async (t) => {
  const p = await startPipeline(t)
  await p.agent('dpu-1')
  const { call, watch } = await startIngress(t, p)
  await p.client.applyGroup('group-b', groupSpec('tenant-b', '10.20.0.0/24', '10.20.0.1'))

  const w = watch({ kind: 'OBJECT_KIND_RESOURCE_GROUP', name: 'group-a' })
  await until(
    async () => w.events.map((e) => e.type),
    (types) => types.includes('WATCH_EVENT_TYPE_BOOKMARK'),
  )
  t.same(
    w.events.map((e) => e.type),
    ['WATCH_EVENT_TYPE_BOOKMARK'],
    'nothing matches yet: the snapshot is just its bookmark',
  )
  await call('applyResourceGroup', { name: 'group-a', spec: groupSpec('tenant-a') })
  await until(
    async () => w.events.map(phaseOf),
    (phases) => phases.includes('RESOURCE_GROUP_PHASE_READY'),
  )
  t.equal(w.events[1]?.type, 'WATCH_EVENT_TYPE_ADDED', 'first seen: ADDED')
  t.ok(
    w.events.slice(2).every((e) => e.type === 'WATCH_EVENT_TYPE_MODIFIED'),
    'then MODIFIED',
  )
  t.ok(
    w.events.every(
      (e, i) =>
        i === 0 || compareVersions(w.events[i - 1]?.resourceVersion ?? '', e.resourceVersion) <= 0,
    ),
    'resource versions never go back',
  )
  t.ok(
    w.events.slice(1).every((e) => e.name === 'group-a' && e.kind === 'OBJECT_KIND_RESOURCE_GROUP'),
  )

  // A tenant's stream, cut off, then resumed after changes it missed.
  const a = watch({}, TENANT_A)
  await until(
    async () => a.events.map((e) => e.type),
    (types) => types.includes('WATCH_EVENT_TYPE_BOOKMARK'),
  )
  t.same(
    a.events.map((e) => [e.type, e.name]),
    [
      ['WATCH_EVENT_TYPE_ADDED', 'group-a'],
      ['WATCH_EVENT_TYPE_BOOKMARK', ''],
    ],
    "the snapshot: its own group only, as of the bookmark's version",
  )
  const resumeFrom = last(a.events)
  a.end()
  await a.closed
  const host = await call('applyManagedResource', {
    name: 'host-1',
    spec: hostMessage('group-a', 'dpu-1', 1),
  })
  t.equal(host.error, undefined)
  await until(
    async () => (await p.client.getHost('host-1'))?.status.phase,
    (phase) => phase === 'Ready',
  )
  await p.client.applyGroup('group-b2', groupSpec('tenant-b', '10.21.0.0/24', '10.21.0.1'))
  await until(
    async () => (await p.client.getGroup('group-b2'))?.status.phase,
    (phase) => phase === 'Ready',
  )

  const resumed = watch({ resourceVersion: resumeFrom }, TENANT_A)
  await until(
    async () => resumed.events.map((e) => e.type),
    (types) => types.includes('WATCH_EVENT_TYPE_BOOKMARK'),
  )
  const caughtUp = resumed.events.slice(
    0,
    resumed.events.findIndex((e) => e.type === 'WATCH_EVENT_TYPE_BOOKMARK'),
  )
  const hostEvent = caughtUp.find((e) => e.name === 'host-1') as WatchEvent
  t.match(hostEvent, { type: 'WATCH_EVENT_TYPE_ADDED', kind: 'OBJECT_KIND_MANAGED_RESOURCE' })
  t.ok(
    caughtUp.every((e) => e.name === 'host-1' || e.name === 'group-a'),
    "resumed: what changed since, nothing of tenant-b's new group",
  )
  t.equal(phaseOf(hostEvent), 'MANAGED_RESOURCE_PHASE_READY', 'as it is now')
  t.ok(compareVersions(hostEvent.resourceVersion, resumeFrom) > 0)

  // Deleted while nobody watched: a resumed stream of its tenant still hears of it.
  const before = last(resumed.events)
  resumed.end()
  await resumed.closed
  await call('deleteManagedResource', { name: 'host-1', force: true })
  // Purged, and its removal in the change log (appended just after the purge): what a
  // stream resumed from before it must replay.
  await until(
    async () => (await p.controller.store.changeLog.since(before, 1000)).map((c) => c.removed),
    (removed) => removed.some((r) => r !== undefined),
  )
  t.equal(await p.client.getHost('host-1'), undefined, 'host-1 is gone')
  const afterDelete = watch({ resourceVersion: before }, TENANT_A)
  const other = watch({ resourceVersion: before }, TENANT_B)
  await until(
    async () => afterDelete.events.map((e) => e.type),
    (types) => types.includes('WATCH_EVENT_TYPE_BOOKMARK'),
  )
  const deleted = afterDelete.events.findIndex((e) => e.type === 'WATCH_EVENT_TYPE_DELETED')
  t.match(afterDelete.events[deleted], { name: 'host-1', kind: 'OBJECT_KIND_MANAGED_RESOURCE' })
  t.ok(
    deleted < afterDelete.events.findIndex((e) => e.type === 'WATCH_EVENT_TYPE_BOOKMARK'),
    'before the bookmark',
  )
  await until(
    async () => other.events.map((e) => e.type),
    (types) => types.includes('WATCH_EVENT_TYPE_BOOKMARK'),
  )
  t.same(
    other.events.map((e) => e.type),
    ['WATCH_EVENT_TYPE_BOOKMARK'],
    'another tenant hears nothing of it, and gets no snapshot of its own groups',
  )

  // A version the change log no longer keeps, and one that is not a version.
  await p.controller.redis.xtrim(p.controller.store.changeLog.key, 'MAXLEN', 1)
  const old = watch({ resourceVersion: resumeFrom }, TENANT_A)
  const status = (await old.closed) as grpc.ServiceError
  t.equal(status.code, grpc.status.OUT_OF_RANGE)
  t.match(statusDetailsOf(status.metadata).errorInfo, { reason: 'RESOURCE_VERSION_TOO_OLD' })
  const bad = (await watch({ resourceVersion: 'yesterday' }).closed) as grpc.ServiceError
  t.equal(bad.code, grpc.status.INVALID_ARGUMENT)
  t.same(
    statusDetailsOf(bad.metadata).badRequest?.fieldViolations.map((v) => v.field),
    ['resource_version'],
  )
  const unauthenticated = watch({}, undefined)
  t.equal((await unauthenticated.closed).code, grpc.status.UNAUTHENTICATED)
})

t.test('Watch streams are bounded per token and in all', async (t) => {
  const p = await startPipeline(t)
  const { watch } = await startIngress(t, p, { watchLimits: { perPrincipal: 2, total: 3 } })
  const a1 = watch({}, TENANT_A)
  const a2 = watch({}, TENANT_A)
  const a3 = watch({}, TENANT_A)
  t.match(await a3.closed, { code: grpc.status.RESOURCE_EXHAUSTED, details: /2 for one token/ })
  const b1 = watch({}, TENANT_B)
  const b2 = watch({}, TENANT_B)
  t.match(await b2.closed, { code: grpc.status.RESOURCE_EXHAUSTED, details: /3 in all/ })
  // The tenants' streams fill the server, but not for the operator.
  const op = watch({})
  await p.client.applyGroup('group-op', groupSpec('tenant-c'))
  t.ok(
    await until(
      async () => op.events.some((e) => e.name === 'group-op'),
      (seen) => seen,
      5000,
    ),
    "the operator's stream opens all the same",
  )
  op.end()
  await op.closed
  // A closed stream frees its place.
  a1.end()
  await a1.closed
  await new Promise((r) => setTimeout(r, 200))
  const b3 = watch({}, TENANT_B)
  await p.client.applyGroup('group-w', groupSpec('tenant-b'))
  await until(
    async () => b3.events.some((e) => e.name === 'group-w'),
    (seen) => seen,
  )
  t.pass('a new stream opens once one closed')
  for (const w of [a2, b1, b3]) w.end()
})

t.test('health reflects the readiness probes', async (t) => {
  const p = await startPipeline(t)
  let up = true
  const { ingress, port } = await startIngress(t, p, { readiness: { redis: async () => up } })
  const healthClient = new grpc.Client(`127.0.0.1:${port}`, grpc.credentials.createInsecure())
  t.teardown(() => healthClient.close())
  // grpc.health.v1.HealthCheckRequest {service} / HealthCheckResponse {status}: a hand-rolled
  // codec keeps this test free of the health proto.
  const check = (service: string) =>
    new Promise<number>((resolve, reject) => {
      const encoded = Buffer.concat([
        Buffer.from([0x0a, Buffer.byteLength(service)]),
        Buffer.from(service),
      ])
      healthClient.makeUnaryRequest(
        '/grpc.health.v1.Health/Check',
        () => (service ? encoded : Buffer.alloc(0)),
        (b: Buffer) => b,
        {},
        (error, reply?: Buffer) => (error ? reject(error) : resolve(reply?.[1] ?? 0)),
      )
    })
  await ingress.health.refresh()
  t.equal(await check(''), 1, 'SERVING')
  t.equal(await check('hydrazine.v1.HydrazineService'), 1, 'SERVING for the API too')
  up = false
  await ingress.health.refresh()
  t.equal(await check(''), 2, 'NOT_SERVING once a probe fails')
})
