/**
 * A host with two interfaces on two groups, with real packets: one host namespace with
 * `eth0` behind DPU 1 (group-a) and `eth1` behind DPU 2 (group-b), each interface its own
 * port. The host reaches both groups' hosts, each through its own interface; the two
 * groups stay isolated from each other (the host does not forward between them); dropping
 * the interface from the host's list detaches it.
 *
 * Run as root it must work (a lab that cannot start fails, saying why); without root it
 * is skipped, saying why (`lab-test.ts`).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { labPrefix } from '../../infra/lab/dpu.ts'
import { type Lab, type LabHost, startLab } from '../../infra/lab/lab.ts'
import { eventually, pings } from '../../infra/lab/probes.ts'
import { attachHost, hostReady, isGone, phaseIs } from './api.ts'
import { labTest } from './lab-test.ts'

const A = { cidr: '10.10.10.0/24', gateway: '10.10.10.1' }
const B = { cidr: '10.20.20.0/24', gateway: '10.20.20.1' }

await labTest('a host on two groups through two interfaces', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'hz-lab-interfaces-'))
  let lab: Lab | undefined
  t.teardown(async () => {
    await lab?.stop()
    await rm(dataDir, { recursive: true, force: true, maxRetries: 5 })
  })
  lab = await startLab({ dataDir, prefix: labPrefix(), dpus: 4 })
  const l = lab
  for (const [group, network] of [
    ['group-a', A],
    ['group-b', B],
  ] as const) {
    const put = await l.api('PUT', `/v1/resource-groups/${group}`, {
      tenantId: 'tenant-a',
      network,
    })
    t.equal(put.status, 202, `${group} accepted`)
    t.ok(await phaseIs(l, `/v1/resource-groups/${group}`, 'Ready'), `${group} is Ready`)
  }

  const m1 = await l.addHost({
    dpu: 1,
    name: 'm1',
    mac: '0a:00:00:00:0e:11',
    ipCidr: '10.10.10.11/24',
  })
  const m1eth1 = await l.addHost({
    dpu: 2,
    name: 'm1-eth1',
    mac: '0a:00:00:00:0e:21',
    ipCidr: '10.20.20.11/24',
    into: { host: m1, ifname: 'eth1' },
  })
  const a2 = await l.addHost({
    dpu: 3,
    name: 'a2',
    mac: '0a:00:00:00:0e:12',
    ipCidr: '10.10.10.12/24',
  })
  const b2 = await l.addHost({
    dpu: 4,
    name: 'b2',
    mac: '0a:00:00:00:0e:22',
    ipCidr: '10.20.20.12/24',
  })
  // Their default routes lead into their own group's router: what leaves is OVN's to stop.
  await a2.exec('ip', 'route', 'add', 'default', 'via', A.gateway)
  await b2.exec('ip', 'route', 'add', 'default', 'via', B.gateway)

  const dpu2 = l.dpus[1]
  if (!dpu2) throw new Error('DPU 2 missing')
  const eth1 = {
    name: 'eth1',
    resourceGroup: 'group-b',
    hostMAC: m1eth1.mac,
    hostIP: '10.20.20.11',
    dpu: { id: dpu2.id, ips: [dpu2.encapIp, dpu2.natIp] },
    identifier: m1eth1.hostPort,
  }
  const attach = async (host: LabHost, group: string, ip: string, extra = {}) => {
    const answer = await attachHost(l, host, group, ip, 'None', extra)
    t.ok(answer.status < 300, `attach ${host.name} → ${answer.status}`)
  }
  await attach(m1, 'group-a', '10.10.10.11', { interfaces: [eth1] })
  await attach(a2, 'group-a', '10.10.10.12')
  await attach(b2, 'group-b', '10.20.20.12')
  for (const name of ['m1', 'm1-eth1', 'a2', 'b2'])
    t.ok(await hostReady(l, name), `${name} is Ready`)
  const own = (await l.api('GET', '/v1/managed-resources/m1-eth1')).body as {
    spec?: { resourceGroup?: string; interfaceOf?: string }
  }
  t.match(
    own.spec,
    { resourceGroup: 'group-b', interfaceOf: 'm1' },
    'eth1 is its own port, in group-b',
  )

  await t.test('the host reaches both groups, each through its own interface', async (t) => {
    t.ok(
      await eventually(() => pings(m1.netns, '10.10.10.12', 1), 30_000),
      'm1 → a2 (eth0, group-a)',
    )
    t.ok(
      await eventually(() => pings(m1.netns, '10.20.20.12', 1), 30_000),
      'm1 → b2 (eth1, group-b)',
    )
    t.ok(await pings(a2.netns, '10.10.10.11'), 'a2 → m1 at its group-a address')
    t.ok(await pings(b2.netns, '10.20.20.11'), 'b2 → m1 at its group-b address')
  })

  await t.test('the groups stay isolated from each other', async (t) => {
    t.notOk(await pings(a2.netns, '10.20.20.12', 3), 'a2 (group-a) does not reach b2 (group-b)')
    t.notOk(await pings(b2.netns, '10.10.10.12', 3), 'b2 does not reach a2')
    t.notOk(await pings(a2.netns, '10.20.20.11', 3), "a2 does not reach m1's group-b address")
    t.notOk(await pings(b2.netns, '10.10.10.11', 3), "b2 does not reach m1's group-a address")
  })

  await t.test('dropping the interface from the list detaches it', async (t) => {
    await attach(m1, 'group-a', '10.10.10.11')
    t.ok(await isGone(l, '/v1/managed-resources/m1-eth1'), 'm1-eth1 is gone')
    t.ok(await hostReady(l, 'm1'), 'm1 is Ready on eth0')
    t.notOk(await pings(m1.netns, '10.20.20.12', 3), 'm1 no longer reaches group-b')
    t.ok(await pings(m1.netns, '10.10.10.12'), 'and still reaches group-a')
  })
})
