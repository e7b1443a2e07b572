/**
 * The compiler's output for rich specs, pinned: every row, problem and policy status of
 * each fixture must equal `fixtures/compile-snapshot.json`, byte for byte. Refactoring the
 * compiler keeps this passing; a change of what it builds rewrites the snapshot on purpose
 * (`HZ_WRITE_SNAPSHOT=1 npx tap lib/ovn/topology/compile-snapshot.test.ts`).
 */
import { readFileSync, writeFileSync } from 'node:fs'
import t from 'tap'
import {
  CompileMemo,
  compileGroupTopology,
  type DesiredRows,
  type GroupMember,
  type GroupTopologySpec,
  topologyNames,
} from '../index.ts'

const SNAPSHOT = new URL('./fixtures/compile-snapshot.json', import.meta.url)

const host = (
  name: string,
  ip: string,
  dpu: GroupMember['dpu'],
  access: GroupMember['access'],
  extra: Partial<GroupMember> = {},
): GroupMember => ({
  hostName: name,
  logicalPort: topologyNames.hostPort('rich', name),
  mac: `0a:00:00:00:${ip.split(/[.:]/).at(-1)?.padStart(2, '0')}:${name.length.toString(16).padStart(2, '0')}`,
  ip,
  dpu,
  access,
  ...extra,
})

const dpu1 = { id: 'dpu-1', natIp: '172.18.0.101', natIp6: 'fd00:fab::101' }
const dpu2 = { id: 'dpu-2', natIp: '172.18.0.102', natIp6: 'fd00:fab::102' }
const dpu3 = { id: 'dpu-3', natIp: '172.18.0.103' }
const dpu4 = { id: 'dpu-4' }

/** Several hosts on several DPUs, NAT, public IPs, IPv6 out, DNS, policies, relays. */
const rich: GroupTopologySpec = {
  name: 'rich',
  cidr: '10.10.10.0/24',
  gateway: '10.10.10.1',
  extraSubnets: [{ cidr: '10.20.0.0/24', gateway: '10.20.0.1' }, { cidr: '10.30.0.0/24' }],
  network6: { cidr: 'fd00:10::/64', gateway: 'fd00:10::1' },
  dummyFabricIp: '172.18.0.254/24',
  fabricGatewayIp: '172.18.0.1',
  dummyFabricIp6: 'fd00:fab::fa/64',
  fabricGatewayIp6: 'fd00:fab::c8',
  physicalNetwork: 'fabric',
  dns: { zone: 'hz.test' },
  members: [
    host('web', '10.10.10.2', dpu1, 'PublicAccess', {
      ip6: 'fd00:10::2',
      publicIp: '203.0.113.7',
      publicIp6: '2001:db8:ff::7',
      dnsName: 'www',
    }),
    host('db', '10.10.10.3', dpu1, 'None', { ip6: 'fd00:10::3' }),
    host('cache', '10.20.0.4', dpu2, 'PublicAccess'),
    host('batch', '10.20.0.5', dpu2, 'None', { ip6: 'fd00:10::5' }),
    host('quiet', '10.30.0.6', dpu3, 'FabricAccess'),
    host('edge', '10.10.10.7', dpu3, 'FabricAccess', { dnsName: 'same' }),
    host('twin', '10.10.10.8', dpu4, 'FabricAccess', { dnsName: 'same' }),
    host('far', '10.99.0.9', dpu4, 'None'),
    host('v6only', 'fd00:10::a', dpu2, 'PublicAccess'),
    host('stray6', '10.10.10.11', dpu3, 'None', { ip6: 'fd00:99::b' }),
  ],
  dhcpRelayPorts: [
    {
      dpuId: 'dpu-1',
      portName: topologyNames.relayPort('rich', 'dpu-1'),
      mac: '0a:00:00:00:00:fe',
      ip: '10.10.10.254',
    },
    {
      dpuId: 'dpu-2',
      portName: topologyNames.relayPort('rich', 'dpu-2'),
      mac: '0a:00:00:00:00:fd',
    },
    { dpuId: 'dpu-3', portName: topologyNames.relayPort('rich', 'dpu-3'), ip: '10.99.0.1' },
  ],
  policies: [
    {
      name: 'deny-ssh',
      direction: 'ingress',
      action: 'deny',
      protocol: 'tcp',
      ports: { from: 22, to: 22 },
      priority: 10,
    },
    {
      name: 'web-to-db',
      direction: 'egress',
      action: 'allow',
      protocol: 'tcp',
      hosts: ['web'],
      peer: { hosts: ['db', 'nobody'] },
      ports: { from: 5432, to: 5432 },
      priority: 20,
    },
    {
      name: 'ping',
      direction: 'ingress',
      action: 'allow',
      protocol: 'icmp',
      peer: { cidr: '192.0.2.0/24' },
      priority: 20,
    },
    {
      name: 'ghost',
      direction: 'ingress',
      action: 'deny',
      protocol: 'udp',
      hosts: ['nobody'],
      priority: 30,
    },
  ],
}

