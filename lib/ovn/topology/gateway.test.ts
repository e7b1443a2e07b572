import t from 'tap'
import {
  compileGroupTopology,
  type GroupMember,
  type GroupTopologySpec,
  topologyNames,
  transitAddresses,
} from '../index.ts'
import { groupContext, newDraft } from './context.ts'
import { base, h1 } from './fixtures/specs.ts'
import { gatewayRows } from './gateway.ts'

t.test("a DPU's gateway built straight from the group context", async (t) => {
  const draft = newDraft()
  gatewayRows(groupContext(base), draft, 'dpu-1', 0, [h1])
  t.same(draft.problems, [])
  const gw = draft.rows.find((r) => r.table === 'Logical_Router')
  t.match(gw, {
    key: 'gw/dpu-1',
    row: { name: topologyNames.gatewayRouter('alpha', 'dpu-1'), options: { chassis: 'dpu-1' } },
  })
  t.same(
    draft.rows.flatMap((r) => (r.table === 'Logical_Switch' ? [r.row.name] : [])),
    [topologyNames.transitSwitch('alpha', 'dpu-1'), topologyNames.publicSwitch('alpha', 'dpu-1')],
    'its transit and public switches',
  )
  t.ok(
    draft.rows.every((r) => r.row.external_ids['hydrazine:dpu'] === 'dpu-1'),
    'every row names its DPU',
  )
  t.notOk(
    draft.rows.some((r) => r.table === 'NAT'),
    'no NAT: that is the next part',
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
