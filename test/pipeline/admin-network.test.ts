/**
 * The admin network (`HYDRAZINE_ADMIN_NETWORK`): every inventory host port no tenant host
 * holds is on it; a tenant host placed on the port takes it only after the admin port was
 * isolated, and the port rejoins the admin network only after the tenant host's DPU
 * confirmed its isolation. NB rows, status, events and the order the DPU was told things.
 */
import type { Job } from 'bullmq'
import t from 'tap'
import type { AdminNetwork } from '../../lib/model/admin-network.ts'
import type { ManagedResource } from '../../lib/model/objects.ts'
import type { Teardown } from '../helpers/stack.ts'
import {
  dpuFabricIps,
  groupSpec,
  hostSpec,
  type Pipeline,
  startPipeline,
  until,
} from './fixtures.ts'

const ADMIN: AdminNetwork = {
  group: 'admin',
  network: { cidr: '10.99.0.0/24', gateway: '10.99.0.1' },
  dhcpServer: '192.0.2.53',
}
const MAC = '0a:00:00:00:0a:01'
const ADMIN_PORT = 'admin-dpu-1-pf0hpf'

const phaseOf = (p: Pipeline, name: string) => async () =>
  (await p.controller.store.hosts.get(name))?.status.phase ?? 'gone'

async function portsOf(p: Pipeline) {
  const dpu = await p.client.getDpu('dpu-1')
  if (!dpu) throw new Error('dpu-1 is not in the inventory')
  return p.client.dpuPorts(dpu)
}

/** The DPU's jobs for `host` (its logical port's last part), by name. */
function jobFor(jobs: readonly Job[], name: string, host: string): Job | undefined {
  return jobs.find(
    (j) =>
      j.name === name &&
      (j.data as { host: { logicalPort: string } }).host.logicalPort.endsWith(`/${host}`),
  )
}

/** A pipeline with the admin network and dpu-1 (one host port, its MAC known) answering. */
async function withDpu1(t: Teardown) {
  const p = await startPipeline(t, { adminNetwork: ADMIN })
  const agent = await p.agent('dpu-1')
  await p.client.applyDpu('dpu-1', {
    fabricIps: dpuFabricIps('dpu-1'),
    hostPorts: ['pf0hpf'],
    hostMacs: { pf0hpf: MAC },
  })
  return { p, agent }
}

