import t from 'tap'
import {
  CompileMemo,
  compileGroupTopology,
  type DesiredRow,
  type GroupMember,
  type GroupTopologySpec,
  InvalidTopologySpec,
  NatConflict,
  topologyNames,
  transitAddresses,
} from '../index.ts'

const base: GroupTopologySpec = {
  name: 'alpha',
  cidr: '10.10.10.0/24',
  gateway: '10.10.10.1',
  dummyFabricIp: '172.18.0.254/24',
  fabricGatewayIp: '172.18.0.1',
  members: [
    {
      hostName: 'h1',
      logicalPort: topologyNames.hostPort('alpha', 'h1'),
      mac: '0a:00:00:00:00:01',
      ip: '10.10.10.2',
      dpu: { id: 'dpu-1', natIp: '172.18.0.105' },
      access: 'FabricAccess',
    },
  ],
}

t.test('same spec, same rows; names and owner derive from the group', async (t) => {
  const a = compileGroupTopology(base)
  t.same(compileGroupTopology(base), a, 'pure and deterministic')
  const names = a.rows
    .filter((r) => r.table !== 'Address_Set')
    .map((r) => (r.row as { name?: string }).name)
    .filter((n) => n !== undefined)
  t.ok(
    names.every((n) => n.startsWith('hz/alpha/')),
    'every named row is prefixed with the group',
  )
  const sets = a.rows.flatMap((r) => (r.table === 'Address_Set' ? [r.row.name ?? ''] : []))
  t.ok(
    sets.length === 2 && sets.every((n) => /^hz_[0-9a-f]{16}_[a-z0-9_]+$/.test(n)),
    "address sets (the guard, the DPU's hosts) are named as OVN matches can name them",
  )
  t.ok(a.rows.every((r) => r.row.external_ids['hydrazine:owner'] === 'group/alpha'))
  const gw = a.rows.find((r) => r.table === 'Logical_Router' && r.key === 'gw/dpu-1')
  t.same(
    (gw?.row as { options?: unknown } | undefined)?.options,
    { chassis: 'dpu-1' },
    'gateway router pinned to the DPU',
  )
  const b = compileGroupTopology({
    ...base,
    name: 'beta',
    members: [
      {
        ...base.members[0],
        logicalPort: topologyNames.hostPort('beta', 'h1'),
      } as GroupTopologySpec['members'][number],
    ],
  })
  const bNames = new Set(b.rows.map((r) => (r.row as { name?: string }).name))
  t.ok(
    names.every((n) => !bNames.has(n)),
    'two groups with identical CIDRs and IPs share no names',
  )
})

t.test('transit links are link-local /30s that do not move when another DPU joins', async (t) => {
  t.same(transitAddresses(0), { lrSide: '169.254.0.1', gwSide: '169.254.0.2' })
  t.same(transitAddresses(65), { lrSide: '169.254.1.5', gwSide: '169.254.1.6' })
  const nets = (spec: GroupTopologySpec) =>
    compileGroupTopology(spec)
      .rows.filter((r) => r.table === 'Logical_Router_Port')
      .map(
        (r) => `${(r.row as { name: string }).name}=${(r.row as { networks: string[] }).networks}`,
      )
  const one = nets(base)
  const two = nets({
    ...base,
    members: [
      ...base.members,
      {
        ...(base.members[0] as GroupTopologySpec['members'][number]),
        hostName: 'h0',
        logicalPort: topologyNames.hostPort('alpha', 'h0'),
        ip: '10.10.10.9',
        dpu: { id: 'dpu-0', natIp: '172.18.0.104' },
      },
    ],
  })
  t.ok(
    one.every((n) => two.includes(n)),
    'existing DPU keeps its addresses',
  )
})