/** IPv4 only, no DNS nor policies: two DPUs, one without a NAT IP. */
const plain: GroupTopologySpec = {
  name: 'plain',
  cidr: '192.168.5.0/24',
  gateway: '192.168.5.1',
  dummyFabricIp: '172.18.0.254/24',
  members: [
    host('a', '192.168.5.2', { id: 'dpu-a', natIp: '172.18.0.50' }, 'FabricAccess'),
    host('b', '192.168.5.3', { id: 'dpu-b' }, 'PublicAccess', { publicIp: '203.0.113.9' }),
    host('c', '192.168.5.4', { id: 'dpu-a', natIp: '172.18.0.50' }, 'None'),
  ],
}

/** IPv6-only group whose IPv6 stays inside (no fabric IPv6). */
const v6only: GroupTopologySpec = {
  name: 'sixonly',
  cidr: 'fd00:66::/64',
  gateway: 'fd00:66::1',
  network6: { cidr: 'fd00:66::/64', gateway: 'fd00:66::1' },
  dummyFabricIp: '172.18.0.254/24',
  dns: { zone: 'six.test' },
  members: [
    host('s1', 'fd00:66::2', { id: 'dpu-6' }, 'None'),
    host('s2', 'fd00:66::3', { id: 'dpu-7' }, 'FabricAccess'),
  ],
}

const fixtures: Record<string, GroupTopologySpec> = { rich, plain, v6only }

/** Everything a compile hands out, as JSON. */
const shape = (d: DesiredRows) => ({
  group: d.group,
  owner: d.owner,
  rows: d.rows,
  problems: d.problems,
  policies: d.policies,
})

const actual: Record<string, unknown> = {}
for (const [name, spec] of Object.entries(fixtures))
  actual[name] = shape(compileGroupTopology(spec))

// Through a memo: a compile that follows another (hosts changed, moved, gone) builds the
// same rows as a compile from nothing.
const memo = new CompileMemo()
const members = rich.members
compileGroupTopology({ ...rich, members: members.slice(0, 6) }, memo)
const moved = [
  ...members.slice(2).reverse(),
  { ...(members[0] as GroupMember), dpu: dpu4 },
  { ...(members[1] as GroupMember), ip: '10.20.0.33', ip6: 'fd00:10::33' },
]
const afterMemo = compileGroupTopology({ ...rich, members: moved }, memo)
actual.richMoved = shape(afterMemo)

if (process.env.HZ_WRITE_SNAPSHOT === '1') {
  writeFileSync(SNAPSHOT, `${JSON.stringify(actual, null, 2)}\n`)
}

t.test('compiled rows equal the pinned snapshot, fixture by fixture', async (t) => {
  const expected = JSON.parse(readFileSync(SNAPSHOT, 'utf8')) as Record<string, unknown>
  t.same(Object.keys(actual), Object.keys(expected))
  for (const name of Object.keys(expected)) {
    t.equal(JSON.stringify(actual[name]), JSON.stringify(expected[name]), name)
  }
})

t.test('a compile through a memo equals one from nothing', async (t) => {
  t.equal(
    JSON.stringify(actual.richMoved),
    JSON.stringify(shape(compileGroupTopology({ ...rich, members: moved }))),
  )
})
