/**
 * Group networks (subnets, pools, reservations) against a real Redis: definition rules,
 * allocation, release, pools and external reservations, subnet changes and the map.
 */
import t from 'tap'
import {
  AddressInUse,
  Conflict,
  createIpam,
  InvalidRequest,
  type NetworkSpec,
  NotFound,
  NotInSubnet,
  Overlap,
  PoolExhausted,
} from '../../lib/ipam/index.ts'
import { ipamFixture } from './fixture.ts'

const fx = await ipamFixture(t)

t.test('definition rules', async (t) => {
  const cases: { name: string; spec: NetworkSpec; error?: new (...args: never[]) => Error }[] = [
    {
      name: 'IPv4 and IPv6 subnets, one DHCP each',
      spec: {
        subnets: [
          { cidr: '10.0.0.0/24', gateway: '10.0.0.1', dhcp: true },
          { cidr: '2001:db8::/64', gateway: '2001:db8::1', dhcp: true },
        ],
      },
    },
    {
      name: 'overlapping IPv4 subnets',
      spec: { subnets: [{ cidr: '10.0.0.0/24' }, { cidr: '10.0.0.128/25' }] },
      error: Overlap,
    },
    {
      name: 'overlapping IPv6 subnets',
      spec: { subnets: [{ cidr: '2001:db8::/48' }, { cidr: '2001:db8:0:1::/64' }] },
      error: Overlap,
    },
    {
      name: 'two IPv4 DHCP subnets',
      spec: {
        subnets: [
          { cidr: '10.0.0.0/24', dhcp: true },
          { cidr: '10.0.1.0/24', dhcp: true },
        ],
      },
      error: Conflict,
    },
    {
      name: 'gateway outside the subnet',
      spec: { subnets: [{ cidr: '10.0.0.0/24', gateway: '10.0.1.1' }] },
      error: NotInSubnet,
    },
    {
      name: 'gateway on the broadcast address',
      spec: { subnets: [{ cidr: '10.0.0.0/24', gateway: '10.0.0.255' }] },
      error: Conflict,
    },
    {
      name: 'pool outside the subnet',
      spec: {
        subnets: [{ cidr: '10.0.0.0/24', pools: [{ start: '10.0.0.200', end: '10.0.1.5' }] }],
      },
      error: NotInSubnet,
    },
    {
      name: 'overlapping pools',
      spec: {
        subnets: [
          {
            cidr: '10.0.0.0/24',
            pools: [
              { start: '10.0.0.10', end: '10.0.0.20' },
              { start: '10.0.0.20', end: '10.0.0.30' },
            ],
          },
        ],
      },
      error: Overlap,
    },
    {
      name: 'external range outside the subnet',
      spec: {
        subnets: [
          { cidr: '2001:db8::/64', external: [{ start: '2001:db9::1', end: '2001:db9::1' }] },
        ],
      },
      error: NotInSubnet,
    },
    {
      name: 'a pool that is a whole IPv6 /64',
      spec: {
        subnets: [
          {
            cidr: '2001:db8::/64',
            pools: [{ start: '2001:db8::', end: '2001:db8::ffff:ffff:ffff:ffff' }],
          },
        ],
      },
      error: InvalidRequest,
    },
    {
      name: 'a CIDR with host bits',
      spec: { subnets: [{ cidr: '10.0.0.1/24' }] },
      error: InvalidRequest,
    },
    {
      name: 'an unknown field',
      spec: { subnets: [{ cidr: '10.0.0.0/24', dchp: true } as unknown as { cidr: string }] },
      error: InvalidRequest,
    },
  ]
  const { ipam } = fx.ipam()
  for (const [i, c] of cases.entries()) {
    if (c.error === undefined) {
      await ipam.createNetwork(`n${i}`, c.spec)
      t.ok(await ipam.getNetwork(`n${i}`), `${c.name}: accepted`)
    } else {
      await t.rejects(ipam.createNetwork(`n${i}`, c.spec), c.error, `${c.name}: ${c.error.name}`)
      t.equal(await ipam.getNetwork(`n${i}`), undefined, `${c.name}: nothing stored`)
    }
  }
})

