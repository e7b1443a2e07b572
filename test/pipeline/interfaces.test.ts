/**
 * A host with several interfaces, through the whole pipeline on real OVN with stand-in
 * agents: each interface is a ManagedResource of its own (`<host>-<name>`), its own port in
 * its own group's switch, Ready on its own DPU; only its host changes or deletes it; a refused
 * interface leaves nothing written; dropping an interface from the list detaches it, and
 * deleting the host, or the host's group, deletes them all.
 */
import t from 'tap'
import { topologyNames } from '../../lib/ovn/index.ts'
import { dpuFabricIps, groupSpec, hostSpec, startPipeline, until } from './fixtures.ts'

const NETWORK_B = ['10.20.20.0/24', '10.20.20.1'] as const

t.test('a host on two groups through two interfaces', async (t) => {
  const p = await startPipeline(t)
  for (const dpu of ['dpu-1', 'dpu-2', 'dpu-3', 'dpu-4']) await p.agent(dpu)
  await p.client.applyGroup('group-a', groupSpec())
  await p.client.applyGroup('group-b', groupSpec('tenant-a', ...NETWORK_B))
  const eth1 = {
    name: 'eth1',
    resourceGroup: 'group-b',
    hostMAC: '52:54:00:00:0b:01',
    hostIP: '10.20.20.5',
    dpu: { id: 'dpu-2', ips: dpuFabricIps('dpu-2') },
  }
  const m1 = hostSpec('group-a', 'dpu-1', 1, { interfaces: [eth1] })
  await p.client.applyHost('m1', m1)
  const ready = (name: string, version = 1) =>
    until(
      () => p.controller.store.hosts.get(name),
      (h) => h?.status.phase === 'Ready' && h.status.observedVersion >= version,
    )
  t.equal((await ready('m1'))?.spec.resourceGroup, 'group-a', 'the host is Ready in group-a')
  const own = await ready('m1-eth1')
  t.match(
    own,
    { spec: { resourceGroup: 'group-b', interfaceOf: 'm1', hostMAC: eth1.hostMAC } },
    'its interface is a ManagedResource of its own in group-b, naming its host',
  )
  t.equal(own?.status.hostAccessIPs?.hostIP, '10.20.20.5')
  t.same(
    (await p.switchPort(topologyNames.hostPort('group-b', 'm1-eth1')))?.addresses,
    [`${eth1.hostMAC} 10.20.20.5`],
    "its own port on group-b's switch",
  )
  t.notOk(await p.switchPort(topologyNames.hostPort('group-a', 'm1-eth1')), "none on group-a's")

  await t.test('only its host changes or deletes an interface', async (t) => {
    const { name: _name, ...asHost } = eth1
    const put = await p.client.applyHost('m1-eth1', asHost).catch((e) => e)
    t.match(put, { code: 'CONFLICT', message: /interface of host m1/ }, 'PUT: 409')
    const del = await p.client.deleteHost('m1-eth1').catch((e) => e)
    t.match(del, { code: 'CONFLICT', message: /through m1/ }, 'DELETE: 409')
    t.notOk((await p.controller.store.hosts.get('m1-eth1'))?.deletion, 'it stays')
  })

  await t.test('a refused interface leaves nothing written', async (t) => {
    const bad = await p.client
      .applyHost(
        'm2',
        hostSpec('group-a', 'dpu-3', 2, { interfaces: [{ ...eth1, resourceGroup: 'nope' }] }),
      )
      .catch((e) => e)
    t.match(
      bad,
      { code: 'INVALID', issues: [{ path: 'interfaces.0.resourceGroup' }] },
      '400 naming it',
    )
    await p.client.applyHost('m2-eth1', hostSpec('group-a', 'dpu-3', 3))
    const taken = await p.client
      .applyHost(
        'm2',
        hostSpec('group-a', 'dpu-3', 2, {
          interfaces: [
            {
              ...eth1,
              dpu: { id: 'dpu-3', ips: dpuFabricIps('dpu-3') },
              resourceGroup: 'group-a',
              hostMAC: '52:54:00:00:0b:02',
              hostIP: undefined,
            },
          ],
        }),
      )
      .catch((e) => e)
    t.match(taken, { code: 'CONFLICT' }, 'an interface whose name another host has: 409')
    t.equal(await p.controller.store.hosts.get('m2'), undefined, 'and the host is not written')
    const twice = await p.client
      .applyHost(
        'm3',
        hostSpec('group-a', 'dpu-3', 4, {
          interfaces: [{ ...eth1, hostMAC: hostSpec('group-a', 'dpu-3', 4).hostMAC }],
        }),
      )
      .catch((e) => e)
    t.match(twice, { code: 'INVALID', issues: [{ path: 'interfaces' }] }, 'a MAC used twice: 400')
  })

  await t.test('interfaces that cannot sit together are refused, naming the field', async (t) => {
    const refused = async (interfaces: unknown[]) =>
      p.client.applyHost('m4', hostSpec('group-a', 'dpu-3', 5, { interfaces })).catch((e) => e)
    const onDpu3 = { ...eth1, dpu: { id: 'dpu-3', ips: dpuFabricIps('dpu-3') }, hostIP: undefined }
    t.match(
      await refused([onDpu3]),
      { code: 'INVALID', issues: [{ path: 'interfaces.0.dpu.id', message: /one group/ }] },
      "on the host's DPU in another group: a DPU follows one group",
    )
    await p.client.applyGroup('group-t', groupSpec('tenant-t', '10.30.30.0/24', '10.30.30.1'))
    t.match(
      await refused([{ ...eth1, resourceGroup: 'group-t', hostIP: undefined }]),
      { code: 'INVALID', issues: [{ path: 'interfaces.0.resourceGroup', message: /tenant-a/ }] },
      "in another tenant's group",
    )
    t.equal(await p.controller.store.hosts.get('m4'), undefined, 'nothing written')
  })

  await t.test('dropping an interface detaches it; deleting the host deletes all', async (t) => {
    await p.client.applyHost('m1', hostSpec('group-a', 'dpu-1', 1))
    await until(
      () => p.controller.store.hosts.get('m1-eth1'),
      (h) => h === undefined,
    )
    t.pass('m1-eth1 is gone once dropped from the list')
    t.equal((await ready('m1', 2))?.status.phase, 'Ready', 'the host stays Ready')
    await p.client.applyHost('m1', m1)
    t.ok(await ready('m1-eth1'), 'added again')
    await p.client.deleteHost('m1')
    for (const name of ['m1', 'm1-eth1']) {
      await until(
        () => p.controller.store.hosts.get(name),
        (h) => h === undefined,
      )
      t.pass(`${name} is gone`)
    }
  })

  await t.test(
    'a name the host lists but no longer owns is never deleted through it',
    async (t) => {
      /** m1 lists eth1, whose own object went with group-b; the name is another host's now. */
      const staleListing = async () => {
        await p.client.applyHost('m1', m1)
        t.ok(await ready('m1-eth1'), 'm1-eth1 is Ready')
        await p.client.deleteGroup('group-b')
        await until(
          () => p.controller.store.groups.get('group-b'),
          (g) => g === undefined,
        )
        t.notOk(await p.controller.store.hosts.get('m1-eth1'), 'm1-eth1 went with group-b')
        await p.client.applyGroup('group-b', groupSpec('tenant-a', ...NETWORK_B))
        // On a DPU of its own (dpu-3 serves group-a), so it becomes Ready.
        await p.client.applyHost('m1-eth1', hostSpec('group-b', 'dpu-4', 7))
        const alone = await ready('m1-eth1')
        t.equal(alone?.status.phase, 'Ready', 'm1-eth1 is Ready')
        t.notOk(alone?.spec.interfaceOf, 'm1-eth1 is a host of its own now')
      }
      const untouched = async (what: string) => {
        const other = await p.controller.store.hosts.get('m1-eth1')
        t.ok(other && !other.deletion, `${what}: the other m1-eth1 is not marked for deletion`)
      }
      const gone = (name: string) =>
        until(
          () => p.controller.store.hosts.get(name),
          (h) => h === undefined,
        )

      await staleListing()
      await p.client.applyHost('m1', hostSpec('group-a', 'dpu-1', 1))
      await until(
        () => p.controller.store.hosts.get('m1'),
        (h) => h !== undefined && h.spec.interfaces === undefined && h.status.phase === 'Ready',
      )
      await untouched('m1 dropped eth1 from its list')
      await p.client.deleteHost('m1-eth1')
      await gone('m1-eth1')

      await staleListing()
      await p.client.deleteHost('m1')
      await gone('m1')
      await untouched('m1 deleted')
      await p.client.deleteHost('m1-eth1')
      await gone('m1-eth1')
    },
  )

  await t.test("deleting the host's group deletes its interfaces too", async (t) => {
    await p.client.applyHost('m1', m1)
    t.ok(await ready('m1-eth1'), 'm1-eth1 is Ready')
    await p.client.deleteGroup('group-a')
    for (const name of ['m1', 'm1-eth1']) {
      await until(
        () => p.controller.store.hosts.get(name),
        (h) => h === undefined,
      )
      t.pass(`${name} is gone`)
    }
  })
})
