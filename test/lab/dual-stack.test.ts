/**
 * Dual-stack groups on the simulated data centre, with real packets: hosts configure
 * their IPv6 address themselves from the router advertisements of their group's router
 * (SLAAC), get the address Hydrazine reports (`status.hostAccessIPs.hostIPv6`), and reach
 * each other over IPv6 across DPUs, and their gateway; a host of another group on the
 * same /64 stays out of reach; names resolve to AAAA records in the group. The fabric is
 * dual-stack too: hosts' IPv6 leaves through NAT66 on their DPU, a FabricAccess host is
 * reached at its DPU's IPv6 NAT address, and a PublicAccess host's public /128 reaches
 * the fabric router over BGP.
 *
 * group-a (10.10.10.0/24, fd00:10::/64): a1 (dpu 1), a2 (dpu 2). group-b, the same
 * networks: b1 (dpu 3). group-c, IPv6 only (fd00:10::/64 alone): c1 (FabricAccess) and c2
 * (dpu 4).
 *
 * Run as root it must work (a lab that cannot start fails, saying why); without root it
 * is skipped, saying why (`lab-test.ts`).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { labPrefix } from '../../infra/lab/dpu.ts'
import { type Lab, type LabHost, startLab } from '../../infra/lab/lab.ts'
import { capture, eventually, netnsExec, pings } from '../../infra/lab/probes.ts'
import { DEFAULT_DNS_ZONE } from '../../lib/config/dns.ts'
import { eui64Address } from '../../lib/ipam/address.ts'
import { dnsDomain } from '../../lib/ovn/index.ts'
import { attachHost, hostReady, phaseIs } from './api.ts'
import { labTest } from './lab-test.ts'

const network = { cidr: '10.10.10.0/24', gateway: '10.10.10.1' }
const network6 = { cidr: 'fd00:10::/64', gateway: 'fd00:10::1' }

/** The global IPv6 addresses on the host's eth0 (what SLAAC configured). */
async function globalAddresses(host: LabHost): Promise<string[]> {
  const out = await host.exec('ip', '-6', '-o', 'addr', 'show', 'dev', 'eth0', 'scope', 'global')
  return [...out.matchAll(/inet6 ([0-9a-f:]+)\/64/g)].map((m) => m[1] ?? '')
}