const h1 = base.members[0] as GroupMember
const rejects: { name: string; spec: GroupTopologySpec; error: new (...a: never[]) => Error }[] = [
  {
    name: 'two FabricAccess hosts on one DPU (one NAT IP)',
    spec: {
      ...base,
      members: [
        h1,
        {
          ...h1,
          hostName: 'h2',
          logicalPort: topologyNames.hostPort('alpha', 'h2'),
          ip: '10.10.10.3',
        },
      ],
    },
    error: NatConflict,
  },
  { name: 'malformed CIDR', spec: { ...base, cidr: '10.10.10.0' }, error: InvalidTopologySpec },
  {
    name: "an extra subnet's gateway outside it",
    spec: { ...base, extraSubnets: [{ cidr: '10.20.0.0/24', gateway: '10.30.0.1' }] },
    error: InvalidTopologySpec,
  },
  {
    name: 'an extra subnet overlapping the primary one',
    spec: { ...base, extraSubnets: [{ cidr: '10.10.10.128/25', gateway: '10.10.10.129' }] },
    error: InvalidTopologySpec,
  },
]
for (const c of rejects) {
  t.test(`rejects ${c.name}`, async (t) => {
    t.throws(() => compileGroupTopology(c.spec), c.error)
  })
}

/** The keys of the rows that name host `host` (its port, DNS records and NAT rules). */
const rowsOf = (rows: readonly DesiredRow[], host: string) =>
  rows.filter((r) => r.row.external_ids['hydrazine:host'] === host).map((r) => r.key)

/**
 * A compile's router policies as `priority match action`, each `$set` in a match written
 * out as the addresses of the compile's `Address_Set` of that name, sorted.
 */
function policiesOf(rows: readonly DesiredRow[], withNexthops = false): string[] {
  const sets = new Map(
    rows.flatMap((r) =>
      r.table === 'Address_Set' ? [[r.row.name, [...(r.row.addresses ?? [])].sort()]] : [],
    ),
  )
  const resolve = (match: string) =>
    match.replace(/\$([A-Za-z0-9_.]+)/g, (_, name: string) => `{${sets.get(name)?.join(', ')}}`)
  return rows
    .flatMap((r) =>
      r.table === 'Logical_Router_Policy'
        ? [
            withNexthops
              ? `${resolve(r.row.match ?? '')} ${r.row.nexthops?.join(',')}`
              : `${r.row.priority} ${resolve(r.row.match ?? '')} ${r.row.action}`,
          ]
        : [],
    )
    .sort()
}

/** A compile's NAT rules as `type external logical`, sorted. */
function natRules(rows: readonly DesiredRow[]): string[] {
  return rows
    .flatMap((r) =>
      r.table === 'NAT' ? [`${r.row.type} ${r.row.external_ip} ${r.row.logical_ip}`] : [],
    )
    .sort()
}

const ok: GroupMember = {
  ...h1,
  hostName: 'ok',
  logicalPort: topologyNames.hostPort('alpha', 'ok'),
  mac: '0a:00:00:00:00:0f',
  ip: '10.10.10.15',
  dpu: { id: 'dpu-2', natIp: '172.18.0.106' },
}
const whole = compileGroupTopology({ ...base, members: [ok] })

