/**
 * Dual-stack groups through the whole pipeline, on real OVN with stand-in agents: a
 * group's `network6` reaches NB as the router's IPv6 gateway with router advertisements
 * for SLAAC; each host's status, port and DNS name carry its SLAAC address (its MAC's
 * EUI-64 identifier) beside its IPv4 one; a second host with the same MAC cannot take
 * that address; a detach gives it back. Two groups may use the same /64.
 */
import t from 'tap'
import { createApp } from '../../api/http/app.ts'
import { storeAnnouncementSource } from '../../functions/internal/announcements.ts'
import { DNS_BATCH_MS } from '../../functions/internal/group-apply.ts'
import { eui64Address } from '../../lib/ipam/address.ts'
import type { ChangePlan } from '../../lib/model/plans.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { jsonCaller } from '../helpers/http.ts'
import { OPERATOR, TEST_TOKENS } from '../helpers/tokens.ts'
import { dpuFabricIps, groupSpec, hostSpec, startPipeline, until } from './fixtures.ts'
import { startPipelineFrr } from './scenarios.ts'

const NETWORK6 = { cidr: 'fd00:10::/64', gateway: 'fd00:10::1' }

t.test('a dual-stack group: SLAAC on the router, both addresses on every host', async (t) => {
  const p = await startPipeline(t, { dnsZone: 'hydrazine.test' })
  await p.agent('dpu-1')
  await p.agent('dpu-2')
  await p.agent('dpu-3')
  for (const [group, tenant] of [
    ['group-a', 'tenant-a'],
    ['group-b', 'tenant-b'],
  ] as const) {
    await p.client.applyGroup(group, { ...groupSpec(tenant), network6: NETWORK6 })
  }
  const hosts = [
    { name: 'a1', group: 'group-a', dpu: 'dpu-1', mac: '0a:00:00:00:00:01' },
    { name: 'a2', group: 'group-a', dpu: 'dpu-2', mac: '0a:00:00:00:00:02' },
    // The same MAC as a1 in another group: the same SLAAC address, in its own network.
    { name: 'b1', group: 'group-b', dpu: 'dpu-3', mac: '0a:00:00:00:00:01' },
  ]
  for (const [i, h] of hosts.entries()) {
    await p.client.applyHost(h.name, hostSpec(h.group, h.dpu, i + 1, { hostMAC: h.mac }))
  }
  for (const h of hosts) {
    const ready = await until(
      () => p.controller.store.hosts.get(h.name),
      (x) => x?.status.phase === 'Ready',
    )
    const ip6 = eui64Address(NETWORK6.cidr, h.mac)
    t.equal(ready?.status.hostAccessIPs?.hostIPv6, ip6, `${h.name} is Ready with ${ip6}`)
    const port = await p.switchPort(topologyNames.hostPort(h.group, h.name))
    const ip4 = ready?.status.hostAccessIPs?.hostIP
    t.same(port?.addresses, [`${h.mac} ${ip4} ${ip6}`], `${h.name}'s port holds both addresses`)
    t.same(port?.portSecurity, [`${h.mac} ${ip4} ${ip6}`], 'and is locked to both')
  }

  await t.test("the group's router is the IPv6 gateway and advertises the /64", async (t) => {
    const port = topologyNames.routerSwitchPort('group-a')
    const networks = await p.nbctl('get', 'Logical_Router_Port', port, 'networks')
    t.match(networks, /"fd00:10::1\/64"/, 'the router port holds the IPv6 gateway')
    const ra = await p.nbctl('get', 'Logical_Router_Port', port, 'ipv6_ra_configs')
    t.match(ra, /address_mode=slaac/, 'RAs announce the prefix for SLAAC')
    t.match(ra, /send_periodic="?true/, 'periodically')
  })

  await t.test("a host's DNS name resolves to both addresses", async (t) => {
    // Its records ride with the group's next DNS change (at most DNS_BATCH_MS after the
    // last), not always with its Ready.
    const records = await until(
      () =>
        p.nbctl('--bare', '--columns=records', 'find', 'DNS', 'external_ids:hydrazine\\:host=a1'),
      (r) => r.includes('a1.group-a.hydrazine.test'),
      DNS_BATCH_MS + 10_000,
    )
    const ip6 = eui64Address(NETWORK6.cidr, '0a:00:00:00:00:01')
    t.match(records, `a1.group-a.hydrazine.test=10.10.10.`, 'A')
    t.match(records, new RegExp(`a1.group-a.hydrazine.test=10\\.10\\.10\\.\\d+ ${ip6}`), 'and AAAA')
    t.match(records, /\.ip6\.arpa=a1\.group-a\.hydrazine\.test/, 'and its IPv6 PTR')
  })

  await t.test('the address map shows who holds each SLAAC address', async (t) => {
    const map = await p.client.groupIpam('group-a')
    t.equal(map.subnets.find((s) => s.cidr === NETWORK6.cidr)?.used, 2, 'two held in network6')
    t.same(
      map.allocations.filter((a) => a.ip.includes(':')),
      [
        { owner: 'ipv6/a1', ip: eui64Address(NETWORK6.cidr, '0a:00:00:00:00:01') },
        { owner: 'ipv6/a2', ip: eui64Address(NETWORK6.cidr, '0a:00:00:00:00:02') },
      ],
      "each by its host's IPv6 owner",
    )
  })

  await t.test('a dry run plans the SLAAC address, and its release', async (t) => {
    const call = jsonCaller(
      createApp({ readiness: {}, v1: { client: p.client, tokens: TEST_TOKENS } }),
      OPERATOR,
    )
    const mac = '0a:00:00:00:00:05'
    const attach = await call(
      'PUT',
      '/v1/managed-resources/a5?dryRun=true',
      hostSpec('group-a', 'dpu-1', 5, { hostMAC: mac }),
    )
    t.equal(attach.status, 200, JSON.stringify(attach.json))
    t.match(attach.json.addresses.allocate, [
      { pool: 'group', owner: 'a5' },
      { pool: 'group', owner: 'ipv6/a5', ip: eui64Address(NETWORK6.cidr, mac) },
    ])
    const detach = await call('DELETE', '/v1/managed-resources/a1?dryRun=true')
    t.match(detach.json.addresses.release, [
      { owner: 'a1' },
      { owner: 'ipv6/a1', ip: eui64Address(NETWORK6.cidr, '0a:00:00:00:00:01') },
    ])
  })

  await t.test("a trace to an IPv6 address goes from the host's SLAAC address", async (t) => {
    const call = jsonCaller(
      createApp({ readiness: {}, v1: { client: p.client, tokens: TEST_TOKENS } }),
      OPERATOR,
    )
    const a1 = eui64Address(NETWORK6.cidr, '0a:00:00:00:00:01')
    const a2 = eui64Address(NETWORK6.cidr, '0a:00:00:00:00:02')
    const to = async (address: string) =>
      (await call('GET', `/v1/trace?from=a1&to=${encodeURIComponent(address)}`)).json
    t.match(
      await to(a2),
      { verdict: 'delivered', from: { ip: a1 }, to: { ip: a2 } },
      'a1 → a2 over IPv6: delivered to a2',
    )
    t.match(
      await to(eui64Address(NETWORK6.cidr, '0a:00:00:00:00:99')),
      { from: { ip: a1 }, verdict: 'unresolved' },
      'an address no host of the group has: nobody answers',
    )
  })

  await t.test('a second host with the same MAC in the group fails, saying why', async (t) => {
    await p.client.applyHost(
      'a3',
      hostSpec('group-a', 'dpu-2', 9, { hostMAC: '0a:00:00:00:00:01' }),
    )
    const failed = await until(
      () => p.controller.store.hosts.get('a3'),
      (x) => x?.status.phase === 'Failed',
    )
    t.match(failed?.status.conditions, [{ reason: /IN_USE/, message: /fd00:10::800:ff:fe00:1/ }])
    await p.client.deleteHost('a3', { force: true })
    await until(
      () => p.controller.store.hosts.get('a3'),
      (x) => x === undefined,
    )
  })

  await t.test('a detach gives the SLAAC address back', async (t) => {
    await p.client.deleteHost('a2')
    await until(
      () => p.controller.store.hosts.get('a2'),
      (x) => x === undefined,
    )
    const owners = (await p.client.groupIpam('group-a')).allocations.map((a) => a.owner).sort()
    t.same(owners, ['a1', 'ipv6/a1'], "only a1's two addresses are held")
  })
})

t.test('network6 added to a group with hosts, moved, then removed', async (t) => {
  const p = await startPipeline(t)
  await p.agent('dpu-1')
  const mac = '0a:00:00:00:00:07'
  const port = topologyNames.hostPort('group-c', 'c1')
  await p.client.applyGroup('group-c', groupSpec())
  await p.client.applyHost('c1', hostSpec('group-c', 'dpu-1', 1, { hostMAC: mac }))
  const first = await until(
    () => p.controller.store.hosts.get('c1'),
    (h) => h?.status.phase === 'Ready',
  )
  const ip4 = first?.status.hostAccessIPs?.hostIP
  t.equal(first?.status.hostAccessIPs?.hostIPv6, undefined, 'an IPv4-only group: no IPv6')
  const call = jsonCaller(
    createApp({ readiness: {}, v1: { client: p.client, tokens: TEST_TOKENS } }),
    OPERATOR,
  )
  /** The dry run of the group's next spec: its addresses, and c1's port among NB's updates. */
  const planned = async (spec: object) => {
    const plan = (await call('PUT', '/v1/resource-groups/group-c?dryRun=true', spec))
      .json as ChangePlan
    return { ...plan.addresses, portUpdated: plan.nb.update.some((id) => id.includes(port)) }
  }
  const slaac = (cidr: string) => ({ pool: 'group', owner: 'ipv6/c1', ip: eui64Address(cidr, mac) })

  let before: string | undefined
  for (const cidr of ['fd00:10::/64', 'fd00:20::/64']) {
    const ip6 = eui64Address(cidr, mac)
    const spec = { ...groupSpec(), network6: { cidr, gateway: cidr.replace('/64', '1') } }
    t.same(
      await planned(spec),
      {
        allocate: [slaac(cidr)],
        release: before ? [slaac(before)] : [],
        portUpdated: true,
      },
      `a dry run of network6 ${cidr}: c1's SLAAC address ${before ? 'moved' : 'taken'}`,
    )
    before = cidr
    await p.client.applyGroup('group-c', spec)
    const host = await until(
      () => p.controller.store.hosts.get('c1'),
      (h) => h?.status.phase === 'Ready' && h.status.hostAccessIPs?.hostIPv6 === ip6,
    )
    t.equal(host?.status.hostAccessIPs?.hostIPv6, ip6, `network6 ${cidr}: c1 takes ${ip6}`)
    t.ok(
      await until(
        () => p.switchPort(port),
        (sp) => sp?.addresses[0] === `${mac} ${ip4} ${ip6}`,
      ),
      'and its port holds it',
    )
    const held = (await p.client.groupIpam('group-c')).allocations.filter((a) => a.ip.includes(':'))
    t.same(held, [{ owner: 'ipv6/c1', ip: ip6 }], 'IPAM holds that one only')
  }

  t.same(
    await planned(groupSpec()),
    { allocate: [], release: [slaac('fd00:20::/64')], portUpdated: true },
    "a dry run of network6 removed: c1's SLAAC address given back",
  )
  await p.client.applyGroup('group-c', groupSpec())
  const host = await until(
    () => p.controller.store.hosts.get('c1'),
    (h) => h?.status.phase === 'Ready' && h.status.hostAccessIPs?.hostIPv6 === undefined,
  )
  t.equal(host?.status.hostAccessIPs?.hostIP, ip4, 'network6 removed: c1 keeps its IPv4 address')
  t.equal(host?.status.hostAccessIPs?.hostIPv6, undefined, 'and has no IPv6 one')
  t.ok(
    await until(
      () => p.switchPort(port),
      (sp) => sp?.addresses[0] === `${mac} ${ip4}`,
    ),
    'its port holds its IPv4 address only',
  )
  const held = (await p.client.groupIpam('group-c')).allocations.map((a) => a.owner)
  t.same(held, ['c1'], 'and IPAM nothing in IPv6')
  const given = (await p.client.events('rg', 'group-c')).filter(
    (e) => e.reason === 'AddressesReleased',
  )
  t.match(
    given.map((e) => e.message),
    [/fd00:20::\S+ \(ipv6\/c1\): given back/, /fd00:10::\S+ \(ipv6\/c1\): given back/],
    "the group's events say which addresses each move and the removal gave back",
  )
})

t.test('an IPv6-only group: network6 alone, each host its SLAAC address', async (t) => {
  const p = await startPipeline(t)
  await p.agent('dpu-1')
  const mac = '0a:00:00:00:00:61'
  const ip6 = eui64Address(NETWORK6.cidr, mac)
  const call = jsonCaller(
    createApp({ readiness: {}, v1: { client: p.client, tokens: TEST_TOKENS } }),
    OPERATOR,
  )
  await p.client.applyGroup('group-6', { tenantId: 'tenant-6', network6: NETWORK6 })
  const refused = await call(
    'PUT',
    '/v1/managed-resources/h-public',
    hostSpec('group-6', 'dpu-1', 2, { hostAccess: 'PublicAccess' }),
  )
  t.equal(refused.status, 400, 'PublicAccess in an IPv6-only group: refused')
  t.match(JSON.stringify(refused.json), /hostAccess/, 'naming hostAccess')

  await p.client.applyHost('h6', hostSpec('group-6', 'dpu-1', 1, { hostMAC: mac }))
  const ready = await until(
    () => p.controller.store.hosts.get('h6'),
    (h) => h?.status.phase === 'Ready',
  )
  t.match(
    ready?.status.hostAccessIPs,
    { hostIP: ip6, hostIPv6: ip6 },
    'Ready, its address the SLAAC one',
  )
  const port = await p.switchPort(topologyNames.hostPort('group-6', 'h6'))
  t.same(port?.addresses, [`${mac} ${ip6}`], 'its port holds its IPv6 address only')
  const routerPort = topologyNames.routerSwitchPort('group-6')
  t.equal(
    (await p.nbctl('get', 'Logical_Router_Port', routerPort, 'networks')).trim(),
    '["fd00:10::1/64"]',
    "the router's only network is the IPv6 one",
  )
  t.match(
    await p.nbctl('get', 'Logical_Router_Port', routerPort, 'ipv6_ra_configs'),
    /address_mode=slaac/,
    'and it advertises it',
  )
  t.same(
    (await p.client.groupIpam('group-6')).allocations,
    [{ owner: 'h6', ip: ip6 }],
    'IPAM holds it as the host’s own address',
  )
  // Its hosts' own addresses are SLAAC ones in network6: it cannot move under them, and a
  // dry run says so as the PUT does.
  const moved = { tenantId: 'tenant-6', network6: { cidr: 'fd00:20::/64', gateway: 'fd00:20::1' } }
  for (const path of ['/v1/resource-groups/group-6?dryRun=true', '/v1/resource-groups/group-6']) {
    const answer = await call('PUT', path, moved)
    t.equal(answer.status, 409, `${path}: network6 moved under a host: refused`)
    t.match(JSON.stringify(answer.json), /network6/, 'naming network6')
  }
  await p.client.deleteHost('h6')
  await until(
    () => p.controller.store.hosts.get('h6'),
    (h) => h === undefined,
  )
  t.same((await p.client.groupIpam('group-6')).allocations, [], 'a detach gives it back')
})

t.test('an IPv6 fabric: NAT66 on the DPU, a public /128 announced by FRR', async (t) => {
  const p = await startPipeline(t, { frr: true, fabric6: true })
  await p.agent('dpu-1')
  const frr = await startPipelineFrr(t, p)
  const [encap, natIp] = dpuFabricIps('dpu-1')
  const natIp6 = 'fd00:fab::65'
  await p.client.applyDpu('dpu-1', { fabricIps: [encap, natIp], natIp6, hostPorts: ['pf0hpf'] })
  await p.client.registerPublicIp('203.0.113.7')
  await p.client.registerPublicIp('2001:DB8:FF::10')
  await p.client.applyGroup('group-p', { ...groupSpec(), network6: NETWORK6 })
  const mac = '0a:00:00:00:00:07'
  const ip6 = eui64Address(NETWORK6.cidr, mac)
  const spec = (hostAccess: string) => ({
    resourceGroup: 'group-p',
    hostMAC: mac,
    dpu: { id: 'dpu-1' },
    hostAccess,
  })
  const call = jsonCaller(
    createApp({ readiness: {}, v1: { client: p.client, tokens: TEST_TOKENS } }),
    OPERATOR,
  )
  const dryRun = async (hostAccess: string) =>
    (await call('PUT', '/v1/managed-resources/host-p?dryRun=true', spec(hostAccess))).json
  const planned = await dryRun('PublicAccess')
  t.match(
    planned.addresses.allocate,
    [
      { pool: 'group', owner: 'host-p' },
      { pool: 'group', owner: 'ipv6/host-p', ip: ip6 },
      { pool: 'public', owner: 'host-p', ip: '203.0.113.7' },
      { pool: 'public', owner: 'host-p', ip: '2001:db8:ff::10' },
    ],
    'a dry run plans both public IPs',
  )
  t.same(
    planned.frr.announce,
    [
      { prefix: '203.0.113.7/32', nextHop: natIp },
      { prefix: '2001:db8:ff::10/128', nextHop: natIp6 },
    ],
    'and both announcements, each via its NAT address',
  )
  await p.client.applyHost('host-p', spec('PublicAccess'))
  const host = await until(
    () => p.controller.store.hosts.get('host-p'),
    (h) => h?.status.phase === 'Ready',
  )
  t.match(
    host?.status.hostAccessIPs,
    { fabricIP: natIp, fabricIPv6: natIp6, publicIP: '203.0.113.7', publicIPv6: '2001:db8:ff::10' },
    'status: both NAT addresses and both public IPs',
  )
  const table = await frr.table()
  t.equal(table.get('203.0.113.7/32'), natIp, 'FRR announces the /32 via the NAT IP')
  t.equal(table.get('2001:db8:ff::10/128'), natIp6, 'and the /128 via the IPv6 NAT address')
  const gateway = topologyNames.gatewayRouter('group-p', 'dpu-1')
  t.same(
    (await p.natRules(gateway)).filter((r) => r.includes(':')),
    [
      `dnat ${natIp6} ${ip6}`,
      `dnat_and_snat 2001:db8:ff::10 ${ip6}`,
      `snat ${natIp6} ${NETWORK6.cidr}`,
    ],
    'NB: NAT66 mirrors the IPv4 rules',
  )
  const inbound = async (to: string) =>
    (await call('GET', `/v1/trace?from=fabric&to=${encodeURIComponent(to)}`)).json
  const hostPort = topologyNames.hostPort('group-p', 'host-p')
  const pub6 = await inbound('2001:DB8:FF::10')
  t.match(
    pub6,
    {
      verdict: 'delivered',
      delivered: { port: hostPort, host: 'host-p', group: 'group-p' },
      from: { fabric: true, ip: '2001:db8:ffff::1', dpu: 'dpu-1' },
      to: { ip: '2001:db8:ff::10', host: 'host-p' },
    },
    'a trace from the fabric to the public IPv6 (any spelling) is delivered to host-p',
  )
  t.ok(
    pub6.hops?.some((h: string) => h.includes(`destination becomes ${ip6} (DNAT`)),
    "through the gateway's DNAT66 to the host's SLAAC address",
  )
  t.match(
    await inbound(natIp6),
    { verdict: 'delivered', delivered: { host: 'host-p' } },
    'and so is one to the IPv6 NAT address',
  )
  t.match(
    await inbound('203.0.113.7'),
    { verdict: 'delivered', from: { ip: '198.51.100.1' } },
    'IPv4 from the fabric as before',
  )

  const lowering = await dryRun('None')
  t.same(
    lowering.frr.withdraw,
    [{ prefix: '203.0.113.7/32' }, { prefix: '2001:db8:ff::10/128' }],
    'a dry run of access None withdraws both',
  )
  t.same(
    lowering.addresses.release,
    [
      { pool: 'public', owner: 'host-p', ip: '203.0.113.7' },
      { pool: 'public', owner: 'host-p', ip: '2001:db8:ff::10' },
    ],
    'and gives both back',
  )
  await p.client.applyHost('host-p', spec('None'))
  const lowered = await until(
    () => p.controller.store.hosts.get('host-p'),
    (h) => h?.status.phase === 'Ready' && h.status.observedVersion === 2,
  )
  t.notOk(lowered?.status.hostAccessIPs?.publicIPv6, 'access lowered: no public IPv6')
  t.equal((await frr.table()).get('2001:db8:ff::10/128'), undefined, 'the /128 was withdrawn')
  t.same(await p.client.publicIp('2001:db8:ff::10'), { ip: '2001:db8:ff::10', allocated: false })
  t.same(
    (await p.natRules(gateway)).filter((r) => r.includes(':')),
    [`snat ${natIp6} ${NETWORK6.cidr}`],
    'only the SNAT66 stays',
  )
  t.match(
    await inbound(natIp6),
    { verdict: 'dropped', dropped: { match: `ip6.dst == ${natIp6}` } },
    'a trace to the IPv6 NAT address now stops at the gateway: no DNAT takes it in',
  )
  t.equal(
    (await call('GET', '/v1/trace?from=fabric&to=2001:db8:ff::10')).status,
    404,
    'the released public IPv6 belongs to no host',
  )

  await p.client.applyHost('host-p', spec('PublicAccess'))
  await until(
    () => p.controller.store.hosts.get('host-p'),
    (h) => h?.status.phase === 'Ready' && h.status.observedVersion === 3,
  )
  t.equal((await frr.table()).get('2001:db8:ff::10/128'), natIp6, 'announced again')
  await p.client.deleteHost('host-p')
  await until(
    () => p.controller.store.hosts.get('host-p'),
    (h) => h === undefined,
  )
  t.equal((await frr.table()).get('2001:db8:ff::10/128'), undefined, 'a detach withdraws it')
  t.same(await p.client.publicIp('2001:db8:ff::10'), { ip: '2001:db8:ff::10', allocated: false })

  await t.test('an IPv6-only host: its public /128 alone, via the IPv6 NAT address', async (t) => {
    await p.client.applyGroup('group-6', { tenantId: 'tenant-a', network6: NETWORK6 })
    const host6 = { ...spec('PublicAccess'), resourceGroup: 'group-6' }
    const planned = (await call('PUT', '/v1/managed-resources/host-6?dryRun=true', host6)).json
    t.same(
      planned.addresses.allocate.filter((a: { pool: string }) => a.pool === 'public'),
      [{ pool: 'public', owner: 'host-6', ip: '2001:db8:ff::10' }],
      'a dry run plans the public IPv6 alone',
    )
    t.same(planned.frr.announce, [{ prefix: '2001:db8:ff::10/128', nextHop: natIp6 }])
    await p.client.applyHost('host-6', host6)
    const ready = await until(
      () => p.controller.store.hosts.get('host-6'),
      (h) => h?.status.phase === 'Ready',
    )
    t.match(
      ready?.status.hostAccessIPs,
      { hostIP: ip6, fabricIPv6: natIp6, publicIPv6: '2001:db8:ff::10' },
      'Ready with its public IPv6',
    )
    t.notOk(ready?.status.hostAccessIPs?.publicIP, 'and no public IPv4: it has no IPv4')
    t.same(await p.client.publicIp('203.0.113.7'), { ip: '203.0.113.7', allocated: false })
    t.equal((await frr.table()).get('2001:db8:ff::10/128'), natIp6, 'the /128 is announced')
    t.same(
      await p.natRules(topologyNames.gatewayRouter('group-6', 'dpu-1')),
      [
        `dnat ${natIp6} ${ip6}`,
        `dnat_and_snat 2001:db8:ff::10 ${ip6}`,
        `snat ${natIp6} ${NETWORK6.cidr}`,
      ],
      'NAT66 only',
    )
  })

  await t.test("a group that drops network6 gives its hosts' public IPv6 back", async (t) => {
    await p.client.deleteHost('host-6')
    await until(
      () => p.controller.store.hosts.get('host-6'),
      (h) => h === undefined,
    )
    await p.client.registerPublicIp('2001:db8:ff::11')
    await p.client.applyHost('host-p', spec('PublicAccess'))
    const withV6 = await until(
      () => p.controller.store.hosts.get('host-p'),
      (h) => h?.status.phase === 'Ready' && h.status.hostAccessIPs?.publicIPv6 !== undefined,
    )
    const held = withV6?.status.hostAccessIPs?.publicIPv6 ?? ''
    t.match(held, /^2001:db8:ff::1[01]$/, 'it holds one')
    await p.client.applyGroup('group-p', groupSpec())
    const without = await until(
      () => p.controller.store.hosts.get('host-p'),
      (h) => h?.status.phase === 'Ready' && h.status.hostAccessIPs?.hostIPv6 === undefined,
    )
    t.notOk(without?.status.hostAccessIPs?.publicIPv6, 'network6 gone: no public IPv6 in status')
    t.same(
      await until(
        () => p.client.publicIp(held),
        (ip) => ip?.allocated === false,
      ),
      { ip: held, allocated: false },
      'back in the pool',
    )
    t.equal((await frr.table()).get(`${held}/128`), undefined, 'and withdrawn')
    t.equal((await frr.table()).get('203.0.113.7/32'), natIp, 'its /32 stays')
    // While a release is under way the host still holds its public IPv6: a resync then
    // must not announce it again, its group having no IPv6 network.
    const gap = await p.controller.ipam.allocatePublicIp('host-p', 6)
    const desired = await storeAnnouncementSource(p.controller.store, p.controller.ipam).desired()
    t.same(
      desired.map((a) => a.prefix),
      ['203.0.113.7/32'],
      'a resync wants the /32 only, not the /128 of a group without network6',
    )
    t.equal(await p.controller.ipam.publicIpOf('host-p', 6), gap, 'while the host held one')
    await p.controller.ipam.releasePublicIp('host-p', 6)

    // The IPv6 release above ran at the host's current spec version; so does its deletion's
    // release, which must still take the IPv4 address.
    await p.client.deleteHost('host-p')
    await until(
      () => p.controller.store.hosts.get('host-p'),
      (h) => h === undefined,
    )
    t.equal((await frr.table()).get('203.0.113.7/32'), undefined, 'a detach then withdraws the /32')
    t.same(
      await p.client.publicIp('203.0.113.7'),
      { ip: '203.0.113.7', allocated: false },
      'and gives the IPv4 address back',
    )
  })
})

t.test('an IPv6 fabric without an IPv6 public pool: PublicAccess is IPv4 only', async (t) => {
  const p = await startPipeline(t, { frr: true, fabric6: true })
  await p.agent('dpu-1')
  const frr = await startPipelineFrr(t, p)
  const [encap, natIp] = dpuFabricIps('dpu-1')
  await p.client.applyDpu('dpu-1', {
    fabricIps: [encap, natIp],
    natIp6: 'fd00:fab::65',
    hostPorts: ['pf0hpf'],
  })
  await p.client.registerPublicIp('203.0.113.7')
  await p.client.applyGroup('group-p', { ...groupSpec(), network6: NETWORK6 })
  await p.client.applyHost('host-p', {
    resourceGroup: 'group-p',
    hostMAC: '0a:00:00:00:00:07',
    dpu: { id: 'dpu-1' },
    hostAccess: 'PublicAccess',
  })
  const host = await until(
    () => p.controller.store.hosts.get('host-p'),
    (h) => h?.status.phase === 'Ready' || h?.status.phase === 'Failed',
  )
  t.equal(host?.status.phase, 'Ready', 'Ready: no IPv6 pool is no failure')
  t.match(host?.status.hostAccessIPs, { publicIP: '203.0.113.7', fabricIPv6: 'fd00:fab::65' })
  t.notOk(host?.status.hostAccessIPs?.publicIPv6, 'no public IPv6')
  t.equal((await frr.table()).get('203.0.113.7/32'), natIp, 'the /32 is announced')
})
