import t from 'tap'
import {
  compileGroupTopology,
  type GroupMember,
  type GroupTopologySpec,
  topologyNames,
} from '../index.ts'
import { groupContext, newDraft } from './context.ts'
import { base, h1, ok, rowsOf } from './fixtures/specs.ts'
import { hostPortRows, switchRows } from './switch.ts'

t.test('the switch, and a host port built straight from the group context', async (t) => {
  const c = groupContext(base)
  t.same(switchRows(c), [
    {
      table: 'Logical_Switch',
      key: 'ls',
      row: {
        name: 'hz/alpha/ls',
        external_ids: {
          'hydrazine:owner': 'group/alpha',
          'hydrazine:group': 'alpha',
          'hydrazine:key': 'ls',
        },
      },
    },
  ])
  const draft = newDraft()
  hostPortRows(c, draft, h1)
  t.same(draft.problems, [])
  t.notOk(draft.omitted)
  t.match(draft.rows, [
    {
      table: 'Logical_Switch_Port',
      key: `lsp/${h1.logicalPort}`,
      row: { name: h1.logicalPort, addresses: [`${h1.mac} ${h1.ip}`] },
      parent: { table: 'Logical_Switch', key: 'ls', column: 'ports' },
    },
  ])
  const away = newDraft()
  hostPortRows(c, away, { ...h1, ip: '192.0.2.1' })
  t.ok(away.omitted, 'a host outside every subnet is left out')
  t.same(away.rows, [])
})

const whole = compileGroupTopology({ ...base, members: [ok] })

const problems: {
  name: string
  member: GroupMember
  extraSubnets?: GroupTopologySpec['extraSubnets']
  problem: { code: string; host?: string; message: RegExp }
  /** Keys of the rows built for the host. */
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
]
for (const c of problems) {
  t.test(`${c.name}, named in problems; the rest of the group is built`, async (t) => {
    const compiled = compileGroupTopology({
      ...base,
      members: [ok, c.member],
      ...(c.extraSubnets ? { extraSubnets: c.extraSubnets } : {}),
    })
    t.match(compiled.problems, [c.problem])
    t.equal(compiled.problems?.length, 1, 'one problem')
    t.same(rowsOf(compiled.rows, 'h1'), c.built)
    t.same(rowsOf(compiled.rows, 'ok'), rowsOf(whole.rows, 'ok'), 'the other host is whole')
    if (c.built.length === 0) {
      t.notOk(
        compiled.rows.some((r) => r.key === 'gw/dpu-1'),
        'no gateway router for a DPU that serves only the host left out',
      )
    }
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
      (r.table === 'NAT' || r.table === 'Logical_Router_Policy' || r.table === 'Address_Set') &&
      (r.row.external_ids['hydrazine:host'] === 'h1' || JSON.stringify(r.row).includes('fd00::2')),
  )
  t.same(namesHost, [], 'no NAT or reroute policy for the IPv6 host')
})

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

t.test('a host port is bound on its own DPU only', async (t) => {
  const { rows } = compileGroupTopology(base)
  const port = rows.find((r) => r.key === `lsp/${topologyNames.hostPort('alpha', 'h1')}`)
  t.same((port?.row as { options?: unknown } | undefined)?.options, {
    'requested-chassis': 'dpu-1',
  })
})