t.test('create is idempotent; a different definition under the same id conflicts', async (t) => {
  const { ipam } = fx.ipam()
  const spec = {
    subnets: [
      { cidr: '10.0.0.0/24', gateway: '10.0.0.1', pools: [{ start: '10.0.0.2', end: '10.0.0.9' }] },
    ],
  }
  await ipam.createNetwork('g', spec)
  await ipam.allocate('g', 'h1')
  await ipam.createNetwork('g', {
    subnets: [
      { cidr: '10.0.0.0/24', gateway: '10.0.0.1', pools: [{ start: '10.0.0.2', end: '10.0.0.9' }] },
    ],
  })
  t.equal(
    (await ipam.lookup('g', 'h1'))?.ip,
    '10.0.0.2',
    'the same definition again keeps allocations',
  )
  await t.rejects(ipam.createNetwork('g', { subnets: [{ cidr: '10.0.0.0/25' }] }), Conflict)
  // Networks of different groups may overlap freely.
  await ipam.createNetwork('other', spec)
  t.same(await ipam.allocate('other', 'h1'), {
    ip: '10.0.0.2',
    subnet: '10.0.0.0/24',
    pool: '10.0.0.2-10.0.0.9',
  })
})

const families = [
  {
    family: 'IPv4',
    spec: {
      subnets: [
        {
          cidr: '10.0.0.0/29',
          gateway: '10.0.0.1',
          pools: [{ start: '10.0.0.0', end: '10.0.0.7', name: 'all' }],
          external: [{ start: '10.0.0.6', end: '10.0.0.6' }],
        },
      ],
    },
    emptyMap: 'XX....XX', // network, gateway, external .6, broadcast
    order: ['10.0.0.2', '10.0.0.3', '10.0.0.4', '10.0.0.5'],
    external: '10.0.0.6',
    gateway: '10.0.0.1',
    outside: '10.0.1.1',
    subnet: '10.0.0.0/29',
  },
  {
    family: 'IPv6',
    spec: {
      subnets: [
        {
          cidr: '2001:db8::/64',
          gateway: '2001:db8::1',
          pools: [{ start: '2001:db8::', end: '2001:db8::6', name: 'all' }],
          external: [{ start: '2001:db8::5', end: '2001:db8::5' }],
        },
      ],
    },
    emptyMap: 'XX...X.', // subnet-router anycast, gateway, external ::5; no broadcast
    order: ['2001:db8::2', '2001:db8::3', '2001:db8::4', '2001:db8::6'],
    external: '2001:db8::5',
    gateway: '2001:db8::1',
    outside: '2001:db9::1',
    subnet: '2001:db8::/64',
  },
]

for (const f of families) {
  t.test(`${f.family}: allocation from a pool`, async (t) => {
    const { ipam } = fx.ipam()
    await ipam.createNetwork('g', f.spec)
    t.equal(
      (await ipam.map('g')).subnets[0]?.pools[0]?.map,
      f.emptyMap,
      'gateway, network/broadcast and externals are never free',
    )

    const got = []
    for (const [i] of f.order.entries()) got.push((await ipam.allocate('g', `h${i}`)).ip)
    t.same(got, f.order, 'first free address, in order, skipping excluded ones')
    t.same(
      await ipam.allocate('g', 'h0'),
      { ip: f.order[0], subnet: f.subnet, pool: 'all' },
      'same owner, same address',
    )
    const exhausted = await ipam.allocate('g', 'late').catch((e: unknown) => e)
    t.ok(exhausted instanceof PoolExhausted, 'a full pool is PoolExhausted')
    t.match(String(exhausted), /pool \*/, 'naming the pool')
    const named = await ipam.allocate('g', 'late', { pool: 'all' }).catch((e: unknown) => e)
    t.ok(named instanceof PoolExhausted && named.pool === 'all', 'naming the pool asked for')
    t.equal((await ipam.map('g')).subnets[0]?.pools[0]?.map, 'X'.repeat(f.emptyMap.length))

    t.equal(await ipam.release('g', 'h1'), f.order[1], 'release returns the address')
    t.equal(await ipam.release('g', 'h1'), undefined, 'releasing again is a no-op')
    t.equal(await ipam.lookup('g', 'h1'), undefined)
    t.equal(
      (await ipam.allocate('g', 'late')).ip,
      f.order[1],
      'a released address is handed out again',
    )
    t.equal(await ipam.allocatedCount('g'), f.order.length)
  })

  t.test(`${f.family}: explicit addresses`, async (t) => {
    const { ipam } = fx.ipam()
    await ipam.createNetwork('g', f.spec)
    const target = f.order[2] ?? ''
    t.same(await ipam.allocate('g', 'a', { ip: target }), {
      ip: target,
      subnet: f.subnet,
      pool: 'all',
    })
    t.same(
      await ipam.allocate('g', 'a', { ip: target }),
      { ip: target, subnet: f.subnet, pool: 'all' },
      'retry returns it',
    )
    const taken = await ipam.allocate('g', 'b', { ip: target }).catch((e: unknown) => e)
    t.ok(
      taken instanceof AddressInUse && taken.owner === 'a',
      'taken: AddressInUse naming the owner',
    )
    await t.rejects(
      ipam.allocate('g', 'a', { ip: f.order[0] ?? '' }),
      Conflict,
      'owner already holds another',
    )
    await t.rejects(ipam.allocate('g', 'b', { ip: f.external }), Conflict, 'externally reserved')
    t.equal(
      (await ipam.allocate('g', 'b', { ip: f.external, force: true })).ip,
      f.external,
      'forced',
    )
    await t.rejects(
      ipam.allocate('g', 'c', { ip: f.gateway, force: true }),
      Conflict,
      'the gateway, even forced',
    )
    await t.rejects(ipam.allocate('g', 'c', { ip: f.outside }), NotInSubnet, 'outside every subnet')
    t.equal((await ipam.allocate('g', 'c')).ip, f.order[0], 'the pool skips explicit holders')
    t.equal((await ipam.allocate('g', 'd')).ip, f.order[1])
    t.equal((await ipam.allocate('g', 'e')).ip, f.order[3])
    await ipam.release('g', 'b')
    t.equal(
      (await ipam.map('g')).subnets[0]?.pools[0]?.map,
      'X'.repeat(f.emptyMap.length),
      'a released external stays excluded',
    )
  })
}