t.test(
  'a free host port sits on the admin network, and gives it up to a tenant host',
  async (t) => {
    const { p, agent } = await withDpu1(t)

    // 1. No tenant host: the port joins the admin network, locked to the inventory's MAC.
    await until(phaseOf(p, ADMIN_PORT), (phase) => phase === 'Ready')
    const admin = (await p.controller.store.hosts.get(ADMIN_PORT)) as ManagedResource
    const adminIp = admin.status.hostAccessIPs?.hostIP
    t.match(adminIp, /^10\.99\.0\./, 'the admin port has an address of the admin network')
    t.same(
      await p.switchPort(`hz/admin/${ADMIN_PORT}`),
      { addresses: [`${MAC} ${adminIp}`], portSecurity: [`${MAC} ${adminIp}`] },
      "NB: the admin network's switch has the port, locked to the host's MAC",
    )
    t.match(await portsOf(p), [
      { port: 'pf0hpf', network: 'admin', group: 'admin', host: ADMIN_PORT, phase: 'Ready' },
    ])
    const group = await p.controller.store.groups.get('admin')
    t.equal(group?.spec.tenantId, 'hydrazine-admin', 'the admin group is no tenant’s')
    t.equal(group?.spec.dhcpServer, '192.0.2.53', 'and relays DHCP to the provisioning server')
    t.match(await p.client.events('dpu', 'dpu-1'), [
      { reason: 'PortJoiningAdminNetwork', message: /port pf0hpf joins the admin network admin/ },
    ])

    // 2. A tenant host placed on the port: the admin port is isolated and gone first. With
    // the DPU's agent away, the admin port cannot be isolated, and the tenant host waits.
    await p.client.applyGroup('group-a', groupSpec())
    await until(
      async () => (await p.controller.store.groups.get('group-a'))?.status.phase,
      (phase) => phase === 'Ready',
    )
    await agent.close()
    await p.client.applyHost('h1', {
      ...hostSpec('group-a', 'dpu-1', 1),
      hostMAC: MAC,
      identifier: 'pf0hpf',
    })
    const waiting = await until(
      async () => p.controller.store.hosts.get('h1'),
      (h) => h?.status.conditions.some((c) => c.reason === 'AdminNetworkLeaving') ?? false,
    )
    t.equal(waiting?.status.phase, 'Attaching', 'h1 waits for the port to leave the admin network')
    t.equal(
      await until(phaseOf(p, ADMIN_PORT), (phase) => phase === 'Detaching'),
      'Detaching',
      'the admin port is being isolated',
    )
    t.equal(await p.switchPort('hz/group-a/h1'), undefined, 'NB: h1 is not on its network yet')
    t.equal(
      await until(
        () => p.switchPort(`hz/admin/${ADMIN_PORT}`),
        (port) => port === undefined,
      ),
      undefined,
      'NB: the admin port is off the admin network already',
    )
    t.equal(
      await phaseOf(p, 'h1')(),
      'Attaching',
      'h1 still waits: its DPU has not isolated the port',
    )
    t.match(await portsOf(p), [
      { port: 'pf0hpf', network: 'tenant', host: 'h1', phase: 'Attaching' },
    ])
    const back = await p.agent('dpu-1')
    await until(phaseOf(p, 'h1'), (phase) => phase === 'Ready', 30_000)
    t.equal(await phaseOf(p, ADMIN_PORT)(), 'gone', 'the admin port is gone')
    t.equal(await p.switchPort(`hz/admin/${ADMIN_PORT}`), undefined, 'NB: off the admin network')
    t.match(await p.switchPort('hz/group-a/h1'), {
      addresses: [new RegExp(`^${MAC} 10\\.10\\.10\\.`)],
    })
    t.match(await portsOf(p), [
      { port: 'pf0hpf', network: 'tenant', group: 'group-a', host: 'h1', phase: 'Ready' },
    ])
    const isolated = jobFor(back.jobs, 'isolate', ADMIN_PORT)
    const configured = jobFor(back.jobs, 'configure', 'h1')
    t.ok(isolated && configured, 'the DPU isolated the admin port and configured h1')
    t.ok(
      (isolated?.finishedOn ?? Number.POSITIVE_INFINITY) <= (configured?.processedOn ?? 0),
      'h1 was configured only after the admin port was isolated: never both at once',
    )
    t.match(
      (await p.client.events('dpu', 'dpu-1')).map((e) => e.reason),
      ['PortLeavingAdminNetwork', 'PortJoiningAdminNetwork'],
    )
    const h1Events = await p.client.events('mr', 'h1')
    t.ok(
      h1Events.some((e) =>
        /is on the admin network admin \(admin-dpu-1-pf0hpf\): it is isolated/.test(e.message),
      ),
      `h1's events say it waited for the port to leave the admin network: ${JSON.stringify(h1Events)}`,
    )

    // 3. The tenant host detached: once its DPU confirmed isolation, the port rejoins.
    await p.client.deleteHost('h1')
    await until(phaseOf(p, ADMIN_PORT), (phase) => phase === 'Ready', 30_000)
    t.equal(await phaseOf(p, 'h1')(), 'gone')
    t.equal(await p.switchPort('hz/group-a/h1'), undefined, 'NB: h1 is off its network')
    t.match(await p.switchPort(`hz/admin/${ADMIN_PORT}`), {
      portSecurity: [new RegExp(`^${MAC} `)],
    })
    t.match(await portsOf(p), [{ port: 'pf0hpf', network: 'admin', host: ADMIN_PORT }])
    const h1Isolated = jobFor(back.jobs, 'isolate', 'h1')
    const rejoined = back.jobs.filter((j) => j.name === 'configure').at(-1)
    t.match(rejoined?.data, { host: { logicalPort: `hz/admin/${ADMIN_PORT}` } })
    t.ok(
      (h1Isolated?.finishedOn ?? Number.POSITIVE_INFINITY) <= (rejoined?.processedOn ?? 0),
      'the port rejoined only after the DPU confirmed h1 isolated',
    )
  },
)

