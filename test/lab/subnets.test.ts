/**
 * A group's subnets, pools and reservations on the simulated data centre, with real
 * packets: a host that names no pool gets an address of its network's `default` pool
 * past the reservations, a host that names a pool gets one of that pool in the extra
 * subnet, both subnets are the group's router networks, and the two hosts reach each
 * other across them (through the group's router) and their own gateways. A host naming a
 * reserved address is refused before anything is stored; the address map says who holds
 * what.
 *
 * group-a: network 10.10.10.0/24 (10.10.10.2–.9 reserved), extra subnet 10.40.0.0/24 with
 * the pool `vms` (10.40.0.100–.199); h1 (dpu 1, no pool), h2 (dpu 2, pool vms).
 *
 * Run as root it must work (a lab that cannot start fails, saying why); without root it
 * is skipped, saying why (`lab-test.ts`).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { labPrefix } from '../../infra/lab/dpu.ts'
import { type Lab, type LabHost, startLab } from '../../infra/lab/lab.ts'
import { capture, eventually, pings } from '../../infra/lab/probes.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { attachHost, hostReady, phaseIs } from './api.ts'
import { labTest } from './lab-test.ts'

const network = { cidr: '10.10.10.0/24', gateway: '10.10.10.1' }
const extra = { cidr: '10.40.0.0/24', gateway: '10.40.0.1' }
/** An extra subnet without a gateway: its hosts stay on the group's switch. */
const onLink = { cidr: '10.50.0.0/24' }

interface HostView {
  status?: { hostAccessIPs?: { hostIP?: string } }
}

await labTest(
  'subnets and pools: addresses from the right pool, routed between subnets',
  async (t) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'hz-lab-subnets-'))
    let lab: Lab | undefined
    t.teardown(async () => {
      await lab?.stop()
      await rm(dataDir, { recursive: true, force: true, maxRetries: 5 })
    })
    lab = await startLab({ dataDir, prefix: labPrefix() })
    const l = lab

    const put = await l.api('PUT', '/v1/resource-groups/group-a', {
      tenantId: 'tenant-a',
      network,
      extraSubnets: [extra, onLink],
      pools: [{ name: 'vms', start: '10.40.0.100', end: '10.40.0.199' }],
      reservations: [{ start: '10.10.10.2', end: '10.10.10.9' }],
    })
    t.equal(put.status, 202, 'group-a with an extra subnet, a pool and a reservation')
    t.ok(await phaseIs(l, '/v1/resource-groups/group-a', 'Ready'), 'group-a is Ready')

    const h1 = await l.addHost({ dpu: 1, name: 'h1', mac: '0a:00:00:00:0e:01' })
    const h2 = await l.addHost({ dpu: 2, name: 'h2', mac: '0a:00:00:00:0e:02' })
    const reserved = await attachHost(l, h1, 'group-a', '10.10.10.5')
    t.equal(reserved.status, 400, 'a reserved address is refused')
    t.match(JSON.stringify(reserved.body), /hostIP/, 'naming hostIP')

    t.ok((await attachHost(l, h1, 'group-a', undefined)).status < 300, 'attach h1 (no pool)')
    t.ok(
      (await attachHost(l, h2, 'group-a', undefined, 'None', { pool: 'vms' })).status < 300,
      'attach h2 (pool vms)',
    )
    /** The host's address once Ready, configured on its eth0 with its gateway. */
    const configure = async (host: LabHost, gateway: string) => {
      t.ok(await hostReady(l, host.name), `${host.name} is Ready`)
      const view = (await l.api('GET', `/v1/managed-resources/${host.name}`)).body as HostView
      const ip = view.status?.hostAccessIPs?.hostIP ?? ''
      await host.exec('ip', 'addr', 'add', `${ip}/24`, 'dev', 'eth0')
      await host.exec('ip', 'route', 'replace', 'default', 'via', gateway, 'dev', 'eth0')
      return ip
    }
    const ip1 = await configure(h1, network.gateway)
    const ip2 = await configure(h2, extra.gateway)
    t.equal(ip1, '10.10.10.10', "h1: its network's default pool, past the reservation")
    t.equal(ip2, '10.40.0.100', "h2: the pool vms's first address")

    await t.test(
      'both subnets are router networks; hosts reach each other across them',
      async (t) => {
        const port = topologyNames.routerSwitchPort('group-a')
        const networks = await l.nbctl('group-a', 'get', 'Logical_Router_Port', port, 'networks')
        t.match(networks, /10\.10\.10\.1\/24/, 'the router is in the network')
        t.match(networks, /10\.40\.0\.1\/24/, 'and in the extra subnet')
        t.ok(await eventually(() => pings(h1.netns, network.gateway), 30_000), 'h1 → its gateway')
        t.ok(await eventually(() => pings(h2.netns, extra.gateway), 30_000), 'h2 → its gateway')
        t.ok(await eventually(() => pings(h1.netns, ip2), 20_000), `h1 (${ip1}) → h2 (${ip2})`)
        t.ok(await pings(h2.netns, ip1), 'h2 → h1')
      },
    )

    await t.test(
      'a host of a subnet without a gateway never reaches the fabric, even through the router',
      async (t) => {
        const h3 = await l.addHost({ dpu: 1, name: 'h3', mac: '0a:00:00:00:0e:03' })
        t.ok((await attachHost(l, h3, 'group-a', '10.50.0.5')).status < 300, 'attach h3')
        t.ok(await hostReady(l, 'h3'), 'h3 is Ready')
        await h3.exec('ip', 'addr', 'add', '10.50.0.5/24', 'dev', 'eth0')
        // The router answers ARP for its address from any port of the switch: a host that
        // routes at it anyway must still get no further than the group.
        await h3.exec('ip', 'route', 'add', `${network.gateway}/32`, 'dev', 'eth0')
        await h3.exec('ip', 'route', 'replace', 'default', 'via', network.gateway, 'dev', 'eth0')
        await eventually(() => pings(h3.netns, '10.10.10.10', 1), 10_000)
        const seen = await capture(
          l.router.netns,
          `src net ${onLink.cidr}`,
          async () =>
            t.notOk(await pings(h3.netns, l.router.internetIp, 2), 'h3 → the fabric fails'),
          3000,
        )
        t.equal(seen, '', `nothing from its subnet reaches the fabric router: ${seen}`)
      },
    )

    await t.test('the address map says who holds what', async (t) => {
      const map = (await l.api('GET', '/v1/resource-groups/group-a/ipam')).body as {
        allocations?: { owner: string; ip: string }[]
        subnets?: { cidr: string; pools?: { name?: string; used?: number }[] }[]
      }
      t.match(map.allocations, [
        { owner: 'h1', ip: ip1 },
        { owner: 'h2', ip: ip2 },
      ])
      const vms = map.subnets
        ?.find((s) => s.cidr === extra.cidr)
        ?.pools?.find((p) => p.name === 'vms')
      t.equal(vms?.used, 1, 'the pool vms has one address used')
    })
  },
)