const problems: {
  name: string
  member?: GroupMember
  relay?: NonNullable<GroupTopologySpec['dhcpRelayPorts']>[number]
  extraSubnets?: GroupTopologySpec['extraSubnets']
  problem: { code: string; host?: string; message: RegExp }
  /** Keys of the rows built for the host (for a relay: its port's addresses). */
  built: string[]
}[] = [
  {
    name: 'a host outside every subnet is left out',
    member: { ...h1, ip: '10.10.11.2' },
    problem: { code: 'TOPOLOGY_SPEC_INVALID', host: 'h1', message: /10\.10\.11\.2 is in none/ },
    built: [],
  },
  {
    name: 'an IPv6 host with FabricAccess gets its port and no NAT',
    member: { ...h1, ip: 'fd00:20::5' },
    extraSubnets: [{ cidr: 'fd00:20::/64', gateway: 'fd00:20::1' }],
    problem: {
      code: 'IPV6_NAT_UNSUPPORTED',
      host: 'h1',
      message: /has no IPv4 address and the fabric no IPv6, and FabricAccess gives IPv4 .*no NAT64/,
    },
    built: [`lsp/${topologyNames.hostPort('alpha', 'h1')}`],
  },
  {
    name: 'a FabricAccess host in a subnet without a gateway gets its port and no NAT',
    member: { ...h1, ip: '10.30.0.5' },
    extraSubnets: [{ cidr: '10.30.0.0/24' }],
    problem: { code: 'TOPOLOGY_SPEC_INVALID', host: 'h1', message: /no gateway/ },
    built: [`lsp/${topologyNames.hostPort('alpha', 'h1')}`],
  },
  {
    name: 'a relay address outside every subnet: its port has no address',
    relay: { dpuId: 'dpu-2', portName: 'r1', mac: '0a:00:00:00:00:fe', ip: '10.10.11.9' },
    problem: { code: 'TOPOLOGY_SPEC_INVALID', message: /relay r1 address 10\.10\.11\.9/ },
    built: ['0a:00:00:00:00:fe'],
  },
  {
    name: 'a relay address without a MAC: its port has no address',
    relay: { dpuId: 'dpu-2', portName: 'r1', ip: '10.10.10.9' },
    problem: { code: 'TOPOLOGY_SPEC_INVALID', message: /needs a MAC/ },
    built: ['unknown'],
  },
]
for (const c of problems) {
  t.test(`${c.name}, named in problems; the rest of the group is built`, async (t) => {
    const compiled = compileGroupTopology({
      ...base,
      members: [ok, ...(c.member ? [c.member] : [])],
      ...(c.extraSubnets ? { extraSubnets: c.extraSubnets } : {}),
      ...(c.relay ? { dhcpRelayPorts: [c.relay] } : {}),
    })
    t.match(compiled.problems, [c.problem])
    t.equal(compiled.problems?.length, 1, 'one problem')
    if (c.relay) {
      const port = compiled.rows.find((r) => r.key === `lsp/${c.relay?.portName}`)
      t.same(port && 'addresses' in port.row ? port.row.addresses : undefined, c.built)
    } else t.same(rowsOf(compiled.rows, 'h1'), c.built)
    t.same(rowsOf(compiled.rows, 'ok'), rowsOf(whole.rows, 'ok'), 'the other host is whole')
    if (c.member && c.built.length === 0) {
      t.notOk(
        compiled.rows.some((r) => r.key === 'gw/dpu-1'),
        'no gateway router for a DPU that serves only the host left out',
      )
    }
  })
}

t.test('PublicAccess before its public IP: reachable at the NAT IP, no problem', async (t) => {
  const waiting = compileGroupTopology({ ...base, members: [{ ...h1, access: 'PublicAccess' }] })
  t.same(waiting.problems, [])
  t.same(natRules(waiting.rows), [
    'dnat 172.18.0.105 10.10.10.2',
    'snat 172.18.0.105 10.10.10.0/24',
  ])
  const allocated = compileGroupTopology({
    ...base,
    members: [{ ...h1, access: 'PublicAccess', publicIp: '203.0.113.7' }],
  })
  t.same(natRules(allocated.rows), [
    'dnat 172.18.0.105 10.10.10.2',
    'dnat_and_snat 203.0.113.7 10.10.10.2',
    'snat 172.18.0.105 10.10.10.0/24',
  ])
})

