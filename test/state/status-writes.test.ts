/**
 * A status write is computed from the object as it is when it is written: a write whose
 * object changed in any way after it was read (its spec, its deletion mark, its status)
 * reads it again and computes again, whether it read the object itself or started from
 * what its caller had read (`hosts.getKept`); and every write is in the change log.
 */
import { Redis } from 'ioredis'
import t from 'tap'
import type { ManagedResourceStatus } from '../../lib/model/objects.ts'
import { StateStore } from '../../lib/state/store.ts'
import { storedGroup, storedHost } from '../helpers/objects.ts'
import { withStack } from '../helpers/stack.ts'

t.test('a status computed from an object that changed meanwhile is computed again', async (t) => {
  const stack = await withStack(t)
  const redis = new Redis(stack.redis?.url ?? '')
  t.teardown(() => redis.disconnect())
  const store = new StateStore(redis)
  const quota = { tenant: 'tenant-a', limits: { groups: 10, hosts: 10, publicIps: 10 } }
  await store.groups.put('group-a', storedGroup('group-a').spec)
  const dpu = await store.dpus.put('dpu-1', { fabricIps: ['172.18.0.10'], hostPorts: [] })
  const putHost = (mac: string) =>
    store.hosts.put(
      'h-01',
      storedHost('h-01', { hostMAC: mac }).spec,
      dpu.object.specVersion,
      quota,
    )
  await putHost('52:54:00:00:00:01')
  /** The status a writer computes from the object it was given: which spec it saw. */
  const seen = (current: { specVersion: number; status: ManagedResourceStatus }) => ({
    ...current.status,
    observedVersion: current.specVersion,
  })
  const since = await store.changeLog.latest()

  await t.test('a spec written between the read and the write', async (t) => {
    const before = (await store.hosts.get('h-01'))?.specVersion ?? 0
    const given: number[] = []
    await store.hosts.updateStatus('h-01', (current) => {
      given.push(current.specVersion)
      // Another writer's spec lands after this write read the host, before it writes: sent
      // now on the same connection, Redis runs it first.
      if (given.length === 1) void redis.hincrby('hz:{store}:mr:h-01', 'specVersion', 1)
      return seen(current)
    })
    const host = await store.hosts.get('h-01')
    t.same(given, [before, before + 1], 'computed again from the object as it is now')
    t.equal(host?.status.observedVersion, before + 1, 'written from the spec it has')
  })

  await t.test('starting from a read that is stale', async (t) => {
    const read = await store.hosts.getKept('h-01')
    if (!read) throw new Error('no host')
    await putHost('52:54:00:00:00:03')
    const given: number[] = []
    await store.hosts.updateStatus(
      'h-01',
      (current) => {
        given.push(current.specVersion)
        return seen(current)
      },
      read,
    )
    const host = await store.hosts.get('h-01')
    t.same(given, [read.object.specVersion, host?.specVersion], 'computed again from the new spec')
    t.equal(host?.status.observedVersion, host?.specVersion, 'written from the spec it has')
  })

  await t.test('starting from a read that is current', async (t) => {
    const read = await store.hosts.getKept('h-01')
    if (!read) throw new Error('no host')
    const given: number[] = []
    await store.hosts.updateStatus(
      'h-01',
      (current) => {
        given.push(current.specVersion)
        return { ...seen(current), phase: 'Ready' }
      },
      read,
    )
    t.same(given, [read.object.specVersion], 'computed once, from the read')
    t.equal((await store.hosts.get('h-01'))?.status.phase, 'Ready', 'written')
  })

  const changes = await store.changeLog.since(since, 100)
  t.ok(
    changes.filter((c) => c.kind === 'mr' && c.name === 'h-01').length >= 4,
    'every spec and status write of the host is in the change log',
  )
})
