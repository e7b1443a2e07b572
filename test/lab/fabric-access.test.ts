/**
 * Access levels of a Fabric group's hosts, with real packets and real BGP: the lab's fabric
 * router is the border (`border(vni)`: the group's VRF there, leaking marked /32s into its
 * global table and a default route back into the group).
 *
 * fab-a (10.10.0.0/24) has, on two DPUs:
 * - f1 (dpu1, 10.10.0.11, FabricAccess): the router's global table holds its /32 (leaked
 *   from the group's VRF), the router reaches it by its own address, and it reaches out;
 * - n1 (dpu2, 10.10.0.12, None): no /32 at the border, the router does not reach it, it
 *   does not reach out (its DPU refuses it the default route), yet reaches f1 in its group;
 * - q1 (dpu2, 10.10.0.13, PublicAccess): its public IP from the pool, shown in its status,
 *   routed to it by its DPU and leaked: the "internet" side reaches it there;
 * - f2 (dpu2, 10.10.0.14, FabricAccess): a second leaking host on one DPU, reached too.
 *
 * fab-b has the same network: its FabricAccess host at 10.10.0.11 is refused (409 naming
 * hostIP) and exists nowhere. Detaching f1 and q1 removes their /32s from the border, and
 * q1's public IP goes back to the pool.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { labPrefix } from '../../infra/lab/dpu.ts'
import { type Lab, type LabHost, startLab } from '../../infra/lab/lab.ts'
import { capture, eventually, pings } from '../../infra/lab/probes.ts'
import { attachHost, type HostAccess, hostReady, isGone, phaseIs } from './api.ts'
import { labTest } from './lab-test.ts'

const network = { cidr: '10.10.0.0/24', gateway: '10.10.0.1' }
const PUBLIC_IP = '203.0.113.40'

interface GroupView {
  status?: { fabric?: { vni: number; vlan: number } }
}
interface HostView {
  status?: { phase?: string; hostAccessIPs?: { hostIP?: string; publicIP?: string } }
}

/** Whether the router reaches `target` from `source` (its fabric or "internet" address). */
async function routerReaches(lab: Lab, source: string, target: string): Promise<boolean> {
  return lab.router
    .exec('ping', '-c', '2', '-i', '0.2', '-W', '1', '-I', source, target)
    .then(() => true)
    .catch(() => false)
}

