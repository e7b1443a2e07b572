import t from 'tap'
import { networkSpecOf } from '../../lib/ipam/group-network.ts'
import type { ResourceGroup, ResourceGroupSpec } from '../../lib/model/objects.ts'
import {
  ownsSlaacAddress,
  relayDpuOf,
  relayMacOf,
  relayOwnerOf,
  type SlaacChange,
  slaacChangeOf,
} from './network.ts'

function group(spec: Omit<ResourceGroupSpec, 'tenantId'>): ResourceGroup {
  return {
    name: 'group-a',
    spec: { tenantId: 'tenant-a', ...spec },
    specVersion: 1,
    status: {
      phase: 'Provisioning',
      conditions: [],
      snatIPs: [],
      managedResourceCount: 0,
      observedVersion: 0,
      configsSynced: false,
    },
    createdAt: '2024-01-01T00:00:00.000Z',
    updatedAt: '2024-01-01T00:00:00.000Z',
  }
}

t.test('networkSpecOf: the primary network is one DHCP subnet with one pool', async (t) => {
  const cases: { cidr: string; gateway: string; pool: [string, string]; why: string }[] = [
    {
      cidr: '10.10.10.0/24',
      gateway: '10.10.10.1',
      pool: ['10.10.10.1', '10.10.10.254'],
      why: 'skips network and broadcast',
    },
    {
      cidr: '10.0.0.0/30',
      gateway: '10.0.0.1',
      pool: ['10.0.0.1', '10.0.0.2'],
      why: 'the two host addresses',
    },
    {
      cidr: '10.0.0.0/31',
      gateway: '10.0.0.0',
      pool: ['10.0.0.0', '10.0.0.1'],
      why: 'point-to-point: both',
    },
    {
      cidr: '10.0.0.5/32',
      gateway: '10.0.0.5',
      pool: ['10.0.0.5', '10.0.0.5'],
      why: 'the one address',
    },
    { cidr: '10.0.0.0/8', gateway: '10.0.0.1', pool: ['10.0.0.1', '10.255.255.254'], why: 'large' },
  ]
  for (const c of cases) {
    t.same(
      networkSpecOf(group({ network: { cidr: c.cidr, gateway: c.gateway } })),
      {
        subnets: [
          {
            cidr: c.cidr,
            gateway: c.gateway,
            dhcp: true,
            pools: [{ start: c.pool[0], end: c.pool[1], name: 'default' }],
          },
        ],
      },
      `${c.cidr}: ${c.pool.join('-')} (${c.why})`,
    )
  }
})

t.test('networkSpecOf: extra subnets keep their gateway and DHCP flag', async (t) => {
  const cases: {
    subnet: { cidr: string; gateway?: string; dhcp?: boolean }
    expected: { gateway?: string; dhcp: boolean; pool: [string, string] }
    why: string
  }[] = [
    {
      subnet: { cidr: '192.168.0.0/24', gateway: '192.168.0.1', dhcp: true },
      expected: { gateway: '192.168.0.1', dhcp: true, pool: ['192.168.0.1', '192.168.0.254'] },
      why: 'IPv4 with a gateway and DHCP',
    },
    {
      subnet: { cidr: '192.168.1.0/28' },
      expected: { dhcp: false, pool: ['192.168.1.1', '192.168.1.14'] },
      why: 'no gateway, DHCP off by default',
    },
    {
      subnet: { cidr: 'fd00::/64' },
      expected: { dhcp: false, pool: ['fd00::', 'fd00::ffff'] },
      why: 'IPv6 /64: the first 65,536 addresses',
    },
    {
      subnet: { cidr: 'fd00:1::/111' },
      expected: { dhcp: false, pool: ['fd00:1::', 'fd00:1::ffff'] },
      why: 'IPv6 larger than 65,536: bounded',
    },
    {
      subnet: { cidr: 'fd00:2::/112', gateway: 'fd00:2::1' },
      expected: { gateway: 'fd00:2::1', dhcp: false, pool: ['fd00:2::', 'fd00:2::ffff'] },
      why: 'IPv6 of exactly 65,536: all of it',
    },
    {
      subnet: { cidr: 'fd00:3::/120' },
      expected: { dhcp: false, pool: ['fd00:3::', 'fd00:3::ff'] },
      why: 'IPv6 smaller than 65,536: all of it',
    },
    {
      subnet: { cidr: 'fd00:4::1/128' },
      expected: { dhcp: false, pool: ['fd00:4::1', 'fd00:4::1'] },
      why: 'IPv6 /128: the one address',
    },
  ]
  for (const c of cases) {
    const spec = networkSpecOf(
      group({
        network: { cidr: '10.10.10.0/24', gateway: '10.10.10.1' },
        extraSubnets: [c.subnet],
      }),
    )
    t.equal(spec.subnets.length, 2, `${c.subnet.cidr}: after the primary network`)
    t.same(
      spec.subnets[1],
      {
        cidr: c.subnet.cidr,
        ...(c.expected.gateway ? { gateway: c.expected.gateway } : {}),
        dhcp: c.expected.dhcp,
        pools: [{ start: c.expected.pool[0], end: c.expected.pool[1], name: 'default' }],
      },
      `${c.subnet.cidr}: ${c.why}`,
    )
  }
  const many = networkSpecOf(
    group({
      network: { cidr: '10.10.10.0/24', gateway: '10.10.10.1' },
      extraSubnets: [{ cidr: '10.20.0.0/24' }, { cidr: '10.30.0.0/24' }],
    }),
  )
  t.same(
    many.subnets.map((s) => s.cidr),
    ['10.10.10.0/24', '10.20.0.0/24', '10.30.0.0/24'],
    'primary first, then the extra subnets in order',
  )
})

