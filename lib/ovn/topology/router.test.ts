import t from 'tap'
import {
  CompileMemo,
  compileGroupTopology,
  type GroupTopologySpec,
  topologyNames,
} from '../index.ts'
import { groupContext } from './context.ts'
import { base, h1, natRules, ok, policiesOf, rowsOf } from './fixtures/specs.ts'
import { addressSetNames } from './names.ts'
import { edgePolicyRows, guardRows, routerRows } from './router.ts'

t.test('the guard and the router built straight from the group context', async (t) => {
  const c = groupContext({
    ...base,
    extraSubnets: [{ cidr: '10.20.0.0/24', gateway: '10.20.0.1' }],
  })
  t.match(guardRows(c), [
    {
      table: 'Address_Set',
      key: 'guard',
      row: { name: addressSetNames.guard('alpha'), addresses: [] },
    },
  ])
  const rows = routerRows(c)
  t.same(
    rows.map((r) => r.key),
    [
      'lr',
      `lrp/${topologyNames.routerSwitchPort('alpha')}`,
      `lsp/${topologyNames.switchRouterPort('alpha')}`,
      'policy/internal/10.10.10.0/24',
      'policy/internal/10.20.0.0/24',
    ],
    'the router, its link to the switch, and the policies between its routed subnets',
  )
  t.same(
    edgePolicyRows(c).map((r) => r.row),
    [
      {
        priority: 999,
        match: 'ip4 && ip4.dst != {10.10.10.0/24, 10.20.0.0/24}',
        action: 'drop',
        external_ids: {
          'hydrazine:owner': 'group/alpha',
          'hydrazine:group': 'alpha',
          'hydrazine:key': 'policy/edge/ip4',
        },
      },
    ],
  )
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