t.test(
  'extra subnets with a gateway are routed; without one they stay on the switch',
  async (t) => {
    const spec: GroupTopologySpec = {
      ...base,
      extraSubnets: [
        { cidr: '10.20.0.0/24', gateway: '10.20.0.1' },
        { cidr: 'fd00:20::/64', gateway: 'fd00:20::1' },
        { cidr: '10.30.0.0/24' },
      ],
      members: [
        { ...h1, ip: '10.20.0.5' },
        { ...ok, access: 'None', ip: 'fd00:20::5' },
      ],
    }
    const { rows, problems } = compileGroupTopology(spec)
    t.same(problems, [])
    const lrp = rows.find((r) => r.key === `lrp/${topologyNames.routerSwitchPort('alpha')}`)
    t.same(
      lrp && 'networks' in lrp.row ? lrp.row.networks : undefined,
      ['10.10.10.1/24', '10.20.0.1/24', 'fd00:20::1/64'],
      'the distributed router is in every subnet with a gateway',
    )
    const routes = rows.flatMap((r) =>
      r.table === 'Logical_Router_Static_Route' && r.key.startsWith('route/gw/')
        ? [`${r.row.ip_prefix} via ${r.row.nexthop}`]
        : [],
    )
    t.match(
      routes,
      [
        /^10\.10\.10\.0\/24 via 169\.254\./,
        /^10\.20\.0\.0\/24 via 169\.254\./,
        '0.0.0.0/0 via 172.18.0.1',
      ],
      'the gateway router routes each routed IPv4 subnet back to the distributed router',
    )
    t.same(
      natRules(rows),
      [
        'dnat_and_snat 172.18.0.105 10.20.0.5',
        'snat 172.18.0.105 10.10.10.0/24',
        'snat 172.18.0.105 10.20.0.0/24',
        'snat 172.18.0.106 10.10.10.0/24',
        'snat 172.18.0.106 10.20.0.0/24',
      ],
      'each DPU SNATs every routed IPv4 subnet; the IPv4 host has its fabric access',
    )
    t.same(
      policiesOf(rows),
      [
        '1000 ip4.src == {10.20.0.5} reroute',
        '1001 ip4.dst == 10.10.10.0/24 allow',
        '1001 ip4.dst == 10.20.0.0/24 allow',
        '999 ip4 && ip4.dst != {10.10.10.0/24, 10.20.0.0/24} drop',
      ],
      'between routed subnets the router delivers; only traffic leaving the group is rerouted, the rest of it dropped',
    )
    t.same(
      rowsOf(rows, 'ok'),
      [`lsp/${topologyNames.hostPort('alpha', 'ok')}`],
      'IPv6: a port only',
    )
    t.notOk(
      compileGroupTopology(base).rows.some(
        (r) => r.table === 'Logical_Router_Policy' && r.row.action === 'allow',
      ),
      'one routed subnet needs no allow policy',
    )
    const memo = new CompileMemo()
    compileGroupTopology({ ...spec, extraSubnets: [] }, memo)
    t.same(compileGroupTopology(spec, memo), compileGroupTopology(spec), 'a memo sees them change')
  },
)

const v6: GroupTopologySpec = {
  ...base,
  cidr: 'fd00::/64',
  gateway: 'fd00::1',
  members: [
    {
      ...(base.members[0] as GroupTopologySpec['members'][number]),
      ip: 'fd00::2',
      access: 'None',
    },
  ],
}

t.test('an IPv6 host without NAT gets its port, and no NAT or policy names it', async (t) => {
  const { rows } = compileGroupTopology(v6)
  const port = rows.find(
    (r) =>
      r.table === 'Logical_Switch_Port' && r.row.name === topologyNames.hostPort('alpha', 'h1'),
  )
  t.match(
    port,
    {
      row: {
        addresses: ['0a:00:00:00:00:01 fd00::2'],
        port_security: ['0a:00:00:00:00:01 fd00::2'],
        external_ids: { 'hydrazine:host': 'h1', 'hydrazine:dpu': 'dpu-1' },
      },
      parent: { table: 'Logical_Switch', key: 'ls', column: 'ports' },
    },
    'its port on the group switch, locked to its MAC and IPv6 address',
  )
  const namesHost = rows.filter(
    (r) =>
      (r.table === 'NAT' || r.table === 'Logical_Router_Policy' || r.table === 'Address_Set') &&
      (r.row.external_ids['hydrazine:host'] === 'h1' || JSON.stringify(r.row).includes('fd00::2')),
  )
  t.same(namesHost, [], 'no NAT or reroute policy for the IPv6 host')
})