t.test('pool order: first pool of the first subnet, then the next; named pools', async (t) => {
  const { ipam } = fx.ipam()
  await ipam.createNetwork('g', {
    subnets: [
      {
        cidr: '10.0.0.0/24',
        pools: [
          { start: '10.0.0.10', end: '10.0.0.10' },
          { start: '10.0.0.20', end: '10.0.0.20', name: 'b' },
        ],
      },
      {
        cidr: '2001:db8::/64',
        pools: [{ start: '2001:db8::ffff:fffe', end: '2001:db8::1:0:1', name: 'v6' }],
      },
    ],
  })
  const ips = []
  for (const owner of ['a', 'b', 'c', 'd', 'e', 'f']) ips.push((await ipam.allocate('g', owner)).ip)
  t.same(
    ips,
    [
      '10.0.0.10',
      '10.0.0.20',
      '2001:db8::ffff:fffe',
      '2001:db8::ffff:ffff',
      '2001:db8::1:0:0',
      '2001:db8::1:0:1',
    ],
    'across pools, subnets and a 32-bit carry',
  )
  await ipam.release('g', 'a')
  await ipam.release('g', 'd')
  t.equal((await ipam.allocate('g', 'x', { pool: 'v6' })).ip, '2001:db8::ffff:ffff', 'named pool')
  t.equal((await ipam.allocate('g', 'y', { version: 4 })).ip, '10.0.0.10', 'IPv4 only')
  await t.rejects(ipam.allocate('g', 'z', { pool: 'nope' }), NotFound)
  await t.rejects(ipam.allocate('nope', 'z'), NotFound)
  t.same(await ipam.lookup('g', 'x'), {
    ip: '2001:db8::ffff:ffff',
    subnet: '2001:db8::/64',
    pool: 'v6',
  })
})

t.test('explicit address inside a subnet but outside every pool', async (t) => {
  const { ipam } = fx.ipam()
  await ipam.createNetwork('g', {
    subnets: [{ cidr: '10.0.0.0/24', pools: [{ start: '10.0.0.10', end: '10.0.0.20' }] }],
  })
  t.same(await ipam.allocate('g', 'h', { ip: '10.0.0.200' }), {
    ip: '10.0.0.200',
    subnet: '10.0.0.0/24',
  })
  await t.rejects(ipam.allocate('g', 'h2', { ip: '10.0.0.200' }), AddressInUse)
  t.equal(await ipam.release('g', 'h'), '10.0.0.200')
  t.equal((await ipam.allocate('g', 'h2', { ip: '10.0.0.200' })).ip, '10.0.0.200')
})

