import t from 'tap'
import type { Ipam } from '../../lib/ipam/index.ts'
import type {
  HostAccess,
  ManagedResource,
  ResourceGroup,
  ResourceGroupSpec,
  ResourceGroupStatus,
} from '../../lib/model/objects.ts'
import { compileGroupTopology, topologyNames } from '../../lib/ovn/index.ts'
import type { StateStore } from '../../lib/state/store.ts'
import { storedGroup, storedHost } from '../../test/helpers/objects.ts'
import type { FabricSettings } from './deps.ts'
import {
  appliedStatus,
  type GroupState,
  type MemberState,
  type MembersStatus,
  membersStatusOf,
  readGroupState,
  topologyOf,
} from './group-state.ts'
import { relayMacOf, relayOwnerOf } from './network.ts'

const stamp = '2024-01-01T00:00:00.000Z'
const group = (extra: Partial<ResourceGroupSpec> = {}) => storedGroup('group-a', extra)

function host(
  name: string,
  dpu: string,
  access: HostAccess = 'None',
  ips: string[] = ['172.18.0.10', '172.18.0.110'],
): ManagedResource {
  const hostMAC = `52:54:00:00:00:${name.slice(-1).padStart(2, '0')}`
  return storedHost(name, { hostMAC, dpu: { id: dpu, ips }, hostAccess: access })
}

const member = (h: ManagedResource, ip: string, publicIp?: string): MemberState => ({
  host: h,
  ip,
  ...(publicIp ? { publicIp } : {}),
})

function state(
  members: MemberState[],
  extra: { group?: ResourceGroup; relayIps?: [string, string][] } = {},
): GroupState {
  return {
    group: extra.group ?? group(),
    members,
    relayIps: new Map(extra.relayIps ?? []),
    staleRelayOwners: [],
  }
}

const fabric: FabricSettings = {
  dummyIp: '172.18.0.254/24',
  gateway: '172.18.0.1',
  physicalNetwork: 'fabric-net',
}

t.test('topologyOf: the group network and the fabric settings', async (t) => {
  const spec = topologyOf(state([]), fabric)
  t.same(spec, {
    name: 'group-a',
    cidr: '10.10.10.0/24',
    gateway: '10.10.10.1',
    dummyFabricIp: '172.18.0.254/24',
    fabricGatewayIp: '172.18.0.1',
    physicalNetwork: 'fabric-net',
    members: [],
  })
  const noGateway = topologyOf(state([]), { dummyIp: '172.18.0.254/24', physicalNetwork: 'p' })
  t.notOk('fabricGatewayIp' in noGateway, 'no fabric gateway unless configured')
})

t.test('topologyOf: one member per host, named by topologyNames', async (t) => {
  const h1 = host('host-1', 'dpu-1', 'FabricAccess')
  const h2 = host('host-2', 'dpu-2', 'None', ['172.18.0.12'])
  const spec = topologyOf(state([member(h1, '10.10.10.2'), member(h2, '10.10.10.50')]), fabric)
  t.same(spec.members, [
    {
      hostName: 'host-1',
      logicalPort: topologyNames.hostPort('group-a', 'host-1'),
      mac: '52:54:00:00:00:01',
      ip: '10.10.10.2',
      dpu: { id: 'dpu-1', natIp: '172.18.0.110' },
      access: 'FabricAccess',
    },
    {
      hostName: 'host-2',
      logicalPort: topologyNames.hostPort('group-a', 'host-2'),
      mac: '52:54:00:00:00:02',
      ip: '10.10.10.50',
      dpu: { id: 'dpu-2' },
      access: 'None',
    },
  ])
})