t.test('with fabric IPv6, routed IPv6 leaves through its DPU (NAT66), like IPv4', async (t) => {
  const network6 = { cidr: 'fd00:10::/64', gateway: 'fd00:10::1' }
  const dual: GroupTopologySpec = {
    ...base,
    network6,
    dummyFabricIp6: 'fd00:fab::fa/64',
    fabricGatewayIp6: 'fd00:fab::c8',
    members: [
      {
        ...h1,
        access: 'PublicAccess',
        ip6: 'fd00:10::5',
        dpu: { id: 'dpu-1', natIp: '172.18.0.105', natIp6: 'fd00:fab::65' },
        publicIp: '203.0.113.7',
        publicIp6: '2001:db8:ff::10',
      },
      { ...ok, access: 'None', ip6: 'fd00:10::f', dpu: { ...ok.dpu, natIp6: 'fd00:fab::66' } },
    ],
  }
  const { rows, problems } = compileGroupTopology(dual)
  t.same(problems, [])
  t.same(
    natRules(rows).filter((r) => r.includes(':')),
    [
      'dnat fd00:fab::65 fd00:10::5',
      'dnat_and_snat 2001:db8:ff::10 fd00:10::5',
      'snat fd00:fab::65 fd00:10::/64',
      'snat fd00:fab::66 fd00:10::/64',
    ],
    'NAT66 mirrors IPv4: the public /128 and the NAT address to the host, SNAT of network6',
  )
  const routes = rows.flatMap((r) =>
    r.table === 'Logical_Router_Static_Route' && r.row.ip_prefix?.includes(':')
      ? [`${r.key.split('/')[1]} ${r.row.ip_prefix} via ${r.row.nexthop}`]
      : [],
  )
  t.match(
    routes.sort(),
    [
      /^gw ::\/0 via fd00:fab::c8$/,
      /^gw ::\/0 via fd00:fab::c8$/,
      /^gw fd00:10::\/64 via fd00:a9fe::/,
      /^gw fd00:10::\/64 via fd00:a9fe::/,
      /^lr ::\/0 via fd00:a9fe::/,
      /^lr ::\/0 via fd00:a9fe::/,
    ],
    'network6 routed back over the transit /126, default routes to the fabric and to each DPU',
  )
  t.match(
    policiesOf(rows, true),
    [
      'ip4 && ip4.dst != {10.10.10.0/24} undefined',
      /^ip4\.src == \{10\.10\.10\.15\} 169\.254\./,
      /^ip4\.src == \{10\.10\.10\.2\} 169\.254\./,
      'ip6 && ip6.dst != {fd00:10::/64} undefined',
      /^ip6\.src == \{fd00:10::5\} fd00:a9fe::/,
      /^ip6\.src == \{fd00:10::f\} fd00:a9fe::/,
    ],
    "each host's IPv6 is rerouted to its own DPU",
  )
  const publicPort = rows.find(
    (r) => r.key === `lrp/${topologyNames.gatewayPublicPort('alpha', 'dpu-1')}`,
  )
  t.same(
    publicPort && 'networks' in publicPort.row ? publicPort.row.networks : undefined,
    ['172.18.0.254/24', 'fd00:fab::fa/64'],
    "the gateway router's fabric port has both reserved addresses",
  )
  const { dummyFabricIp6: _, ...inside4 } = dual
  const inside = compileGroupTopology(inside4)
  t.same(
    natRules(inside.rows).filter((r) => r.includes(':')),
    [],
    'without fabric IPv6, IPv6 stays in the group',
  )
  const noNat6 = compileGroupTopology({
    ...dual,
    members: dual.members.map((m) => ({ ...m, dpu: { id: m.dpu.id, natIp: m.dpu.natIp ?? '' } })),
  })
  t.match(
    noNat6.problems,
    [{ host: 'h1', message: /no IPv6 NAT address/ }],
    'a PublicAccess host whose DPU has no IPv6 NAT address is named',
  )
  t.notOk(
    noNat6.rows.some(
      (r) =>
        (r.table === 'Logical_Router_Static_Route' && r.row.ip_prefix === '::/0') ||
        (r.table === 'Logical_Router_Policy' && r.row.match?.startsWith('ip6.src')),
    ),
    'and IPv6 leaves through no DPU without one: untranslated, it would carry shared addresses',
  )
  t.throws(
    () =>
      compileGroupTopology({
        ...dual,
        network6: { cidr: 'fd00:a9fe::/64', gateway: 'fd00:a9fe::1' },
        members: [],
      }),
    InvalidTopologySpec,
    'a network6 on the transit links is refused',
  )
})