await labTest('dual-stack: SLAAC addresses, IPv6 between hosts across DPUs', async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), 'hz-lab-dual-stack-'))
  let lab: Lab | undefined
  t.teardown(async () => {
    await lab?.stop()
    await rm(dataDir, { recursive: true, force: true, maxRetries: 5 })
  })
  lab = await startLab({ dataDir, prefix: labPrefix(), dpus: 4 })
  const l = lab

  for (const [group, tenantId] of [
    ['group-a', 'tenant-a'],
    ['group-b', 'tenant-b'],
  ] as const) {
    const put = await l.api('PUT', `/v1/resource-groups/${group}`, { tenantId, network, network6 })
    t.equal(put.status, 202, `${group} with network6 is accepted`)
    t.ok(await phaseIs(l, `/v1/resource-groups/${group}`, 'Ready'), `${group} is Ready`)
  }
  const specs: [dpu: number, name: string, group: string, ip: string][] = [
    [1, 'a1', 'group-a', '10.10.10.11'],
    [2, 'a2', 'group-a', '10.10.10.12'],
    [3, 'b1', 'group-b', '10.10.10.21'],
  ]
  const hosts = new Map<string, { host: LabHost; ip6: string }>()
  for (const [dpu, name, group, ip] of specs) {
    const mac = `0a:00:00:00:0d:${ip.split('.')[3]}`
    const host = await l.addHost({ dpu, name, mac, ipCidr: `${ip}/24`, ipv6: true })
    hosts.set(name, { host, ip6: eui64Address(network6.cidr, mac) })
    t.ok((await attachHost(l, host, group, ip)).status < 300, `attach ${name}`)
  }
  for (const [name, { ip6 }] of hosts) {
    t.ok(await hostReady(l, name), `${name} is Ready`)
    const body = (await l.api('GET', `/v1/managed-resources/${name}`)).body as {
      status?: { hostAccessIPs?: { hostIPv6?: string } }
    }
    t.equal(body.status?.hostAccessIPs?.hostIPv6, ip6, `${name}'s status reports ${ip6}`)
  }
  const a1 = hosts.get('a1')
  const a2 = hosts.get('a2')
  const b1 = hosts.get('b1')
  if (!a1 || !a2 || !b1) throw new Error('hosts missing')

  await t.test(
    "each host configures the address Hydrazine reports (the router's RA)",
    async (t) => {
      for (const [name, { host, ip6 }] of hosts) {
        t.ok(
          await eventually(async () => (await globalAddresses(host)).includes(ip6), 60_000, 1000),
          `${name} has ${ip6} on eth0`,
        )
      }
      const route = await a1.host.exec('ip', '-6', 'route', 'show', 'default')
      t.match(route, /via fe80::/, "a1's default IPv6 route is the router's link-local address")
    },
  )

  await t.test('IPv6 between hosts of the group across DPUs, and to the gateway', async (t) => {
    t.ok(await eventually(() => pings(a1.host.netns, a2.ip6), 30_000), 'a1 (dpu 1) → a2 (dpu 2)')
    t.ok(await pings(a2.host.netns, a1.ip6), 'a2 → a1')
    t.ok(await eventually(() => pings(a1.host.netns, network6.gateway), 20_000), 'a1 → fd00:10::1')
  })

  await t.test('another group on the same /64 stays out of reach', async (t) => {
    t.ok(
      await eventually(() => pings(b1.host.netns, network6.gateway), 30_000),
      'b1 reaches its own gateway',
    )
    t.notOk(await pings(a1.host.netns, b1.ip6, 3), "a1 does not reach group-b's b1")
    t.notOk(await pings(b1.host.netns, a2.ip6, 3), "b1 does not reach group-a's a2")
  })

  await t.test("a host's name has its AAAA record in its group", async (t) => {
    const name = `a2.${dnsDomain('group-a', DEFAULT_DNS_ZONE)}`
    const dig = (host: LabHost) =>
      host
        .exec(
          'dig',
          '+short',
          '+noedns',
          '+time=1',
          '+tries=1',
          `@${network.gateway}`,
          'AAAA',
          name,
        )
        .catch(() => '')
    t.ok(
      await eventually(async () => (await dig(a1.host)).includes(a2.ip6), 30_000),
      `a1: ${name} AAAA is ${a2.ip6}`,
    )
    t.equal((await dig(b1.host)).trim(), '', 'group-b does not resolve it')
  })

  await t.test('IPv6 to the fabric (NAT66) and a public /128 over BGP', async (t) => {
    const [dpu1, dpu2] = l.dpus
    if (!dpu1 || !dpu2) throw new Error('DPUs missing')
    const router = l.router
    const publicIp6 = '2001:db8:ff::10'
    for (const ip of [publicIp6, '203.0.113.10']) {
      t.equal((await l.api('PUT', `/v1/public-ips/${ip}`, {})).status, 200, `public IP ${ip}`)
    }
    t.ok((await attachHost(l, a1.host, 'group-a', '10.10.10.11', 'PublicAccess')).status < 300)
    t.ok((await attachHost(l, a2.host, 'group-a', '10.10.10.12', 'FabricAccess')).status < 300)
    for (const name of ['a1', 'a2']) t.ok(await hostReady(l, name), `${name} is Ready again`)
    const ips = async (name: string) =>
      (
        (await l.api('GET', `/v1/managed-resources/${name}`)).body as {
          status?: { hostAccessIPs?: { fabricIPv6?: string; publicIPv6?: string } }
        }
      ).status?.hostAccessIPs
    t.equal((await ips('a1'))?.publicIPv6, publicIp6, "a1's status has its public IPv6")
    t.equal(
      (await ips('a2'))?.fabricIPv6,
      dpu2.natIp6,
      "a2's status has its DPU's IPv6 NAT address",
    )

    t.ok(
      await eventually(
        async () => (await router.bgpRoutes6()).get(`${publicIp6}/128`) === dpu1.natIp6,
        30_000,
      ),
      `the fabric router learned ${publicIp6}/128 via ${dpu1.natIp6}`,
    )
    t.ok(
      await eventually(() => pings(router.netns, publicIp6, 1), 20_000),
      'router → a1 at its public IPv6',
    )
    t.ok(
      await eventually(() => pings(a1.host.netns, router.internetIp6, 1), 20_000),
      'a1 → the internet over IPv6',
    )
    const seen = await capture(router.netns, `icmp6 and dst host ${router.internetIp6}`, () =>
      pings(a1.host.netns, router.internetIp6, 1),
    )
    t.match(seen, `${publicIp6} > ${router.internetIp6}`, 'leaving as its public address')
    t.ok(
      await eventually(() => pings(router.netns, dpu2.natIp6, 1), 20_000),
      "router → a2 at its DPU's IPv6 NAT address",
    )
    const reached = await capture(a2.host.netns, `icmp6 and src host ${router.ip6}`, () =>
      pings(router.netns, dpu2.natIp6, 1),
    )
    t.match(reached, `${router.ip6} > ${a2.ip6}`, 'answered by a2 itself (NAT66 to its address)')
    t.ok(
      await eventually(() => pings(a2.host.netns, router.internetIp6, 1), 20_000),
      'a2 → the internet over IPv6',
    )
    t.ok(
      await eventually(() => pings(b1.host.netns, router.internetIp6, 1), 20_000),
      "b1 (no access) reaches out too, as dpu3's IPv6 NAT address, like IPv4",
    )

    // Routing the tenant's /64 at a gateway router (by its DPU's IPv6 NAT address)
    // reaches no host at its private address: the fabric gets in through NAT66 only.
    const dpu3 = l.dpus[2]
    if (!dpu3) throw new Error('DPU 3 missing')
    for (const [dpu, host] of [
      [dpu1, a1],
      [dpu2, a1],
      [dpu3, b1],
    ] as const) {
      const target = host.ip6
      await netnsExec(
        router.netns,
        'ip',
        '-6',
        'route',
        'replace',
        `${target}/128`,
        'via',
        dpu.natIp6,
      )
      const seen = await capture(
        host.host.netns,
        `icmp6 and src host ${router.ip6}`,
        async () =>
          t.notOk(await pings(router.netns, target, 2), `fabric → ${target} via ${dpu.natIp6}`),
        3000,
      )
      t.equal(seen, '', `${host.host.name} saw none of those pings`)
      await netnsExec(router.netns, 'ip', '-6', 'route', 'del', `${target}/128`)
    }

    t.ok((await attachHost(l, a1.host, 'group-a', '10.10.10.11', 'None')).status < 300)
    t.ok(await hostReady(l, 'a1'), 'a1 is Ready without access')
    t.ok(
      await eventually(async () => !(await router.bgpRoutes6()).has(`${publicIp6}/128`), 30_000),
      'its /128 is withdrawn',
    )
    const pool = (await l.api('GET', `/v1/public-ips/${publicIp6}`)).body as { allocated?: boolean }
    t.equal(pool.allocated, false, 'and the address is back in the pool')
  })

  await t.test('an IPv6-only group: its hosts reach each other and their gateway', async (t) => {
    const put = await l.api('PUT', '/v1/resource-groups/group-c', {
      tenantId: 'tenant-c',
      network6,
    })
    t.equal(put.status, 202, 'group-c with network6 alone is accepted')
    t.ok(await phaseIs(l, '/v1/resource-groups/group-c', 'Ready'), 'group-c is Ready')
    const c: { host: LabHost; ip6: string }[] = []
    for (const n of [1, 2]) {
      const mac = `0a:00:00:00:0c:0${n}`
      const host = await l.addHost({ dpu: 4, name: `c${n}`, mac, ipv6: true })
      c.push({ host, ip6: eui64Address(network6.cidr, mac) })
      const access = n === 1 ? 'FabricAccess' : 'None'
      t.ok((await attachHost(l, host, 'group-c', undefined, access)).status < 300, `attach c${n}`)
    }
    const [c1, c2] = c
    if (!c1 || !c2) throw new Error('hosts missing')
    for (const { host, ip6 } of c) {
      t.ok(await hostReady(l, host.name), `${host.name} is Ready`)
      t.ok(
        await eventually(async () => (await globalAddresses(host)).includes(ip6), 60_000, 1000),
        `${host.name} configured ${ip6}`,
      )
    }
    t.ok(await eventually(() => pings(c1.host.netns, c2.ip6), 30_000), 'c1 → c2 over IPv6')
    t.ok(await eventually(() => pings(c1.host.netns, network6.gateway), 20_000), 'c1 → its gateway')
    t.notOk(await pings(c1.host.netns, a1.ip6, 3), "c1 does not reach group-a's a1 (same /64)")
    const dpu4 = l.dpus[3]
    if (!dpu4) throw new Error('DPU 4 missing')
    t.ok(
      await eventually(() => pings(l.router.netns, dpu4.natIp6, 1), 20_000),
      "c1 (FabricAccess, IPv6 only) is reached at its DPU's IPv6 NAT address",
    )
    const reached = await capture(c1.host.netns, `icmp6 and src host ${l.router.ip6}`, () =>
      pings(l.router.netns, dpu4.natIp6, 1),
    )
    t.match(reached, `${l.router.ip6} > ${c1.ip6}`, 'by c1 itself')
    t.ok(
      await eventually(() => pings(c2.host.netns, l.router.internetIp6, 1), 20_000),
      'c2 (None) goes out over IPv6',
    )
  })
})
