/**
 * `hosts.inGroup` (and `hosts.onDpu`) keep a group's (a DPU's) hosts decoded between reads and
 * read again only those that changed: whatever changes a host — its spec, its status, a
 * deletion, a purge, a new object under the same name — another store answers exactly
 * what reading every host answers, at once. `hosts.onDpuOutside` answers the DPU's hosts
 * of other groups, as reading every host of the DPU would.
 */
import { Redis } from 'ioredis'
import t from 'tap'
import type { ManagedResourceSpec } from '../../lib/model/objects.ts'
import { StateStore } from '../../lib/state/store.ts'
import { storedGroup, storedHost } from '../helpers/objects.ts'
import { withStack } from '../helpers/stack.ts'

t.test('a kept group reads as fresh as reading every host', async (t) => {
  const stack = await withStack(t)
  const url = stack.redis?.url ?? ''
  const writerRedis = new Redis(url)
  const readerRedis = new Redis(url)
  t.teardown(() => {
    writerRedis.disconnect()
    readerRedis.disconnect()
  })
  const writer = new StateStore(writerRedis)
  const reader = new StateStore(readerRedis)
  const quota = { tenant: 'tenant-a', limits: { groups: 10, hosts: 10, publicIps: 10 } }
  await writer.groups.put('group-a', storedGroup('group-a').spec)
  await writer.groups.put('group-b', storedGroup('group-b').spec)
  const dpu = await writer.dpus.put('dpu-1', { fabricIps: ['172.18.0.10'], hostPorts: [] })
  const put = (name: string, spec: Partial<ManagedResourceSpec> = {}) =>
    writer.hosts.put(
      name,
      storedHost(name, { hostMAC: `52:54:00:00:00:${name.slice(-2)}`, ...spec }).spec,
      dpu.object.specVersion,
      quota,
    )

  /** groupHosts of the reader against listHosts, for both groups. */
  const same = async (what: string) => {
    for (const group of ['group-a', 'group-b']) {
      const kept = await reader.hosts.inGroup(group)
      const read = await reader.hosts.list({ resourceGroup: group })
      t.same(kept, read, `${what}: ${group} as read whole`)
    }
    const names = (await reader.dpus.hostNames('dpu-1')).sort()
    const served = await Promise.all(names.map((n) => reader.hosts.get(n)))
    t.same(await reader.hosts.onDpu('dpu-1'), served, `${what}: dpu-1's hosts as read one by one`)
    for (const group of ['group-a', 'group-b']) {
      t.same(
        await reader.hosts.onDpuOutside('dpu-1', group),
        served.filter((h) => h?.spec.resourceGroup !== group),
        `${what}: dpu-1's hosts outside ${group}`,
      )
    }
  }

  await same('no hosts')
  for (const name of ['h-01', 'h-02', 'h-03']) await put(name)
  await same('three hosts')
  await same('read again, nothing changed')

  await put('h-02', { hostAccess: 'FabricAccess', dpu: { id: 'dpu-1', ips: ['172.18.0.10'] } })
  await same('a spec changed')
  t.equal((await reader.hosts.inGroup('group-a')).find((h) => h.name === 'h-02')?.specVersion, 2)

  await writer.hosts.updateStatus('h-01', (h) => ({ ...h.status, phase: 'Configuring' }))
  await same('a status changed')
  t.equal(
    (await reader.hosts.inGroup('group-a')).find((h) => h.name === 'h-01')?.status.phase,
    'Configuring',
    'the new status is read',
  )

  await writer.objects.requestDeletion('mr', 'h-03', false)
  await same('a deletion was asked for')
  t.ok((await reader.hosts.inGroup('group-a')).find((h) => h.name === 'h-03')?.deletion)

  await writer.hosts.purge('h-03', 'group-a', 'dpu-1')
  await same('a host was purged')
  t.same(
    (await reader.hosts.inGroup('group-a')).map((h) => h.name),
    ['h-01', 'h-02'],
    'it is gone',
  )

  await put('h-03', { hostAccess: 'None' })
  await same('a host by the same name again')

  await put('h-04', { resourceGroup: 'group-b' })
  await same('a host in the other group')

  await writer.objects.requestDeletion('mr', 'h-03', false)
  await writer.hosts.purge('h-03', 'group-a', 'dpu-1')
  await put('h-03', { resourceGroup: 'group-b' })
  await same('a host purged and made again in the other group')

  // A log trimmed past the reader's place: it reads the groups whole, as the first time.
  await writerRedis.xtrim(writer.changeLog.key, 'MAXLEN', 0)
  await put('h-05', { resourceGroup: 'group-b' })
  await same('the change log trimmed')
  // A store whose log starts over below the reader's place (a store replaced).
  await writerRedis.del(writer.changeLog.key)
  await writer.hosts.updateStatus('h-05', (h) => ({ ...h.status, phase: 'Configuring' }))
  await same('the change log started over')
  await writer.objects.requestDeletion('mr', 'h-05', false)
  await writer.hosts.purge('h-05', 'group-b', 'dpu-1')
  await writer.objects.requestDeletion('mr', 'h-03', false)
  await writer.hosts.purge('h-03', 'group-b', 'dpu-1')
  await put('h-03', { hostAccess: 'None' })
  t.same(
    (await reader.hosts.inGroup('group-b')).map((h) => h.name),
    ['h-04'],
    "each group's own hosts",
  )

  // An admin network's port is not one of the DPU's hosts, but it is on the DPU.
  const admin = storedHost('a-05', { resourceGroup: 'group-b', hostMAC: '52:54:00:00:00:05' })
  await writer.hosts.put('a-05', admin.spec, dpu.object.specVersion, quota, { adminPort: true })
  t.same(
    (await reader.hosts.onDpuOutside('dpu-1', 'group-a')).map((h) => h.name),
    ['a-05', 'h-04'],
    "outside group-a: the other group's host and the admin port",
  )
  t.same(
    (await reader.hosts.onDpuOutside('dpu-1', 'group-b')).map((h) => h.name),
    ['h-01', 'h-02', 'h-03'],
    "outside group-b: group-a's hosts",
  )
})