t.test("a relay port's addresses: MAC and its subnet address, else MAC only", async (t) => {
  const addressesOf = (relay: NonNullable<GroupTopologySpec['dhcpRelayPorts']>[number]) => {
    const row = compileGroupTopology({ ...base, dhcpRelayPorts: [relay] }).rows.find(
      (r) => r.table === 'Logical_Switch_Port' && r.row.name === relay.portName,
    )
    return row && 'addresses' in row.row ? row.row.addresses : undefined
  }
  const mac = '0a:00:00:00:00:fe'
  t.same(addressesOf({ dpuId: 'dpu-1', portName: 'r1', mac, ip: '10.10.10.9' }), [
    `${mac} 10.10.10.9`,
  ])
  t.same(addressesOf({ dpuId: 'dpu-1', portName: 'r1', mac }), [mac])
})

t.test(
  'with a memo: the same rows, unchanged parts reused, new members still checked',
  async (t) => {
    const memo = new CompileMemo()
    const host = (n: number, dpu = 'dpu-1'): GroupTopologySpec['members'][number] => ({
      hostName: `h${n}`,
      logicalPort: topologyNames.hostPort('alpha', `h${n}`),
      mac: `0a:00:00:00:01:${n.toString(16).padStart(2, '0')}`,
      ip: `10.10.10.${n + 10}`,
      dpu: { id: dpu },
      access: 'None',
    })
    const two = { ...base, members: [host(1), host(2, 'dpu-2')] }
    const first = compileGroupTopology(two, memo)
    t.same(first, compileGroupTopology(two), 'a memo changes nothing in what is compiled')
    const three = { ...base, members: [host(1), host(2, 'dpu-2'), host(3, 'dpu-2')] }
    const second = compileGroupTopology(three, memo)
    t.same(second, compileGroupTopology(three), 'nor after a host joins')
    const port = (rows: typeof first, name: string) =>
      rows.rows.find((r) => r.table === 'Logical_Switch_Port' && r.row.name === name)
    const h1 = topologyNames.hostPort('alpha', 'h1')
    t.equal(port(second, h1), port(first, h1), "an unchanged host's row is the same object")
    const gw = (rows: typeof first, dpu: string) =>
      rows.rows.find((r) => r.table === 'Logical_Router' && r.key === `gw/${dpu}`)
    t.equal(gw(second, 'dpu-1'), gw(first, 'dpu-1'), "an unchanged DPU's rows are reused")
    t.not(gw(second, 'dpu-2'), gw(first, 'dpu-2'), 'the DPU the host joined is rebuilt')

    const bad = { ...three, members: [...three.members, { ...host(4), mac: 'nope' }] }
    const error = (() => {
      try {
        compileGroupTopology(bad, memo)
      } catch (e) {
        return e
      }
    })()
    t.type(error, InvalidTopologySpec, 'a new invalid member is refused with a memo')
    t.match((error as InvalidTopologySpec).issues, [{ path: 'members.3.mac' }], 'naming its field')
    t.throws(
      () => compileGroupTopology({ ...three, members: [host(1), host(1)] }, memo),
      InvalidTopologySpec,
      'a host listed twice is refused with a memo too',
    )
    // Only what changed is checked for duplicate rows after the first compile: a new host
    // whose port is an existing host's is still refused, and the memo is left as it was.
    const clash = { ...host(5), logicalPort: topologyNames.hostPort('alpha', 'h1') }
    t.throws(
      () => compileGroupTopology({ ...three, members: [...three.members, clash] }, memo),
      { name: 'InvalidTopologySpec', message: /duplicate Logical_Switch_Port/ },
      "a new host's row that an unchanged host has is refused with a memo",
    )
    t.same(compileGroupTopology(three, memo), second, 'a refused compile leaves the memo as it was')
    // A host leaves, and another takes its port name: the old row's id is free again.
    const moved = { ...host(6), logicalPort: topologyNames.hostPort('alpha', 'h3') }
    const swapped = { ...base, members: [host(1), host(2, 'dpu-2'), moved] }
    t.same(
      compileGroupTopology(swapped, memo),
      compileGroupTopology(swapped),
      "a row id a removed host had may be another host's",
    )
    t.same(compileGroupTopology(three, memo), second, 'and back')
    memo.forget('alpha')
    t.same(compileGroupTopology(three, memo), second, 'forgetting only costs a rebuild')
  },
)

