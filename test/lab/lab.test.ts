/**
 * The whole system on a simulated data centre, proven with real packets: Hydrazine
 * (`infra/main.ts`) driven only through its HTTP API, three DPUs running the real agent,
 * a fabric router peering over BGP, hosts as namespaces, dnsmasq as the DHCP server.
 *
 * Run as root it must work (a lab that cannot start fails, saying why); without root it
 * is skipped, saying why (`lab-test.ts`).
 */
import { access, mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { labPrefix } from '../../infra/lab/dpu.ts'
import { type Lab, type LabDpu, type LabHost, startLab } from '../../infra/lab/lab.ts'
import { capture, eventually, icmpInEchos, netnsExec, pings } from '../../infra/lab/probes.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { southboundAnswer } from '../helpers/southbound.ts'
import { attachHost, type HostAccess, hostReady, isGone, phaseIs } from './api.ts'
import { labTest } from './lab-test.ts'

const missing = (path: string) =>
  access(path).then(
    () => false,
    () => true,
  )

interface HostView {
  status?: {
    phase?: string
    hostAccessIPs?: { hostIP?: string; fabricIP?: string; publicIP?: string }
  }
}

await labTest('Hydrazine on a simulated data centre', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'hz-lab-'))
  const prefix = labPrefix()
  let lab: Lab | undefined
  t.teardown(async () => {
    await lab?.stop()
    await rm(dataDir, { recursive: true, force: true, maxRetries: 5 })
  })
  lab = await startLab({ dataDir, prefix })
  const l = lab
  const [dpu1, dpu2, dpu3] = l.dpus
  if (!dpu1 || !dpu2 || !dpu3) throw new Error('three DPUs expected')
  t.equal(l.redisScheme, 'rediss:', 'on the fabric Redis is TLS only')

  const put = async (path: string, body: unknown) => {
    const answer = await l.api('PUT', path, body)
    t.ok(answer.status < 300, `PUT ${path} → ${answer.status} ${JSON.stringify(answer.body)}`)
  }
  const hostView = async (name: string) =>
    (await l.api('GET', `/v1/managed-resources/${name}`)).body as HostView
  const attach = async (
    host: LabHost,
    group: string,
    ip: string | undefined,
    hostAccess: HostAccess = 'None',
  ) => {
    const answer = await attachHost(l, host, group, ip, hostAccess)
    t.ok(
      answer.status < 300,
      `attach ${host.name} → ${answer.status} ${JSON.stringify(answer.body)}`,
    )
  }
  const ready = async (name: string) => t.ok(await hostReady(l, name), `${name} is Ready`)

  // ── group A across DPU1 and DPU2 ───────────────────────────────────────────
  const network = { cidr: '10.10.10.0/24', gateway: '10.10.10.1' }
  await put('/v1/resource-groups/group-a', {
    tenantId: 'tenant-a',
    network,
    dhcpServer: l.dhcpServerIp,
  })
  await put('/v1/resource-groups/group-b', { tenantId: 'tenant-b', network })
  t.ok(await phaseIs(l, '/v1/resource-groups/group-a', 'Ready'), 'group A is Ready')
  t.ok(await phaseIs(l, '/v1/resource-groups/group-b', 'Ready'), 'group B is Ready')

  const route = (h: LabHost) =>
    h.exec('ip', 'route', 'replace', 'default', 'via', network.gateway, 'dev', 'eth0')
  const a1 = await l.addHost({
    dpu: 1,
    name: 'a1',
    mac: '0a:00:00:00:0a:01',
    ipCidr: '10.10.10.11/24',
  })
  const a2 = await l.addHost({
    dpu: 2,
    name: 'a2',
    mac: '0a:00:00:00:0a:02',
    ipCidr: '10.10.10.12/24',
  })
  const b1 = await l.addHost({
    dpu: 3,
    name: 'b1',
    mac: '0a:00:00:00:0b:01',
    ipCidr: '10.10.10.11/24',
  })
  const b2 = await l.addHost({
    dpu: 3,
    name: 'b2',
    mac: '0a:00:00:00:0b:02',
    ipCidr: '10.10.10.12/24',
  })
  for (const h of [a1, a2, b1, b2]) await route(h)
  await attach(a1, 'group-a', '10.10.10.11', 'FabricAccess')
  await attach(a2, 'group-a', '10.10.10.12')
  await attach(b1, 'group-b', '10.10.10.11')
  await attach(b2, 'group-b', '10.10.10.12')
  for (const h of ['a1', 'a2', 'b1', 'b2']) await ready(h)
  // A group's central runs once it has hosts (centrals on demand).
  const centralA = await l.central('group-a')
  const centralB = await l.central('group-b')
  t.match(centralA.sb, /^ssl:/, "on the fabric a group's SB is ssl: (chassis certificates, RBAC)")
  t.match(centralB.sb, /^ssl:/, 'for every group')
  t.not(centralA.sb, centralB.sb, 'each group has its own central: two SBs')
  t.not(centralA.nb, centralB.nb, 'and two NBs')

  await t.test(
    'group A: hosts on two DPUs reach each other over Geneve and the gateway',
    async (t) => {
      t.ok(await eventually(() => pings(a1.netns, '10.10.10.12'), 20_000), 'a1 → a2')
      t.ok(await pings(a2.netns, '10.10.10.11'), 'a2 → a1')
      t.ok(await pings(a1.netns, network.gateway), 'a1 → gateway')
      t.ok(await pings(a2.netns, network.gateway), 'a2 → gateway')
    },
  )

  await t.test("each group's SB admits its own DPUs' certificates only", async (t) => {
    // What each agent presents (`sb-client.crt`, with its own key) and the CA it trusts
    // for its SB (`sb-ca.crt`: its group's), tried from outside.
    const answer = (
      sb: string,
      dpu: LabDpu,
      cert = join(dpu.sim.dataDir, 'agent', 'sb-client.crt'),
      ca = join(dpu.sim.dataDir, 'agent', 'sb-ca.crt'),
    ) => southboundAnswer(sb, { key: join(dpu.sim.dataDir, 'credentials', 'dpu.key'), cert, ca })
    const a1 = await answer(centralA.sb, dpu1)
    t.ok(
      a1.state === 'admitted' && a1.chassis.includes(dpu1.id),
      `DPU1's certificate opens group A's SB, which lists it (${JSON.stringify(a1)})`,
    )
    t.match(await answer(centralB.sb, dpu3), { state: 'admitted' }, "DPU3's opens group B's")
    t.same(
      await answer(centralB.sb, dpu1),
      { state: 'refused' },
      "group A's DPU cannot reach group B's SB",
    )
    t.same(
      await answer(centralA.sb, dpu3),
      { state: 'refused' },
      "group B's DPU cannot reach group A's SB",
    )
    t.same(
      await answer(centralB.sb, dpu1, join(dpu1.sim.dataDir, 'credentials', 'dpu.crt')),
      { state: 'refused' },
      "nor with its identity from Hydrazine's CA",
    )
    // ovn-controller's side: trusting group A's CA, DPU1 takes group B's SB for none of its
    // own, though that SB admits what DPU3 presents; trusting Hydrazine's, none at all.
    const asDpu3 = (ca: string) => answer(centralB.sb, dpu3, undefined, ca)
    t.same(
      await asDpu3(join(dpu1.sim.dataDir, 'agent', 'sb-ca.crt')),
      { state: 'refused' },
      "group B's SB is not group A's",
    )
    t.same(
      await asDpu3(join(dpu3.sim.dataDir, 'credentials', 'ca.crt')),
      { state: 'refused' },
      "no group's SB presents a certificate of Hydrazine's CA",
    )
  })

  await t.test('group B (same CIDR and IPs) reaches only its own hosts', async (t) => {
    t.ok(await eventually(() => pings(b1.netns, '10.10.10.12'), 20_000), 'b1 → b2')
    t.ok(await pings(b1.netns, network.gateway), 'b1 → its gateway')
    const a2Before = await icmpInEchos(a2.netns)
    const b2Before = await icmpInEchos(b2.netns)
    t.ok(await pings(b1.netns, '10.10.10.12', 3), 'b1 → 10.10.10.12 answered')
    t.equal(await icmpInEchos(a2.netns), a2Before, "group A's a2 saw none of b1's pings")
    t.equal(await icmpInEchos(b2.netns), b2Before + 3, "group B's b2 answered them")
    const a1Before = await icmpInEchos(a1.netns)
    t.ok(await pings(a2.netns, '10.10.10.11', 2), 'a2 → 10.10.10.11 answered')
    t.equal(await icmpInEchos(b1.netns), 0, 'b1 never saw a ping from group A')
    t.equal(await icmpInEchos(a1.netns), a1Before + 2, 'a1 answered a2')
  })

  await t.test("a port left on another DPU with a host's iface-id never takes it", async (t) => {
    // What a forced detach can leave behind: an OVS port on dpu1 still naming a2's
    // logical port. Its machine (with a2's MAC and address) must get none of a2's traffic.
    const rogue = await l.addHost({
      dpu: 1,
      name: 'rogue',
      mac: a2.mac,
      ipCidr: '10.10.10.12/24',
    })
    const logicalPort = topologyNames.hostPort('group-a', 'a2')
    await dpu1.sim.vsctl(
      'add-port',
      'br-int',
      rogue.hostPort,
      '--',
      'set',
      'Interface',
      rogue.hostPort,
      `external_ids:iface-id=${logicalPort}`,
    )
    t.teardown(() => dpu1.sim.vsctl('--if-exists', 'del-port', 'br-int', rogue.hostPort))
    await new Promise((r) => setTimeout(r, 3000))
    const before = await icmpInEchos(a2.netns)
    for (let i = 0; i < 4; i++) {
      t.ok(await pings(a1.netns, '10.10.10.12', 2), `a1 → 10.10.10.12 answered (${i + 1})`)
    }
    t.equal(await icmpInEchos(rogue.netns), 0, 'the rogue port saw none of it')
    t.equal(await icmpInEchos(a2.netns), before + 8, 'a2 answered every ping')
  })

  await t.test('FabricAccess: the host leaves as its NAT IP and is reached at it', async (t) => {
    const seen = await capture(l.router.netns, `icmp and dst host ${l.router.internetIp}`, () =>
      eventually(() => pings(a1.netns, l.router.internetIp, 1), 20_000),
    )
    t.match(seen, new RegExp(`${dpu1.natIp.replaceAll('.', '\\.')} > ${l.router.internetIp}`))
    const before = await icmpInEchos(a1.netns)
    t.ok(await pings(l.router.netns, dpu1.natIp, 2), 'router → NAT IP answered')
    t.equal(await icmpInEchos(a1.netns), before + 2, 'by a1 itself')
  })

  await t.test('the fabric reaches no host at its private address', async (t) => {
    // A fabric host that routes the tenant's network at a gateway router (by its DPU's
    // NAT IP, which that router answers ARP for) must still reach nothing but what the
    // group's NAT rules expose.
    const router = (...args: string[]) => netnsExec(l.router.netns, ...args)
    for (const [dpu, host, target] of [
      [dpu2, a2, '10.10.10.12'],
      [dpu1, a2, '10.10.10.12'],
      [dpu1, a1, '10.10.10.11'],
    ] as const) {
      await router('ip', 'route', 'replace', `${target}/32`, 'via', dpu.natIp)
      const before = await icmpInEchos(host.netns)
      t.notOk(await pings(l.router.netns, target, 2), `fabric → ${target} via ${dpu.natIp}`)
      t.equal(await icmpInEchos(host.netns), before, `${host.name} saw none of those pings`)
      await router('ip', 'route', 'del', `${target}/32`)
    }
    await router('ip', 'route', 'replace', `${network.gateway}/32`, 'via', dpu1.natIp)
    t.notOk(await pings(l.router.netns, network.gateway, 1), "fabric → the group's gateway")
    await router('ip', 'route', 'del', `${network.gateway}/32`)
    t.ok(await pings(l.router.netns, dpu1.natIp, 1), 'the NAT IP still answers')
  })

  await t.test('PublicAccess: BGP route to the public IP, then gone on release', async (t) => {
    const publicIp = '203.0.113.10'
    await put(`/v1/public-ips/${publicIp}`, {})
    await attach(a2, 'group-a', '10.10.10.12', 'PublicAccess')
    await ready('a2')
    t.equal((await hostView('a2')).status?.hostAccessIPs?.publicIP, publicIp)
    t.ok(
      await eventually(
        async () => (await l.router.bgpRoutes()).get(`${publicIp}/32`) === dpu2.natIp,
        30_000,
      ),
      `the fabric router learned ${publicIp}/32 via ${dpu2.natIp}`,
    )
    t.comment(await l.router.vtysh('show ip bgp'))
    const before = await icmpInEchos(a2.netns)
    t.ok(await eventually(() => pings(l.router.netns, publicIp, 1), 10_000), 'router → public IP')
    t.ok((await icmpInEchos(a2.netns)) > before, 'answered by a2')

    // Released by detaching the host. (Setting hostAccess back to None does not release
    // it yet: host.attach never withdraws a public IP; only host.detach does.)
    const answer = await l.api('DELETE', '/v1/managed-resources/a2')
    t.ok(answer.status < 300, `DELETE a2 → ${answer.status}`)
    t.ok(await isGone(l, '/v1/managed-resources/a2'), 'a2 is gone')
    t.ok(
      await eventually(async () => !(await l.router.bgpRoutes()).has(`${publicIp}/32`), 30_000),
      'the route is withdrawn',
    )
    t.notOk(await pings(l.router.netns, publicIp, 1), 'the public IP no longer answers')
    const pip = (await l.api('GET', `/v1/public-ips/${publicIp}`)).body as { allocated?: boolean }
    t.equal(pip.allocated, false, 'the public IP is back in its pool')
  })

  await t.test(
    "DHCP through the group's relay: the IPAM address, tagged with the circuit id",
    async (t) => {
      const d1 = await l.addHost({ dpu: 1, name: 'd1', mac: '0a:00:00:00:0a:d1' })
      await attach(d1, 'group-a', undefined)
      await ready('d1')
      const ip = (await hostView('d1')).status?.hostAccessIPs?.hostIP ?? ''
      t.match(ip, /^10\.10\.10\.\d+$/, `IPAM gave d1 ${ip}`)
      // The circuit id is the group's, as its status tells Carbide.
      const group = (await l.api('GET', '/v1/resource-groups/group-a')).body as {
        status?: { dhcpCircuitId?: string }
      }
      const circuitId = group.status?.dhcpCircuitId ?? ''
      t.match(circuitId, /^hzr[0-9a-f]{8}$/, `group-a relays with circuit id ${circuitId}`)
      await l.configureDhcp([{ circuitId, ...network, leases: [{ mac: d1.mac, ip }] }])
      const got = await d1
        .exec(
          'timeout',
          '25',
          'dhclient',
          '-1',
          '-v',
          '-pf',
          join(dataDir, 'd1.pid'),
          '-lf',
          join(dataDir, 'd1.leases'),
          'eth0',
        )
        .then(() => true)
        .catch((error: unknown) => {
          t.comment(String(error))
          return false
        })
      t.teardown(() =>
        d1.exec('dhclient', '-x', '-pf', join(dataDir, 'd1.pid')).catch(() => undefined),
      )
      t.ok(got, 'dhclient got a lease')
      t.match(
        await d1.exec('ip', '-4', 'addr', 'show', 'eth0'),
        new RegExp(`inet ${ip.replaceAll('.', '\\.')}/24`),
        'the address IPAM chose',
      )
      t.ok(await pings(d1.netns, network.gateway), 'd1 → its gateway, on the leased address')
      const log = await readFile(l.dhcpLog, 'utf8')
      t.comment(
        log
          .split('\n')
          .filter((line) => /DHCP|circuit/i.test(line))
          .join('\n'),
      )
      // dnsmasq logs option 82 in hex: sub-option 1 (circuit id), length, the name.
      const hex = [...Buffer.from(circuitId)].map((b) => b.toString(16).padStart(2, '0'))
      const agentId = ['01', circuitId.length.toString(16).padStart(2, '0'), ...hex].join(':')
      t.match(log, agentId, `the request carried the relay port ${circuitId} as circuit id`)
      t.match(log, /DHCPDISCOVER\(\S+\) 0a:00:00:00:0a:d1 \n.*\n?.*tags: known, g0/, 'tagged by it')
      t.match(log, new RegExp(`DHCPACK\\(\\S+\\) ${ip.replaceAll('.', '\\.')} ${d1.mac}`))
    },
  )

  await t.test('detach: the host reaches nothing any more', async (t) => {
    const answer = await l.api('DELETE', '/v1/managed-resources/a1')
    t.ok(answer.status < 300, `DELETE a1 → ${answer.status}`)
    t.ok(await isGone(l, '/v1/managed-resources/a1'), 'a1 is gone')
    t.notOk(await pings(a1.netns, '10.10.10.12', 1), 'a1 → a2 fails')
    t.notOk(await pings(a1.netns, network.gateway, 1), 'a1 → gateway fails')
    t.notOk(await pings(a1.netns, l.router.internetIp, 1), 'a1 → fabric fails')
    t.notOk(await pings(l.router.netns, dpu1.natIp, 1), 'fabric → a1 fails')
  })

  await t.test('teardown: every host isolated, the centrals gone, IPs back', async (t) => {
    const hosts = l.hosts.filter((h) => h.name !== 'a1')
    for (const h of hosts) await l.api('DELETE', `/v1/managed-resources/${h.name}`)
    for (const h of hosts) {
      t.ok(await isGone(l, `/v1/managed-resources/${h.name}`), `${h.name} is gone`)
    }
    for (const g of ['group-a', 'group-b']) {
      const ports = await l.nbctl(g, '--bare', '--columns=name', 'list', 'Logical_Switch_Port')
      for (const h of l.hosts)
        t.notMatch(ports, topologyNames.hostPort(g, h.name), `${g}'s NB: no port of ${h.name}`)
      const central = await l.central(g)
      await l.api('DELETE', `/v1/resource-groups/${g}`)
      t.ok(await isGone(l, `/v1/resource-groups/${g}`), `${g} is gone`)
      t.ok(
        await eventually(() => missing(central.dir), 30_000),
        `and its central with it: ${central.dir} removed`,
      )
    }
    t.notOk(await pings(a2.netns, network.gateway, 1), 'a2 isolated')
    t.notOk(await pings(b1.netns, '10.10.10.12', 1), 'b1 isolated')
    const pips = (await l.api('GET', '/v1/public-ips')).body as {
      items?: { ip: string; allocated?: boolean; allocatedTo?: string }[]
    }
    t.ok(
      (pips.items ?? []).every((p) => !p.allocatedTo),
      `every public IP free: ${JSON.stringify(pips.items)}`,
    )
  })
})