t.test(
  'after a forced detach, the port rejoins only once its DPU confirmed isolation',
  async (t) => {
    const { p, agent } = await withDpu1(t)
    await until(phaseOf(p, ADMIN_PORT), (phase) => phase === 'Ready')
    await p.client.applyGroup('group-a', groupSpec())
    await p.client.applyHost('h1', {
      ...hostSpec('group-a', 'dpu-1', 1),
      hostMAC: MAC,
      identifier: 'pf0hpf',
    })
    await until(phaseOf(p, 'h1'), (phase) => phase === 'Ready', 30_000)

    // The agent away, h1 is deleted by force: gone at once, its DPU marked to isolate it.
    await agent.close()
    await p.client.deleteHost('h1', { force: true })
    await until(phaseOf(p, 'h1'), (phase) => phase === 'gone')
    const waiting = await until(
      () => portsOf(p),
      (ports) => /has not confirmed h1 isolated/.test(ports[0]?.reason ?? ''),
    )
    t.match(waiting, [{ port: 'pf0hpf', network: 'none', reason: /has not confirmed h1 isolated/ }])
    await new Promise((resolve) => setTimeout(resolve, 1000))
    t.equal(await phaseOf(p, ADMIN_PORT)(), 'gone', 'no admin port while the DPU has not confirmed')

    // The agent back: it isolates h1, and only then does the port rejoin.
    const back = await p.agent('dpu-1')
    await until(phaseOf(p, ADMIN_PORT), (phase) => phase === 'Ready', 30_000)
    const isolated = jobFor(back.jobs, 'isolate', 'h1')
    const rejoined = jobFor(back.jobs, 'configure', ADMIN_PORT)
    t.ok(isolated && rejoined, 'the DPU isolated h1 and configured the admin port')
    t.ok(
      (isolated?.finishedOn ?? Number.POSITIVE_INFINITY) <= (rejoined?.processedOn ?? 0),
      'the admin port was configured only after h1 was isolated',
    )
    t.match(await portsOf(p), [{ port: 'pf0hpf', network: 'admin', host: ADMIN_PORT }])
  },
)

t.test('a DPU serving a tenant keeps its other ports off the admin network', async (t) => {
  const p = await startPipeline(t, { adminNetwork: ADMIN })
  await p.agent('dpu-2')
  await p.client.applyGroup('group-a', groupSpec())
  await p.client.applyDpu('dpu-2', {
    fabricIps: dpuFabricIps('dpu-2'),
    hostPorts: ['pf0hpf', 'pf1hpf', 'pf2hpf'],
    hostMacs: { pf0hpf: MAC, pf1hpf: '0a:00:00:00:0b:01' },
  })
  await until(phaseOf(p, 'admin-dpu-2-pf1hpf'), (phase) => phase === 'Ready')
  const dpu = await p.client.getDpu('dpu-2')
  t.match(await p.client.dpuPorts(dpu as NonNullable<typeof dpu>), [
    { port: 'pf0hpf', network: 'admin' },
    { port: 'pf1hpf', network: 'admin' },
    { port: 'pf2hpf', network: 'none', reason: /no MAC for port pf2hpf/ },
  ])
  await p.client.applyHost('h2', { ...hostSpec('group-a', 'dpu-2', 2), identifier: 'pf0hpf' })
  await until(phaseOf(p, 'h2'), (phase) => phase === 'Ready', 30_000)
  t.equal(await phaseOf(p, 'admin-dpu-2-pf1hpf')(), 'gone', 'the other port left too')
  t.match(await p.client.dpuPorts(dpu as NonNullable<typeof dpu>), [
    { port: 'pf0hpf', network: 'tenant', host: 'h2' },
    { port: 'pf1hpf', network: 'none', reason: /serves group group-a/ },
    { port: 'pf2hpf', network: 'none' },
  ])
})

t.test('no request writes the admin network or its ports', async (t) => {
  const { p } = await withDpu1(t)
  await until(phaseOf(p, ADMIN_PORT), (phase) => phase === 'Ready')
  const owned = /is the admin network \(HYDRAZINE_ADMIN_NETWORK\)|is a port of the admin network/
  await t.rejects(p.client.applyGroup('admin', groupSpec()), { code: 'FORBIDDEN', message: owned })
  await t.rejects(p.client.deleteGroup('admin'), { code: 'FORBIDDEN', message: owned })
  await t.rejects(p.client.applyHost('h9', hostSpec('admin', 'dpu-1', 9)), {
    code: 'FORBIDDEN',
    message: owned,
  })
  await t.rejects(p.client.deleteHost(ADMIN_PORT), { code: 'FORBIDDEN', message: owned })
  await t.rejects(p.client.applyGroup('group-x', groupSpec('hydrazine-admin')), {
    code: 'INVALID',
    issues: [{ path: 'tenantId', message: /reserved for the admin network/ }],
  })
  t.equal(await phaseOf(p, ADMIN_PORT)(), 'Ready', 'the admin port is untouched')
})