t.test(
  'dual-stack: the router advertises network6 for SLAAC, ports hold both addresses',
  async (t) => {
    const network6 = { cidr: 'fd00:10::/64', gateway: 'fd00:10::1' }
    const h1 = { ...ok, ip6: 'fd00:10::800:ff:fe00:1' }
    const h2 = {
      ...ok,
      hostName: 'h2',
      logicalPort: 'lp-h2',
      ip: '10.10.10.3',
      ip6: 'fd00:99::1',
      access: 'None' as const,
    }
    const spec = { ...base, network6, members: [h1, h2], dns: { zone: 'hz.test' } }
    const { rows, problems } = compileGroupTopology(spec)
    const port = (name: string) =>
      rows.find((r) => r.table === 'Logical_Switch_Port' && r.row.name === name)
    const routerPort = rows.find(
      (r) =>
        r.table === 'Logical_Router_Port' && r.row.name === topologyNames.routerSwitchPort('alpha'),
    )
    t.match(
      routerPort?.row,
      {
        networks: ['10.10.10.1/24', 'fd00:10::1/64'],
        ipv6_ra_configs: { address_mode: 'slaac', send_periodic: 'true' },
      },
      "the router's switch port is the IPv6 gateway and sends RAs for SLAAC",
    )
    const both = `${ok.mac} ${ok.ip} fd00:10::800:ff:fe00:1`
    t.match(
      port(ok.logicalPort)?.row,
      { addresses: [both], port_security: [both] },
      'a host in it: both addresses',
    )
    t.match(
      port('lp-h2')?.row,
      { addresses: [`${ok.mac} 10.10.10.3`] },
      'an IPv6 address outside network6 is left off the port',
    )
    t.match(problems, [{ host: 'h2', message: /fd00:99::1 is not in network6 fd00:10::\/64/ }])
    const dnsRow = rows.find(
      (r) => r.table === 'DNS' && r.row.external_ids['hydrazine:host'] === 'ok',
    )
    const records = dnsRow?.table === 'DNS' ? dnsRow.row.records : undefined
    t.match(
      records,
      { 'ok.alpha.hz.test': `${ok.ip} fd00:10::800:ff:fe00:1` },
      'its name resolves to both (A and AAAA)',
    )
    t.equal(
      Object.values(records ?? {}).filter((v) => v === 'ok.alpha.hz.test').length,
      2,
      'and both addresses resolve back to it (PTR)',
    )
    const v6Leaves = rows.filter(
      (r) =>
        (r.table === 'NAT' ||
          r.table === 'Logical_Router_Policy' ||
          r.table === 'Address_Set' ||
          r.table === 'Logical_Router_Static_Route') &&
        JSON.stringify(r.row).includes('fd00:10::'),
    )
    t.same(v6Leaves, [], 'no NAT, reroute or route takes IPv6 out of the group')
    const without = compileGroupTopology({ ...base, members: [ok] }).rows.find(
      (r) =>
        r.table === 'Logical_Router_Port' && r.row.name === topologyNames.routerSwitchPort('alpha'),
    )
    t.notOk(without && 'ipv6_ra_configs' in without.row, 'an IPv4-only group sends no RAs')
  },
)