t.test('a kept group reads only the hosts that changed since its last read', async (t) => {
  const stack = await withStack(t)
  const url = stack.redis?.url ?? ''
  const redis = new Redis(url)
  t.teardown(() => redis.disconnect())
  const writer = new StateStore(redis)
  const reader = new StateStore(redis)
  const quota = { tenant: 'tenant-a', limits: { groups: 10, hosts: 100, publicIps: 10 } }
  await writer.groups.put('group-a', storedGroup('group-a').spec)
  const dpu = await writer.dpus.put('dpu-1', { fabricIps: ['172.18.0.10'], hostPorts: [] })
  const names = Array.from({ length: 40 }, (_, i) => `h-${String(i + 10).padStart(2, '0')}`)
  for (const name of names) {
    const spec = storedHost(name, { hostMAC: `52:54:00:00:00:${name.slice(-2)}` }).spec
    await writer.hosts.put(name, spec, dpu.object.specVersion, quota)
  }
  /** Host hashes Redis read (HGETALL, and HMGET of their revisions) during `read`. */
  const hostReads = async (read: () => Promise<unknown>) => {
    const calls = async () => {
      const stats = await redis.info('commandstats')
      const of = (cmd: string) =>
        Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(stats)?.[1] ?? 0)
      return of('hgetall') + of('hmget')
    }
    const before = await calls()
    await read()
    return (await calls()) - before
  }
  t.equal((await reader.hosts.inGroup('group-a')).length, 40, 'the first read: every host')
  t.equal(
    await hostReads(() => reader.hosts.inGroup('group-a')),
    0,
    'read again with nothing changed: no host read',
  )
  await writer.hosts.updateStatus('h-12', (h) => ({ ...h.status, phase: 'Configuring' }))
  t.equal(
    await hostReads(() => reader.hosts.inGroup('group-a')),
    1,
    'one host changed: that one read',
  )
  t.equal(
    (await reader.hosts.inGroup('group-a')).find((h) => h.name === 'h-12')?.status.phase,
    'Configuring',
  )
})

t.test('a host joins only a group that is there and not being deleted', async (t) => {
  const stack = await withStack(t)
  const redis = new Redis(stack.redis?.url ?? '')
  t.teardown(() => redis.disconnect())
  const store = new StateStore(redis)
  const quota = { tenant: 'tenant-a', limits: { groups: 10, hosts: 10, publicIps: 10 } }
  const dpu = await store.dpus.put('dpu-1', { fabricIps: ['172.18.0.10'], hostPorts: [] })
  const put = (name: string) =>
    store.hosts.put(name, storedHost(name).spec, dpu.object.specVersion, quota)
  await t.rejects(
    put('h-01'),
    { reason: 'Terminating', message: /gone or being deleted/ },
    'no group',
  )
  await store.groups.put('group-a', storedGroup('group-a').spec)
  t.equal((await put('h-01')).changed, true, 'the group is there: stored')
  await store.objects.requestDeletion('rg', 'group-a', false)
  await t.rejects(
    put('h-02'),
    { reason: 'Terminating', message: /gone or being deleted/ },
    'the group is being deleted: refused',
  )
  t.notOk(await store.hosts.get('h-02'), 'and nothing stored')
  t.same(
    (await store.hosts.inGroup('group-a')).map((h) => h.name),
    ['h-01'],
    'the group keeps only the host it had',
  )
})
