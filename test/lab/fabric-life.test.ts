/**
 * A Fabric group's whole life through the HTTP API only, as Carbide drives it, with real
 * agents, real BGP and real packets on the lab: create it, attach a host on each of two
 * DPUs from the group's IPAM (they reach each other), give one public access (the
 * internet side reaches it at its public IP), detach both, delete the group; then every
 * identifier is back where it came from, read through the API: no address of the group
 * held, the public IP free, and a new Fabric group takes the same VNI and VLAN id.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { labPrefix } from '../../infra/lab/dpu.ts'
import { type Lab, startLab } from '../../infra/lab/lab.ts'
import { eventually, pings } from '../../infra/lab/probes.ts'
import { attachHost, hostReady, isGone, phaseIs } from './api.ts'
import { labTest } from './lab-test.ts'

const network = { cidr: '10.30.0.0/24', gateway: '10.30.0.1' }
const PUBLIC_IP = '203.0.113.50'

interface GroupView {
  status?: { phase?: string; fabric?: { vni: number; vlan: number } }
}
interface HostView {
  status?: { hostAccessIPs?: { hostIP?: string; publicIP?: string } }
}
interface IpamView {
  subnets?: { used: number }[]
  allocations?: unknown[]
}

await labTest("a Fabric group's life through the API: every identifier back", async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'hz-lab-fabric-life-'))
  let lab: Lab | undefined
  t.teardown(async () => {
    await lab?.stop()
    await rm(dataDir, { recursive: true, force: true, maxRetries: 5 })
  })
  lab = await startLab({ dataDir, prefix: labPrefix(), dpus: 2 })
  const l = lab
  const get = async <T>(path: string) => (await l.api('GET', path)).body as T

  t.equal((await l.api('PUT', `/v1/public-ips/${PUBLIC_IP}`, {})).status, 200, 'a public IP')
  const fabricGroup = { tenantId: 'tenant-l', network, networkImplementationType: 'Fabric' }
  t.equal((await l.api('PUT', '/v1/resource-groups/life', fabricGroup)).status, 202, 'create')
  t.ok(await phaseIs(l, '/v1/resource-groups/life', 'Ready'), 'the group is Ready')
  const ids = (await get<GroupView>('/v1/resource-groups/life')).status?.fabric
  t.ok(ids?.vni && ids.vlan, `it holds VNI ${ids?.vni} and VLAN ${ids?.vlan}`)
  await l.router.border(ids?.vni ?? 0)

  // Attach on two DPUs, addresses from the group's IPAM; one with public access.
  const h1 = await l.addHost({ dpu: 1, name: 'h1', mac: '0a:00:00:00:0d:01' })
  const h2 = await l.addHost({ dpu: 2, name: 'h2', mac: '0a:00:00:00:0d:02' })
  t.equal((await attachHost(l, h1, 'life', undefined)).status, 202, 'attach h1 on dpu1')
  t.equal(
    (await attachHost(l, h2, 'life', undefined, 'PublicAccess')).status,
    202,
    'attach h2 on dpu2 with PublicAccess',
  )
  const addressOf: Record<string, string> = {}
  for (const host of [h1, h2]) {
    t.ok(await hostReady(l, host.name, 90_000), `${host.name} is Ready`)
    const view = await get<HostView>(`/v1/managed-resources/${host.name}`)
    const ip = view.status?.hostAccessIPs?.hostIP ?? ''
    addressOf[host.name] = ip
    await host.exec('ip', 'addr', 'add', `${ip}/24`, 'dev', 'eth0')
    await host.exec('ip', 'route', 'replace', 'default', 'via', network.gateway, 'dev', 'eth0')
  }
  t.ok(
    await eventually(() => pings(h1.netns, addressOf.h2 ?? ''), 20_000),
    `h1 (dpu1) reaches h2 (dpu2) at ${addressOf.h2}`,
  )
  const h2View = await get<HostView>('/v1/managed-resources/h2')
  t.equal(h2View.status?.hostAccessIPs?.publicIP, PUBLIC_IP, "h2's status shows its public IP")
  await h2.exec('ip', 'addr', 'add', `${PUBLIC_IP}/32`, 'dev', 'eth0')
  t.ok(
    await eventually(
      () =>
        l.router
          .exec('ping', '-c', '1', '-W', '1', '-I', l.router.internetIp, PUBLIC_IP)
          .then(() => true)
          .catch(() => false),
      30_000,
    ),
    'the internet side reaches h2 at its public IP',
  )
  const held = await get<IpamView>('/v1/resource-groups/life/ipam')
  t.equal(held.subnets?.[0]?.used, 2, 'the group holds two addresses')

  // Detach both, delete the group.
  for (const name of ['h1', 'h2']) {
    t.equal((await l.api('DELETE', `/v1/managed-resources/${name}`)).status, 202, `detach ${name}`)
    t.ok(await isGone(l, `/v1/managed-resources/${name}`), `${name} is gone`)
  }
  const after = await get<IpamView>('/v1/resource-groups/life/ipam')
  t.equal(after.subnets?.[0]?.used, 0, "the group's addresses are back")
  const pip = await get<{ allocated?: boolean }>(`/v1/public-ips/${PUBLIC_IP}`)
  t.equal(pip.allocated, false, 'the public IP is back in the pool')
  t.ok(
    await eventually(async () => !(await l.router.bgpRoutes()).has(`${PUBLIC_IP}/32`), 15_000),
    'and no longer routed at the border',
  )
  t.equal((await l.api('DELETE', '/v1/resource-groups/life')).status, 202, 'delete the group')
  t.ok(await isGone(l, '/v1/resource-groups/life', 90_000), 'the group is gone')

  // Its VNI and VLAN id went back to the pools: the next Fabric group takes them.
  t.equal((await l.api('PUT', '/v1/resource-groups/next', fabricGroup)).status, 202, 'a new one')
  t.ok(await phaseIs(l, '/v1/resource-groups/next', 'Ready'), 'it is Ready')
  t.same(
    (await get<GroupView>('/v1/resource-groups/next')).status?.fabric,
    ids,
    'with the VNI and VLAN id the deleted group gave back',
  )
})
