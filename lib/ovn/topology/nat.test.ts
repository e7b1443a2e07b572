import t from 'tap'
import {
  compileGroupTopology,
  type GroupMember,
  type GroupTopologySpec,
  InvalidTopologySpec,
  NatConflict,
  topologyNames,
} from '../index.ts'
import { groupContext, newDraft } from './context.ts'
import { base, h1, natRules, ok, policiesOf } from './fixtures/specs.ts'
import { natRows } from './nat.ts'

t.test('rejects two FabricAccess hosts on one DPU (one NAT IP)', async (t) => {
  const spec: GroupTopologySpec = {
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
  }
  t.throws(() => compileGroupTopology(spec), NatConflict)
})

t.test("a DPU's NAT built straight from the group context: SNAT, then the host's", async (t) => {
  const draft = newDraft()
  natRows(groupContext(base), draft, 'dpu-1', 0, [h1])
  t.same(draft.problems, [])
  t.same(natRules(draft.rows), [
    'dnat_and_snat 172.18.0.105 10.10.10.2',
    'snat 172.18.0.105 10.10.10.0/24',
  ])
  t.ok(
    draft.rows.every((r) => r.table !== 'NAT' || r.parent?.key === 'gw/dpu-1'),
    "on the DPU's gateway router",
  )
})

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