t.test('named pools cut the default pool; reservations become external ranges', async (t) => {
  const spec = networkSpecOf(
    group({
      network: { cidr: '10.10.10.0/24', gateway: '10.10.10.1' },
      extraSubnets: [{ cidr: '10.20.0.0/24', gateway: '10.20.0.1' }],
      pools: [
        { name: 'vms', start: '10.10.10.100', end: '10.10.10.199' },
        { name: 'vms', start: '10.20.0.1', end: '10.20.0.254' },
      ],
      reservations: [{ start: '10.10.10.2', end: '10.10.10.9' }, { start: '10.20.0.7' }],
    }),
  )
  t.same(spec.subnets[0]?.pools, [
    { start: '10.10.10.1', end: '10.10.10.99', name: 'default' },
    { start: '10.10.10.200', end: '10.10.10.254', name: 'default' },
    { start: '10.10.10.100', end: '10.10.10.199', name: 'vms' },
  ])
  t.same(spec.subnets[0]?.external, [{ start: '10.10.10.2', end: '10.10.10.9' }])
  t.same(
    spec.subnets[1]?.pools,
    [{ start: '10.20.0.1', end: '10.20.0.254', name: 'vms' }],
    'a subnet all of whose range is named has no default pool',
  )
  t.same(spec.subnets[1]?.external, [{ start: '10.20.0.7', end: '10.20.0.7' }])
})

t.test('relay owners: apart from host names, and their DPU read back', async (t) => {
  t.equal(relayOwnerOf('dpu-1'), 'relay/dpu-1')
  t.equal(relayDpuOf(relayOwnerOf('dpu-1')), 'dpu-1')
  t.equal(relayDpuOf('host-1'), undefined, 'a host name is not a relay owner')
  t.equal(relayDpuOf('relay-1'), undefined)
})

t.test('relay MACs: stable, locally administered unicast, one per group and DPU', async (t) => {
  const mac = relayMacOf('group-a', 'dpu-1')
  t.match(mac, /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/)
  t.equal(mac, relayMacOf('group-a', 'dpu-1'), 'deterministic')
  const first = Number.parseInt(mac.slice(0, 2), 16)
  t.equal(first & 1, 0, 'unicast')
  t.equal(first & 2, 2, 'locally administered')
  const others = [relayMacOf('group-a', 'dpu-2'), relayMacOf('group-b', 'dpu-1')]
  t.notOk(others.includes(mac), 'differs for another DPU or group')
})

t.test('slaacChangeOf: what a network6 does to the address a member holds', async (t) => {
  const mac = '0a:00:00:00:00:01'
  const old = 'fd00:10::800:ff:fe00:1'
  const next = 'fd00:20::800:ff:fe00:1'
  const cases: {
    why: string
    held?: string
    network6?: { cidr: string }
    change: SlaacChange
  }[] = [
    { why: 'no network6, nothing held: nothing', change: {} },
    {
      why: 'added: its MAC’s address taken',
      network6: { cidr: 'fd00:20::/64' },
      change: { allocate: next, ip6: next },
    },
    {
      why: 'unchanged: kept',
      held: old,
      network6: { cidr: 'fd00:10::/64' },
      change: { ip6: old },
    },
    {
      why: 'moved: the old one given back, the new one taken',
      held: old,
      network6: { cidr: 'fd00:20::/64' },
      change: { release: old, allocate: next, ip6: next },
    },
    { why: 'removed: given back', held: old, change: { release: old } },
  ]
  for (const c of cases) t.same(slaacChangeOf(c.held, mac, c.network6), c.change, c.why)
})

t.test('ownsSlaacAddress: an IPv6-only group’s host naming no address or pool', async (t) => {
  const network = { cidr: '10.0.0.0/24', gateway: '10.0.0.1' }
  const network6 = { cidr: 'fd00:10::/64', gateway: 'fd00:10::1' }
  const cases: {
    why: string
    group: Parameters<typeof ownsSlaacAddress>[0]
    host: Parameters<typeof ownsSlaacAddress>[1]
    owns: boolean
  }[] = [
    { why: 'IPv6-only, nothing named', group: { network6 }, host: {}, owns: true },
    { why: 'dual-stack', group: { network, network6 }, host: {}, owns: false },
    { why: 'an address named', group: { network6 }, host: { hostIP: 'fd00:10::9' }, owns: false },
    { why: 'a pool named', group: { network6 }, host: { pool: 'vms' }, owns: false },
    { why: 'IPv4 only', group: { network }, host: {}, owns: false },
  ]
  for (const c of cases) t.equal(ownsSlaacAddress(c.group, c.host), c.owns, c.why)
})