t.test('removing a sub-range splits a pool; held addresses stay held', async (t) => {
  const { ipam } = fx.ipam()
  await ipam.createNetwork('g', {
    subnets: [
      { cidr: '192.0.2.0/24', pools: [{ start: '192.0.2.10', end: '192.0.2.100', name: 'p1' }] },
    ],
  })
  await ipam.allocate('g', 'h10', { ip: '192.0.2.10' })
  await ipam.allocate('g', 'h30', { ip: '192.0.2.30' })
  await ipam.allocate('g', 'h60', { ip: '192.0.2.60' })
  await ipam.removePool('g', { start: '192.0.2.20', end: '192.0.2.50' })
  const pools = (await ipam.map('g')).subnets[0]?.pools ?? []
  t.same(
    pools.map((p) => [p.start, p.end, p.name]),
    [
      ['192.0.2.10', '192.0.2.19', 'p1'],
      ['192.0.2.51', '192.0.2.100', 'p1'],
    ],
    'two pools, name kept',
  )
  t.equal(pools[0]?.map, `X${'.'.repeat(9)}`, 'first part keeps its reservation')
  t.equal(
    pools[1]?.map,
    `${'.'.repeat(9)}X${'.'.repeat(40)}`,
    'second part keeps its reservation, re-based',
  )
  t.same(
    await ipam.lookup('g', 'h30'),
    { ip: '192.0.2.30', subnet: '192.0.2.0/24' },
    'outside any pool now, still held',
  )
  await t.rejects(ipam.allocate('g', 'x', { ip: '192.0.2.30' }), AddressInUse)
  t.equal(await ipam.release('g', 'h60'), '192.0.2.60')
  t.equal(pools.length, 2)
  t.equal(
    (await ipam.map('g')).subnets[0]?.pools[1]?.map,
    '.'.repeat(50),
    'release clears the re-based bit',
  )
  await t.rejects(ipam.removePool('g', { start: '192.0.2.200', end: '192.0.2.210' }), NotFound)

  await ipam.addPool('g', { start: '192.0.2.25', end: '192.0.2.35', name: 'p2' })
  t.equal(
    (await ipam.map('g')).subnets[0]?.pools[2]?.map,
    '.....X.....',
    'a new pool marks held addresses',
  )
  await t.rejects(ipam.addPool('g', { start: '192.0.2.35', end: '192.0.2.40' }), Overlap)
  await t.rejects(ipam.addPool('g', { start: '198.51.100.1', end: '198.51.100.9' }), NotInSubnet)
  await ipam.removePool('g', { name: 'p1' })
  t.same(
    ((await ipam.map('g')).subnets[0]?.pools ?? []).map((p) => p.name),
    ['p2'],
    'removed by name',
  )
})

t.test('external reservations can be added, split and removed', async (t) => {
  const { ipam } = fx.ipam()
  await ipam.createNetwork('g', {
    subnets: [{ cidr: '10.0.0.0/24', pools: [{ start: '10.0.0.10', end: '10.0.0.19' }] }],
  })
  await ipam.allocate('g', 'h', { ip: '10.0.0.12' })
  await ipam.addExternal('g', { start: '10.0.0.12', end: '10.0.0.15' })
  t.equal(
    (await ipam.map('g')).subnets[0]?.pools[0]?.map,
    '..XXXX....',
    'an external range may cover a held address',
  )
  await t.rejects(ipam.addExternal('g', { start: '10.0.0.15', end: '10.0.0.16' }), Overlap)
  await ipam.removeExternal('g', { start: '10.0.0.13', end: '10.0.0.14' })
  t.same((await ipam.getNetwork('g'))?.subnets[0]?.external, [
    { start: '10.0.0.12', end: '10.0.0.12' },
    { start: '10.0.0.15', end: '10.0.0.15' },
  ])
  t.equal((await ipam.map('g')).subnets[0]?.pools[0]?.map, '..X..X....')
  await ipam.release('g', 'h')
  t.equal(
    (await ipam.map('g')).subnets[0]?.pools[0]?.map,
    '..X..X....',
    'still externally reserved after release',
  )
  t.equal((await ipam.allocate('g', 'a')).ip, '10.0.0.10')
})