t.test('topologyOf: access levels, and a public IP only with PublicAccess', async (t) => {
  const cases: {
    access: HostAccess
    publicIp?: string
    expected: { access: HostAccess; publicIp?: string }
  }[] = [
    { access: 'None', expected: { access: 'None' } },
    { access: 'None', publicIp: '203.0.113.7', expected: { access: 'None' } },
    { access: 'FabricAccess', expected: { access: 'FabricAccess' } },
    { access: 'FabricAccess', publicIp: '203.0.113.7', expected: { access: 'FabricAccess' } },
    { access: 'PublicAccess', expected: { access: 'PublicAccess' } },
    {
      access: 'PublicAccess',
      publicIp: '203.0.113.7',
      expected: { access: 'PublicAccess', publicIp: '203.0.113.7' },
    },
  ]
  for (const c of cases) {
    const [m] = topologyOf(
      state([member(host('host-1', 'dpu-1', c.access), '10.10.10.2', c.publicIp)]),
      fabric,
    ).members
    const label = `${c.access} ${c.publicIp ? 'holding' : 'without'} a public IP`
    t.equal(m?.access, c.expected.access, `${label}: access`)
    t.equal(m?.publicIp, c.expected.publicIp, `${label}: public IP`)
    t.equal(m && 'publicIp' in m, c.expected.publicIp !== undefined, `${label}: publicIp key`)
  }
})

t.test('topologyOf: relay ports only with a DHCP server, one per DPU in use', async (t) => {
  const members = [
    member(host('host-1', 'dpu-2'), '10.10.10.2'),
    member(host('host-2', 'dpu-1'), '10.10.10.3'),
    member(host('host-3', 'dpu-2'), '10.10.10.4'),
  ]
  const relayIps: [string, string][] = [
    ['dpu-1', '10.10.10.250'],
    ['dpu-9', '10.10.10.249'],
  ]
  const cases: {
    name: string
    group: ResourceGroup
    members: MemberState[]
    relays: { dpuId: string; ip?: string }[] | undefined
  }[] = [
    { name: 'no DHCP server: no relay', group: group(), members, relays: undefined },
    {
      name: 'DHCP server, no member: no relay',
      group: group({ dhcpServer: '172.18.0.53' }),
      members: [],
      relays: [],
    },
    {
      name: 'DHCP server: one per DPU with a member, sorted; address when reserved',
      group: group({ dhcpServer: '172.18.0.53' }),
      members,
      relays: [{ dpuId: 'dpu-1', ip: '10.10.10.250' }, { dpuId: 'dpu-2' }],
    },
  ]
  for (const c of cases) {
    const spec = topologyOf(state(c.members, { group: c.group, relayIps }), fabric)
    t.same(
      spec.dhcpRelayPorts,
      c.relays?.map((r) => ({
        dpuId: r.dpuId,
        portName: topologyNames.relayPort('group-a', r.dpuId),
        mac: relayMacOf('group-a', r.dpuId),
        ...(r.ip ? { ip: r.ip } : {}),
      })),
      c.name,
    )
  }
})

t.test('topologyOf: what it returns compiles into the host ports and NAT', async (t) => {
  const h1 = host('host-1', 'dpu-1', 'PublicAccess')
  const { rows } = compileGroupTopology(
    topologyOf(state([member(h1, '10.10.10.2', '203.0.113.7')]), fabric),
  )
  const nat = rows.flatMap((r) =>
    r.table === 'NAT' ? [`${r.row.type} ${r.row.external_ip} ${r.row.logical_ip}`] : [],
  )
  t.same(nat.sort(), [
    'dnat 172.18.0.110 10.10.10.2',
    'dnat_and_snat 203.0.113.7 10.10.10.2',
    'snat 172.18.0.110 10.10.10.0/24',
  ])
  t.ok(
    rows.some(
      (r) =>
        r.table === 'Logical_Switch_Port' &&
        r.row.name === topologyNames.hostPort('group-a', 'host-1'),
    ),
    "the host's port",
  )
})

