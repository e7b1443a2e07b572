/**
 * The admin network with real packets (`HYDRAZINE_ADMIN_NETWORK`): a host whose port no
 * tenant holds gets its lease from the provisioning server (dnsmasq, through the admin
 * network's relay) and reaches no tenant host; attached to a tenant, it reaches its
 * tenant's hosts and not the admin network; detached, it is back on the admin network.
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

const ADMIN = { cidr: '10.99.0.0/24', gateway: '10.99.0.1' }
const TENANT = { cidr: '10.10.10.0/24', gateway: '10.10.10.1' }
const ADMIN_PORT = 'admin-dpu1-pf0hpf'

interface Answer {
  status?: {
    phase?: string
    dhcpCircuitId?: string
    hostAccessIPs?: { hostIP?: string }
  }
  spec?: Record<string, unknown>
  ports?: { port: string; network: string; host?: string }[]
}

await labTest('the admin network, with packets', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'hz-lab-admin-'))
  let lab: Lab | undefined
  t.teardown(async () => {
    await lab?.stop()
    await rm(dataDir, { recursive: true, force: true, maxRetries: 5 })
  })
  lab = await startLab({ dataDir, prefix: labPrefix(), dpus: 2, adminNetwork: ADMIN })
  const l = lab
  const get = async (path: string) => (await l.api('GET', path)).body as Answer
  const put = async (path: string, body: unknown) => {
    const answer = await l.api('PUT', path, body)
    t.ok(answer.status < 300, `PUT ${path} → ${answer.status} ${JSON.stringify(answer.body)}`)
  }

  const x1 = await l.addHost({ dpu: 1, name: 'x1', mac: '0a:00:00:00:0c:01' })
  const a2 = await l.addHost({
    dpu: 2,
    name: 'a2',
    mac: '0a:00:00:00:0a:02',
    ipCidr: '10.10.10.12/24',
  })
  await a2.exec('ip', 'route', 'replace', 'default', 'via', TENANT.gateway, 'dev', 'eth0')
  await put('/v1/resource-groups/group-a', { tenantId: 'tenant-a', network: TENANT })
  t.ok(await phaseIs(l, '/v1/resource-groups/group-a', 'Ready'), 'group A is Ready')
  t.ok((await attachHost(l, a2, 'group-a', '10.10.10.12')).status < 300, 'a2 attached')
  t.ok(await hostReady(l, 'a2'), 'a2 is Ready')

  // The inventory learns the MAC behind dpu1's port: the port joins the admin network.
  const dpu1 = await get('/v1/dpus/dpu1')
  await put('/v1/dpus/dpu1', { ...dpu1.spec, hostMacs: { [x1.hostPort]: x1.mac } })

  /** The admin port Ready, the provisioning server serving its MAC its address: x1's lease. */
  const onAdminNetwork = async (what: string) => {
    t.ok(await hostReady(l, ADMIN_PORT, 90_000), `${what}: the admin port is Ready`)
    const ip = (await get(`/v1/managed-resources/${ADMIN_PORT}`)).status?.hostAccessIPs?.hostIP
    const circuitId = (await get('/v1/resource-groups/admin')).status?.dhcpCircuitId ?? ''
    t.match(ip, /^10\.99\.0\.\d+$/, `${what}: the admin port holds ${ip}`)
    await l.configureDhcp([{ circuitId, ...ADMIN, leases: [{ mac: x1.mac, ip: ip ?? '' }] }])
    t.ok(await lease(x1, dataDir, 25), `${what}: x1 gets a lease from the provisioning server`)
    t.match(
      await x1.exec('ip', '-4', 'addr', 'show', 'eth0'),
      new RegExp(`inet ${(ip ?? '').replaceAll('.', '\\.')}/24`),
      `${what}: the address the admin network gave its port`,
    )
    t.ok(
      await eventually(() => pings(x1.netns, ADMIN.gateway), 20_000),
      `${what}: x1 → admin gateway`,
    )
    t.notOk(await pings(x1.netns, '10.10.10.12', 2), `${what}: x1 reaches no tenant host`)
    t.match((await get('/v1/dpus/dpu1')).ports, [
      { port: x1.hostPort, network: 'admin', host: ADMIN_PORT },
    ])
  }
  await onAdminNetwork('free')

  // Attached to tenant A: x1 reaches its tenant's hosts, and not the admin network.
  await release(x1, dataDir)
  t.ok((await attachHost(l, x1, 'group-a', '10.10.10.21')).status < 300, 'x1 attached to group A')
  t.ok(await hostReady(l, 'x1', 90_000), 'x1 is Ready in group A')
  t.ok(await isGone(l, `/v1/managed-resources/${ADMIN_PORT}`), 'the admin port is gone')
  await x1.exec('ip', 'addr', 'add', '10.10.10.21/24', 'dev', 'eth0')
  await x1.exec('ip', 'route', 'replace', 'default', 'via', TENANT.gateway, 'dev', 'eth0')
  t.ok(await eventually(() => pings(x1.netns, '10.10.10.12'), 20_000), 'x1 → a2 (its tenant)')
  t.notOk(await pings(x1.netns, ADMIN.gateway, 2), 'x1 does not reach the admin network')
  t.notOk(await lease(x1, dataDir, 8), 'nor its DHCP server')
  t.match((await get('/v1/dpus/dpu1')).ports, [
    { port: x1.hostPort, network: 'tenant', host: 'x1' },
  ])

  // Detached: once its DPU confirmed it isolated, the port is back on the admin network.
  await x1.exec('ip', 'addr', 'flush', 'dev', 'eth0')
  t.ok((await l.api('DELETE', '/v1/managed-resources/x1')).status < 300, 'x1 detached')
  t.ok(await isGone(l, '/v1/managed-resources/x1'), 'x1 is gone')
  await onAdminNetwork('detached')
  await release(x1, dataDir)
})

/** Runs dhclient once in `host` for at most `seconds`: true when it got a lease. */
function lease(host: LabHost, dataDir: string, seconds: number): Promise<boolean> {
  return host
    .exec(
      'timeout',
      String(seconds),
      'dhclient',
      '-1',
      '-pf',
      join(dataDir, `${host.name}.pid`),
      '-lf',
      join(dataDir, `${host.name}.leases`),
      'eth0',
    )
    .then(
      () => true,
      () => false,
    )
}

/** Gives up `host`'s lease (and its address). */
async function release(host: LabHost, dataDir: string): Promise<void> {
  await host
    .exec(
      'dhclient',
      '-r',
      '-pf',
      join(dataDir, `${host.name}.pid`),
      '-lf',
      join(dataDir, `${host.name}.leases`),
      'eth0',
    )
    .catch(() => undefined)
  await host.exec('ip', 'addr', 'flush', 'dev', 'eth0').catch(() => undefined)
}