t.test('subnets: add, modify, shrink, remove', async (t) => {
  const { ipam } = fx.ipam()
  await ipam.createNetwork('g', {
    subnets: [
      {
        cidr: '10.1.0.0/24',
        name: 'main',
        dhcp: true,
        pools: [{ start: '10.1.0.10', end: '10.1.0.50' }],
      },
    ],
  })
  await ipam.addSubnet('g', { cidr: '10.2.0.0/24', name: 'extra' })
  await t.rejects(ipam.addSubnet('g', { cidr: '10.1.0.128/25' }), Overlap)
  await t.rejects(
    ipam.modifySubnet('g', 'extra', { dhcp: true }),
    Conflict,
    'one DHCP subnet per version',
  )
  await t.rejects(
    ipam.modifySubnet('g', 'extra', { cidr: '10.0.0.0/14' }),
    Overlap,
    'growing into another subnet',
  )
  await ipam.modifySubnet('g', '10.2.0.0/24', {
    cidr: '10.2.0.0/23',
    gateway: '10.2.1.254',
    name: 'wide',
  })
  t.same((await ipam.getNetwork('g'))?.subnets[1], {
    cidr: '10.2.0.0/23',
    gateway: '10.2.1.254',
    dhcp: false,
    name: 'wide',
    pools: [],
    external: [],
  })
  await ipam.modifySubnet('g', 'wide', { gateway: null })
  t.equal((await ipam.getNetwork('g'))?.subnets[1]?.gateway, undefined, 'gateway removed')

  await ipam.allocate('g', 'h', { ip: '10.1.0.200' })
  const shrink = await ipam
    .modifySubnet('g', 'main', { cidr: '10.1.0.0/25' })
    .catch((e: unknown) => e)
  t.ok(
    shrink instanceof Conflict && shrink.holder === 'h',
    'shrinking over a held address: Conflict naming the holder',
  )
  await t.rejects(
    ipam.modifySubnet('g', 'main', { cidr: '10.1.0.0/27' }),
    Conflict,
    'shrinking over a pool',
  )
  await ipam.release('g', 'h')
  await ipam.modifySubnet('g', 'main', { cidr: '10.1.0.0/25' })
  t.equal((await ipam.getNetwork('g'))?.subnets[0]?.cidr, '10.1.0.0/25')
  await t.rejects(ipam.allocate('g', 'h', { ip: '10.1.0.200' }), NotInSubnet)

  await ipam.allocate('g', 'h', { ip: '10.2.0.7' })
  await t.rejects(ipam.removeSubnet('g', 'wide'), Conflict, 'removing a subnet in use')
  await ipam.release('g', 'h')
  await ipam.removeSubnet('g', 'wide')
  await t.rejects(ipam.removeSubnet('g', 'wide'), NotFound)
  t.equal((await ipam.getNetwork('g'))?.subnets.length, 1)
})

t.test('delete: refused while addresses are held unless forced; leaves no keys', async (t) => {
  const { ipam, prefix } = fx.ipam()
  await ipam.createNetwork('g', {
    subnets: [{ cidr: '10.0.0.0/24', pools: [{ start: '10.0.0.10', end: '10.0.0.20' }] }],
  })
  await ipam.allocate('g', 'h')
  const keys = await fx.redis.keys(`${prefix}*`)
  t.ok(
    keys.length > 0 && keys.every((k) => k.startsWith(`${prefix}{net:g}:`)),
    'every key of the network shares its hash tag',
  )
  const refused = await ipam.deleteNetwork('g').catch((e: unknown) => e)
  t.ok(refused instanceof Conflict && refused.holder === 'h', 'Conflict naming the holder')
  await ipam.deleteNetwork('g', { force: true })
  t.same(
    await fx.redis.keys(`${prefix}*`),
    [`${prefix}{net:g}:meta`],
    'no key left but the version, which outlives the network',
  )
  await ipam.deleteNetwork('g')
  await t.rejects(ipam.allocate('g', 'h'), NotFound)
})

t.test('a process with a cached copy of a deleted network never allocates from it', async (t) => {
  const { ipam: first, prefix } = fx.ipam()
  const other = createIpam(fx.redis, { prefix })
  await first.createNetwork('g', {
    subnets: [{ cidr: '10.1.0.0/24', pools: [{ start: '10.1.0.10', end: '10.1.0.20' }] }],
  })
  t.equal((await other.allocate('g', 'a')).ip, '10.1.0.10', 'the other process caches the network')
  await first.deleteNetwork('g', { force: true })
  await first.createNetwork('g', {
    subnets: [{ cidr: '10.2.0.0/24', pools: [{ start: '10.2.0.10', end: '10.2.0.20' }] }],
  })
  t.equal(
    (await other.allocate('g', 'b')).ip,
    '10.2.0.10',
    'it sees the new network, not its cached copy',
  )
})

t.test('a group network as Hydrazine builds it', async (t) => {
  const { ipam } = fx.ipam()
  await ipam.createNetwork('rg', {
    subnets: [
      {
        cidr: '172.16.5.0/24',
        gateway: '172.16.5.1',
        pools: [{ start: '172.16.5.1', end: '172.16.5.254' }],
        external: [{ start: '172.16.5.254', end: '172.16.5.254' }],
      },
    ],
  })
  t.equal((await ipam.allocate('rg', 'host-a')).ip, '172.16.5.2')
  const map = (await ipam.map('rg')).subnets[0]?.pools[0]?.map ?? ''
  t.equal(map.length, 254)
  t.equal(map.at(-1), 'X', 'the dummy fabric IP is never handed out')
  t.equal(
    (await ipam.allocate('rg', 'fabric', { ip: '172.16.5.254', force: true })).ip,
    '172.16.5.254',
  )
})