t.test('readGroupState: live members with addresses; relays kept or stale', async (t) => {
  const hosts = [
    host('host-1', 'dpu-1', 'PublicAccess'),
    { ...host('host-2', 'dpu-2'), deletion: { requestedAt: stamp, force: false } },
    host('host-3', 'dpu-3'),
    host('host-4', 'dpu-1'),
    // Failed at its public IP, after its own address was taken: never in the topology.
    { ...host('host-5', 'dpu-1'), status: { ...host('host-5', 'dpu-1').status, phase: 'Failed' } },
    // Failed later, once its attach had put it in the topology: it stays.
    {
      ...host('host-6', 'dpu-1'),
      status: {
        ...host('host-6', 'dpu-1').status,
        phase: 'Failed',
        logicalPortReference: {
          logicalPort: topologyNames.hostPort('group-a', 'host-6'),
          dpu: 'dpu-1',
        },
      },
    },
  ] as ManagedResource[]
  let relaying = group({ dhcpServer: '172.18.0.53' })
  const store = {
    groups: { get: async (name: string) => (name === 'group-a' ? relaying : undefined) },
    hosts: { inGroup: async () => hosts },
  } as unknown as StateStore
  const ipam = {
    allocations: async () => [
      { owner: 'host-1', ip: '10.10.10.2' },
      { owner: 'host-2', ip: '10.10.10.3' },
      { owner: 'host-4', ip: '10.10.10.5' },
      { owner: 'host-5', ip: '10.10.10.6' },
      { owner: 'host-6', ip: '10.10.10.7' },
      { owner: relayOwnerOf('dpu-1'), ip: '10.10.10.250' },
      { owner: relayOwnerOf('dpu-2'), ip: '10.10.10.251' },
    ],
    publicIpsOf: async (owners: readonly string[]) =>
      new Map(owners.includes('host-1') ? [['host-1', '203.0.113.7']] : []),
  } as unknown as Ipam

  t.equal(await readGroupState({ store, ipam }, 'group-b'), undefined, 'no such group')
  const read = await readGroupState({ store, ipam }, 'group-a')
  t.same(
    read?.members.map((m) => [m.host.name, m.ip, m.publicIp]),
    [
      ['host-1', '10.10.10.2', '203.0.113.7'],
      ['host-4', '10.10.10.5', undefined],
      ['host-6', '10.10.10.7', undefined],
    ],
    'without the host being deleted (host-2), holding no address yet (host-3) or Failed before its attach wrote it (host-5)',
  )
  t.same([...(read?.relayIps ?? [])], [['dpu-1', '10.10.10.250']], 'relay of a DPU in use')
  t.same(read?.staleRelayOwners, [relayOwnerOf('dpu-2')], 'relay of a DPU no member uses')

  relaying = group()
  const stopped = await readGroupState({ store, ipam }, 'group-a')
  t.same([...(stopped?.relayIps ?? [])], [], 'without a DHCP server no relay is in use')
  t.same(
    stopped?.staleRelayOwners,
    [relayOwnerOf('dpu-1'), relayOwnerOf('dpu-2')],
    'and every relay address goes back to the pool',
  )
})

t.test('topologyOf: extra subnets, with their gateway when they have one', async (t) => {
  const extraSubnets = [
    { cidr: '10.20.0.0/24', gateway: '10.20.0.1', dhcp: false },
    { cidr: 'fd00:20::/64' },
  ]
  const spec = topologyOf(state([], { group: group({ extraSubnets }) }), fabric)
  t.same(spec.extraSubnets, [
    { cidr: '10.20.0.0/24', gateway: '10.20.0.1' },
    { cidr: 'fd00:20::/64' },
  ])
  t.notOk('extraSubnets' in topologyOf(state([]), fabric), 'none without extra subnets')
})

