/**
 * Fabric groups on the simulated data centre, with real packets and real BGP: each DPU's
 * agent builds the group's VRF (a namespace here, the netns backend), its own FRR
 * announces each host's /32 as an EVPN type-5 route in the group's L3VNI, and the fabric
 * router (the EVPN route reflector) carries them between the DPUs.
 *
 * fab-a and fab-b are Fabric groups with the SAME network 10.10.0.0/24; ov is an Overlay
 * group with that network too, on the same DPUs at once:
 *
 * - a1 (dpu1, 10.10.0.11) and a2 (dpu2, 10.10.0.12) in fab-a reach each other;
 * - b1 (dpu1, 10.10.0.13) and b2 (dpu2, 10.10.0.11, a1's address) in fab-b reach each
 *   other, and neither reaches a host of fab-a (a1 sees no echo of theirs);
 * - the reflector holds each host's /32 under its group's route target ASN:VNI with its
 *   DPU's VTEP as next hop, and loses a2's when a2 is detached (a1 no longer reaches it);
 * - o1 (dpu1) and o2 (dpu2) in the Overlay group reach each other and no Fabric host;
 * - each DPU's heartbeat reports its VRFs (port, announced /32); a DPU drops a group's VRF
 *   when its last host of the group leaves;
 * - deleting fab-b withdraws all its routes and gives its VNI back (fab-c takes it).
 *
 * Run as root it must work (a lab that cannot start fails, saying why); without root it
 * is skipped, saying why (`lab-test.ts`).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { labPrefix } from '../../infra/lab/dpu.ts'
import { FABRIC_ROUTER_ASN } from '../../infra/lab/fabric-router.ts'
import { type Lab, type LabHost, startLab } from '../../infra/lab/lab.ts'
import { eventually, icmpInEchos, pings } from '../../infra/lab/probes.ts'
import { attachHost, hostReady, isGone, phaseIs } from './api.ts'
import { labTest } from './lab-test.ts'

const network = { cidr: '10.10.0.0/24', gateway: '10.10.0.1' }

interface GroupView {
  status?: { fabric?: { vni: number; vlan: number } }
}
interface DpuView {
  agent?: {
    observed?: { vrfs?: { group: string; vrf: string; ports: string[]; announced: string[] }[] }
  }
}
interface HostView {
  status?: { agent?: { vrf?: string; announced?: string[] } }
}

await labTest(
  'Fabric groups: one VRF per group across DPUs, same CIDR apart, beside an Overlay group',
  async (t) => {
    const dataDir = await mkdtemp(join(tmpdir(), 'hz-lab-fabric-'))
    let lab: Lab | undefined
    t.teardown(async () => {
      await lab?.stop()
      await rm(dataDir, { recursive: true, force: true, maxRetries: 5 })
    })
    lab = await startLab({ dataDir, prefix: labPrefix(), dpus: 2 })
    const l = lab

    const vniOf: Record<string, number> = {}
    for (const [group, tenantId] of [
      ['fab-a', 'tenant-a'],
      ['fab-b', 'tenant-b'],
    ] as const) {
      const put = await l.api('PUT', `/v1/resource-groups/${group}`, {
        tenantId,
        network,
        networkImplementationType: 'Fabric',
      })
      t.equal(put.status, 202, `${group}: a Fabric group with 10.10.0.0/24`)
      t.ok(await phaseIs(l, `/v1/resource-groups/${group}`, 'Ready'), `${group} is Ready`)
      const view = (await l.api('GET', `/v1/resource-groups/${group}`)).body as GroupView
      vniOf[group] = view.status?.fabric?.vni ?? 0
    }
    t.not(vniOf['fab-a'], vniOf['fab-b'], 'each group its own VNI')
    const rt = (group: string) => `${FABRIC_ROUTER_ASN}:${vniOf[group]}`

    /** What a host's status says, for a failure to explain itself. */
    const why = async (name: string) =>
      JSON.stringify((await l.api('GET', `/v1/managed-resources/${name}`)).body)
    const [dpu1, dpu2] = l.dpus
    if (!dpu1 || !dpu2) throw new Error('the lab has two DPUs')
    const hosts: Record<string, { host: LabHost; ip: string; group: string }> = {}
    const add = async (name: string, dpu: number, group: string, ip: string, i: number) => {
      const host = await l.addHost({
        dpu,
        name,
        mac: `0a:00:00:00:0f:${i.toString(16).padStart(2, '0')}`,
      })
      const put = await attachHost(l, host, group, ip)
      t.ok(put.status < 300, `attach ${name} (${ip}) to ${group} on dpu${dpu}`)
      hosts[name] = { host, ip, group }
    }
    await add('a1', 1, 'fab-a', '10.10.0.11', 1)
    await add('a2', 2, 'fab-a', '10.10.0.12', 2)
    await add('b1', 1, 'fab-b', '10.10.0.13', 3)
    await add('b2', 2, 'fab-b', '10.10.0.11', 4)
    for (const [name, { host, ip }] of Object.entries(hosts)) {
      t.ok(await hostReady(l, name, 90_000), `${name} is Ready`)
      await host.exec('ip', 'addr', 'add', `${ip}/24`, 'dev', 'eth0')
      await host.exec('ip', 'route', 'replace', 'default', 'via', network.gateway, 'dev', 'eth0')
    }
    const a1 = hosts.a1?.host as LabHost
    const b1 = hosts.b1?.host as LabHost
    const b2 = hosts.b2?.host as LabHost

    const a1View = (await l.api('GET', '/v1/managed-resources/a1')).body as HostView
    t.match(
      a1View.status?.agent,
      { vrf: `hzv${vniOf['fab-a']}`, announced: ['10.10.0.11/32'] },
      "a1's status names its VRF and the /32 its DPU announces",
    )

    /** The VRFs the DPU's agent reports in its heartbeat. */
    const vrfsOf = async (dpu: string) =>
      ((await l.api('GET', `/v1/dpus/${dpu}`)).body as DpuView).agent?.observed?.vrfs ?? []
    t.ok(
      await eventually(async () =>
        (await vrfsOf('dpu1')).some(
          (v) =>
            v.group === 'fab-a' &&
            v.vrf === `hzv${vniOf['fab-a']}` &&
            v.ports.join() === a1.hostPort &&
            v.announced.join() === '10.10.0.11/32',
        ),
      ),
      "dpu1's heartbeat reports fab-a's VRF, a1's port in it and the /32 it announces",
    )

    // The reflector: each host's /32 under its group's RT, next hop its DPU's VTEP.
    t.ok(
      await eventually(async () => {
        const routes = await l.router.evpnRoutes()
        return (
          routes.get(`${rt('fab-a')}|10.10.0.11/32`)?.join() === dpu1.encapIp &&
          routes.get(`${rt('fab-a')}|10.10.0.12/32`)?.join() === dpu2.encapIp &&
          routes.get(`${rt('fab-b')}|10.10.0.13/32`)?.join() === dpu1.encapIp &&
          routes.get(`${rt('fab-b')}|10.10.0.11/32`)?.join() === dpu2.encapIp
        )
      }, 30_000),
      "the reflector holds every host's /32 under its group's RT, via its DPU's VTEP",
    )

    // Packets: across DPUs within a group, never between the groups.
    t.ok(
      await eventually(() => pings(a1.netns, '10.10.0.12'), 20_000),
      'a1 (dpu1) reaches a2 (dpu2) over the fabric',
    )
    // The reflector having a route is not yet the other DPU's VRF having imported it.
    t.ok(
      await eventually(() => pings(b1.netns, '10.10.0.11'), 20_000),
      'b1 (dpu1) reaches b2 (dpu2) at 10.10.0.11',
    )
    const a1Echos = await icmpInEchos(a1.netns)
    t.ok(await eventually(() => pings(b2.netns, '10.10.0.13'), 20_000), 'b2 reaches b1')
    t.notOk(await pings(b1.netns, '10.10.0.12', 3), "b1 does not reach a2's address (fab-a's)")
    t.equal(
      await icmpInEchos(a1.netns),
      a1Echos,
      'a1, at the address b2 also holds, got no echo from fab-b',
    )

    // An Overlay group with the same network, on the same DPUs at once.
    const ov = await l.api('PUT', '/v1/resource-groups/ov', { tenantId: 'tenant-o', network })
    t.equal(ov.status, 202, 'ov: an Overlay group with 10.10.0.0/24')
    t.ok(await phaseIs(l, '/v1/resource-groups/ov', 'Ready', 90_000), 'ov is Ready')
    await add('o1', 1, 'ov', '10.10.0.21', 5)
    await add('o2', 2, 'ov', '10.10.0.22', 6)
    for (const name of ['o1', 'o2']) {
      const h = hosts[name]
      if (!h) continue
      if (!t.ok(await hostReady(l, name, 90_000), `${name} is Ready`)) t.comment(await why(name))
      await h.host.exec('ip', 'addr', 'add', `${h.ip}/24`, 'dev', 'eth0')
      await h.host.exec('ip', 'route', 'replace', 'default', 'via', network.gateway, 'dev', 'eth0')
    }
    const o1 = hosts.o1?.host as LabHost
    t.ok(
      await eventually(() => pings(o1.netns, '10.10.0.22'), 20_000),
      'o1 reaches o2 through the Overlay group',
    )
    const echos = await icmpInEchos(a1.netns)
    t.notOk(await pings(o1.netns, '10.10.0.11', 3), 'o1 does not reach 10.10.0.11 (a1, b2)')
    t.notOk(await pings(a1.netns, '10.10.0.21', 3), 'a1 does not reach o1')
    t.equal(await icmpInEchos(a1.netns), echos, 'a1 got no echo from the Overlay group')
    t.ok(await pings(a1.netns, '10.10.0.12'), 'a1 still reaches a2 with the Overlay group beside')

    // Detach: a2's /32 is withdrawn from the reflector, and a1 no longer reaches it.
    t.equal((await l.api('DELETE', '/v1/managed-resources/a2')).status, 202, 'detach a2')
    if (!t.ok(await isGone(l, '/v1/managed-resources/a2'), 'a2 is gone')) {
      t.comment(await why('a2'))
      const log = await readFile(join(dpu2.sim.dataDir, 'agent.log'), 'utf8').catch(() => '')
      t.comment(log.split('\n').slice(-15).join('\n'))
    }
    t.ok(
      await eventually(async () => {
        const routes = await l.router.evpnRoutes()
        return (
          !routes.has(`${rt('fab-a')}|10.10.0.12/32`) &&
          routes.has(`${rt('fab-a')}|10.10.0.11/32`) &&
          routes.has(`${rt('fab-b')}|10.10.0.11/32`)
        )
      }, 10_000),
      "the reflector lost a2's /32, and keeps the others",
    )
    t.notOk(await pings(a1.netns, '10.10.0.12', 3), 'a1 no longer reaches a2')
    t.ok(await pings(b1.netns, '10.10.0.11'), 'fab-b is untouched')
    const noFabA = await eventually(
      async () => !(await vrfsOf('dpu2')).some((v) => v.group === 'fab-a'),
    )
    if (!t.ok(noFabA, 'dpu2 holds no VRF of fab-a any more (a2 was its last host there)')) {
      t.comment(JSON.stringify(await vrfsOf('dpu2')))
      const log = await readFile(join(dpu2.sim.dataDir, 'agent.log'), 'utf8').catch(() => '')
      t.comment(log.split('\n').slice(-8).join('\n'))
    }
    t.ok(
      (await vrfsOf('dpu2')).some((v) => v.group === 'fab-b'),
      "fab-b's VRF stays on dpu2",
    )

    // Deleting a Fabric group detaches its hosts, withdraws them and gives its VNI back.
    t.equal((await l.api('DELETE', '/v1/resource-groups/fab-b')).status, 202, 'delete fab-b')
    t.ok(await isGone(l, '/v1/resource-groups/fab-b', 90_000), 'fab-b is gone')
    t.ok(
      await eventually(async () => {
        const routes = await l.router.evpnRoutes()
        return [...routes.keys()].every((k) => !k.startsWith(`${rt('fab-b')}|`))
      }, 10_000),
      "the reflector holds no route of fab-b's",
    )
    const again = await l.api('PUT', '/v1/resource-groups/fab-c', {
      tenantId: 'tenant-c',
      network,
      networkImplementationType: 'Fabric',
    })
    t.equal(again.status, 202, 'a new Fabric group fab-c')
    t.ok(await phaseIs(l, '/v1/resource-groups/fab-c', 'Ready'), 'fab-c is Ready')
    const fabC = (await l.api('GET', '/v1/resource-groups/fab-c')).body as GroupView
    t.equal(fabC.status?.fabric?.vni, vniOf['fab-b'], "fab-c takes fab-b's VNI, given back")
  },
)