t.test("each public switch drops what the fabric sends to the group's own addresses", async (t) => {
  const guards = (spec: GroupTopologySpec) =>
    compileGroupTopology(spec)
      .rows.filter((r) => r.table === 'ACL' && r.parent?.table === 'Logical_Switch')
      .map((r) => ({ on: r.parent?.key, ...(r.row as { match: string; action: string }) }))
  const localnet = JSON.stringify(topologyNames.localnetPort('alpha', 'dpu-1'))
  const [ip4] = guards({ ...base, extraSubnets: [{ cidr: '10.20.0.0/16', gateway: '10.20.0.1' }] })
  t.equal(ip4?.on, 'pub/dpu-1', "on the DPU's public switch")
  t.equal(ip4?.action, 'drop')
  t.equal(
    ip4?.match,
    `inport == ${localnet} && ip4.dst == {10.10.10.0/24, 10.20.0.0/16, 169.254.0.0/16}`,
    'every subnet of the group and the transit links, from the fabric',
  )
  // A tenant may number its network over the fabric's: its DPU's NAT IP stays reachable.
  const [over] = guards({
    ...base,
    cidr: '172.18.0.0/24',
    gateway: '172.18.0.1',
    members: [{ ...(base.members[0] as GroupMember), ip: '172.18.0.2' }],
  })
  t.equal(
    over?.match,
    `inport == ${localnet} && ip4.dst == {172.18.0.0/24, 169.254.0.0/16} && ip4.dst != {172.18.0.105}`,
    'but the NAT IP inside the subnet',
  )
  const dual = guards({
    ...base,
    network6: { cidr: 'fd00:10::/64', gateway: 'fd00:10::1' },
    dummyFabricIp6: 'fd00:fab::fa/64',
  })
  t.same(
    dual.map((g) => g.match),
    [
      `inport == ${localnet} && ip4.dst == {10.10.10.0/24, 169.254.0.0/16}`,
      `inport == ${localnet} && ip6.dst == {fd00:10::/64, fd00:a9fe::/64}`,
    ],
    'dual-stack: the IPv6 network and transit links too',
  )
})

t.test('a DPU without a NAT IP takes nothing out of the group', async (t) => {
  const h1 = base.members[0] as GroupMember
  const spec: GroupTopologySpec = {
    ...base,
    members: [
      { ...h1, dpu: { id: 'dpu-1' } },
      {
        ...h1,
        hostName: 'h2',
        logicalPort: topologyNames.hostPort('alpha', 'h2'),
        mac: '0a:00:00:00:00:02',
        ip: '10.10.10.3',
        dpu: { id: 'dpu-1' },
        access: 'None',
      },
    ],
  }
  const { rows, problems } = compileGroupTopology(spec)
  t.match(problems, [{ host: 'h1', message: /no NAT IP; it gets no NAT and stays in the group/ }])
  t.same(problems?.length, 1, 'the None host has nothing to ask for')
  t.notOk(
    rows.some(
      (r) =>
        r.table === 'NAT' ||
        (r.table === 'Logical_Router_Static_Route' && r.row.ip_prefix === '0.0.0.0/0') ||
        (r.table === 'Logical_Router_Policy' && r.row.action === 'reroute'),
    ),
    'no NAT, default route or reroute: without one, its hosts meet the drop below the reroutes',
  )
  t.ok(
    rows.some((r) => r.table === 'Logical_Router_Policy' && r.row.action === 'drop'),
    'which is there',
  )
})

t.test('a host port is bound on its own DPU only', async (t) => {
  const { rows } = compileGroupTopology(base)
  const port = rows.find((r) => r.key === `lsp/${topologyNames.hostPort('alpha', 'h1')}`)
  t.same((port?.row as { options?: unknown } | undefined)?.options, {
    'requested-chassis': 'dpu-1',
  })
})