t.test('membersStatusOf: how many members, and the NAT IPs of their DPUs', async (t) => {
  const cases: { name: string; members: MemberState[]; expected: MembersStatus }[] = [
    { name: 'no member', members: [], expected: { managedResourceCount: 0, snatIPs: [] } },
    {
      name: 'two DPUs, one without a NAT IP; a NAT IP once however many hosts share it',
      members: [
        member(host('host-1', 'dpu-2', 'None', ['172.18.0.12', '172.18.0.112']), '10.10.10.2'),
        member(host('host-2', 'dpu-1', 'FabricAccess'), '10.10.10.3'),
        member(host('host-3', 'dpu-2', 'None', ['172.18.0.12', '172.18.0.112']), '10.10.10.4'),
        member(host('host-4', 'dpu-3', 'None', ['172.18.0.13']), '10.10.10.5'),
      ],
      expected: { managedResourceCount: 4, snatIPs: ['172.18.0.110', '172.18.0.112'] },
    },
  ]
  for (const c of cases) t.same(membersStatusOf(state(c.members)), c.expected, c.name)
})

t.test('appliedStatus: what an apply writes into the group status, and when nothing', async (t) => {
  const ready = group().status
  const none: MembersStatus = { managedResourceCount: 0, snatIPs: [] }
  const two: MembersStatus = { managedResourceCount: 2, snatIPs: ['172.18.0.110'] }
  const problem = {
    code: 'IPV6_NAT_UNSUPPORTED',
    message: 'host-1 has no IPv4 address',
    host: 'host-1',
  }
  const cond = (type: string, status: 'True' | 'False', reason = 'R') => ({
    type,
    status,
    reason,
    message: `${type} ${status}`,
    lastTransitionTime: stamp,
  })
  const failedInOvn = {
    ...ready,
    phase: 'Failed' as const,
    configsSynced: false,
    conditions: [cond('OvnConfigured', 'False', 'OVSDB_CONSTRAINT_VIOLATION')],
  }
  const degraded = {
    ...ready,
    conditions: [{ ...cond('Degraded', 'True', 'TopologyIncomplete'), message: problem.message }],
  }
  const cases: {
    name: string
    status: ResourceGroupStatus
    specVersion?: number
    members?: MembersStatus
    problems?: (typeof problem)[]
    /** What the written status must match; undefined: nothing is written. */
    expected: Record<string, unknown> | undefined
  }[] = [
    { name: 'nothing new: nothing to write', status: ready, expected: undefined },
    {
      name: 'members changed: their count and NAT IPs',
      status: ready,
      members: two,
      expected: { managedResourceCount: 2, snatIPs: ['172.18.0.110'] },
    },
    {
      name: 'a host left out: Degraded, naming it',
      status: ready,
      problems: [problem],
      expected: { conditions: [{ type: 'Degraded', status: 'True', message: problem.message }] },
    },
    {
      name: 'still left out: nothing to write',
      status: degraded,
      problems: [problem],
      expected: undefined,
    },
    { name: 'no longer left out: Degraded goes', status: degraded, expected: { conditions: [] } },
    {
      name: 'Failed in OVN alone, current version provisioned: Ready again',
      status: failedInOvn,
      expected: {
        phase: 'Ready',
        configsSynced: true,
        conditions: [{ type: 'OvnConfigured', status: 'True', reason: 'TopologyApplied' }],
      },
    },
    {
      name: 'Failed in OVN before the current version was provisioned: left to group.create',
      status: failedInOvn,
      specVersion: 2,
      expected: undefined,
    },
    {
      name: 'Failed for its network too: stays Failed',
      status: {
        ...failedInOvn,
        conditions: [...failedInOvn.conditions, cond('NetworkAllocated', 'False')],
      },
      expected: undefined,
    },
  ]
  for (const c of cases) {
    const next = appliedStatus(
      { status: c.status, specVersion: c.specVersion ?? 1 },
      c.members ?? none,
      c.problems ?? [],
      'shared',
    )
    if (c.expected === undefined) t.equal(next, undefined, c.name)
    else t.match(next, c.expected, c.name)
    if (Array.isArray(c.expected?.conditions) && c.expected.conditions.length === 0) {
      t.same(next?.conditions, [], `${c.name}: none left`)
    }
  }
})