await labTest(
  'Fabric access levels: FabricAccess and PublicAccess leaked at the border, None kept in',
  async (t) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'hz-lab-fabric-access-'))
    let lab: Lab | undefined
    t.teardown(async () => {
      await lab?.stop()
      await rm(dataDir, { recursive: true, force: true, maxRetries: 5 })
    })
    lab = await startLab({ dataDir, prefix: labPrefix(), dpus: 2 })
    const l = lab
    const why = async (name: string) =>
      JSON.stringify((await l.api('GET', `/v1/managed-resources/${name}`)).body)

    t.equal((await l.api('PUT', `/v1/public-ips/${PUBLIC_IP}`, {})).status, 200, 'a public IP')
    const vniOf: Record<string, number> = {}
    for (const group of ['fab-a', 'fab-b']) {
      const put = await l.api('PUT', `/v1/resource-groups/${group}`, {
        tenantId: `tenant-${group}`,
        network,
        networkImplementationType: 'Fabric',
      })
      t.equal(put.status, 202, `${group}: a Fabric group with 10.10.0.0/24`)
      t.ok(await phaseIs(l, `/v1/resource-groups/${group}`, 'Ready'), `${group} is Ready`)
      const view = (await l.api('GET', `/v1/resource-groups/${group}`)).body as GroupView
      vniOf[group] = view.status?.fabric?.vni ?? 0
    }
    // The fabric's operator makes the border fab-a's: its VRF there.
    await l.router.border(vniOf['fab-a'] ?? 0)

    const hosts: Record<string, LabHost> = {}
    const add = async (name: string, dpu: number, ip: string, access: HostAccess, i: number) => {
      const host = await l.addHost({
        dpu,
        name,
        mac: `0a:00:00:00:0e:${i.toString(16).padStart(2, '0')}`,
      })
      const put = await attachHost(l, host, 'fab-a', ip, access)
      if (!t.equal(put.status, 202, `attach ${name} (${ip}, ${access}) on dpu${dpu}`)) {
        t.comment(JSON.stringify(put.body))
      }
      hosts[name] = host
      return host
    }
    const f1 = await add('f1', 1, '10.10.0.11', 'FabricAccess', 1)
    const n1 = await add('n1', 2, '10.10.0.12', 'None', 2)
    const q1 = await add('q1', 2, '10.10.0.13', 'PublicAccess', 3)
    // A second leaking host on dpu2: a Fabric host holds no NAT IP of its DPU.
    await add('f2', 2, '10.10.0.14', 'FabricAccess', 4)
    for (const [name, host] of Object.entries(hosts)) {
      if (!t.ok(await hostReady(l, name, 90_000), `${name} is Ready`)) t.comment(await why(name))
      const ip = ((await l.api('GET', `/v1/managed-resources/${name}`)).body as HostView).status
        ?.hostAccessIPs?.hostIP
      await host.exec('ip', 'addr', 'add', `${ip}/24`, 'dev', 'eth0')
      await host.exec('ip', 'route', 'replace', 'default', 'via', network.gateway, 'dev', 'eth0')
    }
    const q1View = (await l.api('GET', '/v1/managed-resources/q1')).body as HostView
    t.equal(q1View.status?.hostAccessIPs?.publicIP, PUBLIC_IP, "q1's status shows its public IP")
    // The tenant puts the routed public IP on its host, as on bare metal.
    await q1.exec('ip', 'addr', 'add', `${PUBLIC_IP}/32`, 'dev', 'eth0')

    // The border's global table: the leaked /32s, via the group's VRF; never n1's.
    const leaked = async () => l.router.bgpRoutes()
    t.ok(
      await eventually(async () => {
        const routes = await leaked()
        return routes.has('10.10.0.11/32') && routes.has(`${PUBLIC_IP}/32`)
      }, 30_000),
      "the border's global table holds f1's /32 and q1's public /32",
    )
    t.notOk((await leaked()).has('10.10.0.12/32'), "nor n1's (None): it is not leaked")

    // Packets.
    t.ok(
      await eventually(() => routerReaches(l, l.router.ip, '10.10.0.11'), 20_000),
      'the data centre (the router) reaches f1 by its own address',
    )
    t.ok(await eventually(() => pings(f1.netns, l.router.ip), 20_000), 'f1 reaches out')
    t.ok(
      await eventually(() => routerReaches(l, l.router.ip, '10.10.0.14'), 20_000),
      'and f2, a second leaking host on dpu2',
    )
    t.ok(
      await eventually(() => routerReaches(l, l.router.internetIp, PUBLIC_IP), 20_000),
      'the internet side reaches q1 at its public IP',
    )
    t.ok(await eventually(() => pings(n1.netns, '10.10.0.11'), 20_000), 'n1 reaches f1 (its group)')
    t.notOk(await routerReaches(l, l.router.ip, '10.10.0.12'), 'the router does not reach n1')
    // Not only no answer (the border has no route back): its packets never leave its DPU.
    const border = await l.router.border(vniOf['fab-a'] ?? 0)
    const escaped = await capture(
      border.netns,
      'icmp and src host 10.10.0.12',
      () => pings(n1.netns, l.router.ip),
      5_000,
    )
    t.equal(escaped, '', 'n1 (None) does not reach out: none of its packets reach the border')
    t.notOk(await pings(n1.netns, l.router.internetIp), 'nor the internet side')

    // q1's access lowered to FabricAccess: its DPU withdraws the public IP, which goes back
    // to the pool; q1 itself stays leaked.
    const lowered = await attachHost(l, q1, 'fab-a', '10.10.0.13', 'FabricAccess')
    t.equal(lowered.status, 202, 'q1 lowered to FabricAccess')
    t.ok(await hostReady(l, 'q1', 90_000), 'q1 is Ready at its new spec')
    const loweredView = (await l.api('GET', '/v1/managed-resources/q1')).body as HostView
    t.equal(loweredView.status?.hostAccessIPs?.publicIP, undefined, 'its status shows no public IP')
    t.ok(
      await eventually(async () => {
        const routes = await leaked()
        return !routes.has(`${PUBLIC_IP}/32`) && routes.has('10.10.0.13/32')
      }, 30_000),
      "the border lost q1's public /32 and keeps q1's own",
    )
    t.notOk(
      await routerReaches(l, l.router.internetIp, PUBLIC_IP),
      'the internet side no longer reaches q1 at the public IP',
    )
    const given = (await l.api('GET', `/v1/public-ips/${PUBLIC_IP}`)).body as {
      allocated?: boolean
    }
    t.equal(given.allocated, false, 'the public IP is back in the pool')

    // fab-b: the same network; its FabricAccess host at f1's address is refused.
    const b1 = await l.addHost({ dpu: 1, name: 'b1', mac: '0a:00:00:00:0e:11' })
    const refused = await attachHost(l, b1, 'fab-b', '10.10.0.11', 'FabricAccess')
    t.equal(refused.status, 409, "fab-b's FabricAccess host at 10.10.0.11 is refused")
    t.match(
      refused.body,
      { error: { code: 'CONFLICT', issues: [{ path: 'hostIP' }] } },
      'naming hostIP',
    )
    t.equal((await l.api('GET', '/v1/managed-resources/b1')).status, 404, 'b1 exists nowhere')
    t.notOk(await pings(b1.netns, '10.10.0.11', 1), 'b1 reaches nothing')
    t.ok(await routerReaches(l, l.router.ip, '10.10.0.11'), 'the router still reaches f1')

    // Detach: the leak goes from the border first, then the public IP back to the pool.
    for (const name of ['f1', 'q1']) {
      t.equal(
        (await l.api('DELETE', `/v1/managed-resources/${name}`)).status,
        202,
        `detach ${name}`,
      )
      if (!t.ok(await isGone(l, `/v1/managed-resources/${name}`), `${name} is gone`)) {
        t.comment(await why(name))
      }
    }
    t.ok(
      await eventually(async () => {
        const routes = await leaked()
        return !routes.has('10.10.0.11/32') && !routes.has(`${PUBLIC_IP}/32`)
      }, 15_000),
      "the border lost f1's and q1's /32s",
    )
    t.notOk(await routerReaches(l, l.router.ip, '10.10.0.11'), 'the router no longer reaches f1')
    const pip = (await l.api('GET', `/v1/public-ips/${PUBLIC_IP}`)).body as { allocated?: boolean }
    t.equal(pip.allocated, false, 'the public IP is back in the pool')
    // f1's address is free at the border now: fab-b's host may leak it.
    const again = await attachHost(l, b1, 'fab-b', '10.10.0.11', 'FabricAccess')
    t.equal(again.status, 202, "fab-b's host at 10.10.0.11 is accepted once f1 is gone")
    t.ok(await hostReady(l, 'b1', 90_000), 'b1 is Ready')
  },
)
