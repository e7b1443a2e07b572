import t from 'tap'
import {
  CompileMemo,
  compileGroupTopology,
  type GroupTopologySpec,
  InvalidTopologySpec,
  Ipv6NatUnsupported,
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
  const names = a.rows.map((r) => (r.row as { name?: string }).name).filter((n) => n !== undefined)
  t.ok(
    names.every((n) => n.startsWith('hz/alpha/')),
    'every named row is prefixed with the group',
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

const rejects: { name: string; spec: GroupTopologySpec; error: new (...a: never[]) => Error }[] = [
  {
    name: 'host outside the subnet',
    spec: {
      ...base,
      members: [{ ...(base.members[0] as GroupTopologySpec['members'][number]), ip: '10.10.11.2' }],
    },
    error: InvalidTopologySpec,
  },
  {
    name: 'PublicAccess without a public IP',
    spec: {
      ...base,
      members: [
        { ...(base.members[0] as GroupTopologySpec['members'][number]), access: 'PublicAccess' },
      ],
    },
    error: InvalidTopologySpec,
  },
  {
    name: 'two FabricAccess hosts on one DPU (one NAT IP)',
    spec: {
      ...base,
      members: [
        base.members[0] as GroupTopologySpec['members'][number],
        {
          ...(base.members[0] as GroupTopologySpec['members'][number]),
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
    name: 'relay address outside the subnet',
    spec: {
      ...base,
      dhcpRelayPorts: [
        { dpuId: 'dpu-1', portName: 'r1', mac: '0a:00:00:00:00:fe', ip: '10.10.11.9' },
      ],
    },
    error: InvalidTopologySpec,
  },
  {
    name: 'relay address without a MAC',
    spec: { ...base, dhcpRelayPorts: [{ dpuId: 'dpu-1', portName: 'r1', ip: '10.10.10.9' }] },
    error: InvalidTopologySpec,
  },
]
for (const c of rejects) {
  t.test(`rejects ${c.name}`, async (t) => {
    t.throws(() => compileGroupTopology(c.spec), c.error)
  })
}

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
      (r.table === 'NAT' || r.table === 'Logical_Router_Policy') &&
      (r.row.external_ids['hydrazine:host'] === 'h1' || JSON.stringify(r.row).includes('fd00::2')),
  )
  t.same(namesHost, [], 'no NAT or reroute policy for the IPv6 host')
})

for (const access of ['FabricAccess', 'PublicAccess'] as const) {
  t.test(`an IPv6 host with ${access} is refused, naming the host`, async (t) => {
    const member = {
      ...(v6.members[0] as GroupTopologySpec['members'][number]),
      access,
      ...(access === 'PublicAccess' ? { publicIp: '203.0.113.7' } : {}),
    }
    t.throws(() => compileGroupTopology({ ...v6, members: [member] }), {
      constructor: Ipv6NatUnsupported,
      code: 'IPV6_NAT_UNSUPPORTED',
      host: 'h1',
      access,
    })
  })
}

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
    memo.forget('alpha')
    t.same(compileGroupTopology(three, memo), second, 'forgetting only costs a rebuild')
  },
)
