import t from 'tap'
import { formatIp, formatSpan } from './address.ts'
import {
  compile,
  droppedSpans,
  exclusionBitmap,
  findSubnet,
  MAX_POOL_SIZE,
  type NetworkSpec,
  normalizeNetwork,
  normalizeRange,
  normalizeSubnet,
  type SubnetSpec,
  vacatedSpans,
} from './definition.ts'
import { Conflict, InvalidRequest, NotInSubnet, Overlap } from './errors.ts'

const layoutOf = (spec: NetworkSpec) => compile('n', normalizeNetwork(spec))
const bits = (bytes: Buffer): string =>
  [...bytes].map((b) => b.toString(2).padStart(8, '0')).join('')

t.test('normalizing: one canonical stored form however a definition is written', async (t) => {
  const cases: { name: string; a: SubnetSpec; b: SubnetSpec }[] = [
    {
      name: 'IPv6 addresses re-printed (RFC 5952)',
      a: {
        cidr: '2001:DB8:0::/64',
        gateway: '2001:db8:0:0::1',
        pools: [{ start: '2001:db8::0:a', end: '2001:DB8::F' }],
        external: [{ start: '2001:db8:0::ff', end: '2001:db8::00ff' }],
      },
      b: {
        cidr: '2001:db8::/64',
        gateway: '2001:db8::1',
        pools: [{ start: '2001:db8::a', end: '2001:db8::f' }],
        external: [{ start: '2001:db8::ff', end: '2001:db8::ff' }],
      },
    },
    {
      name: 'defaults filled in: dhcp off, no pools, no external ranges',
      a: { cidr: '10.0.0.0/24' },
      b: { cidr: '10.0.0.0/24', dhcp: false, pools: [], external: [] },
    },
    {
      name: 'key order does not matter',
      a: { name: 'main', dhcp: true, gateway: '10.0.0.1', cidr: '10.0.0.0/24' },
      b: { cidr: '10.0.0.0/24', gateway: '10.0.0.1', dhcp: true, name: 'main' },
    },
  ]
  for (const c of cases) {
    t.equal(
      JSON.stringify(normalizeNetwork({ subnets: [c.a] })),
      JSON.stringify(normalizeNetwork({ subnets: [c.b] })),
      c.name,
    )
  }
  t.same(
    normalizeSubnet({
      cidr: '10.0.0.0/24',
      pools: [{ end: '10.0.0.9', start: '10.0.0.1', name: 'p' }],
    }),
    {
      cidr: '10.0.0.0/24',
      dhcp: false,
      pools: [{ start: '10.0.0.1', end: '10.0.0.9', name: 'p' }],
      external: [],
    },
    'a subnet alone, pool names kept',
  )
  t.same(normalizeRange({ start: '2001:DB8::1', end: '2001:db8:0::2' }), {
    start: '2001:db8::1',
    end: '2001:db8::2',
  })
})

t.test('normalizing refuses malformed input with InvalidRequest', async (t) => {
  const bad: [string, () => unknown][] = [
    ['an unknown field', () => normalizeSubnet({ cidr: '10.0.0.0/24', dchp: true } as SubnetSpec)],
    ['an empty name', () => normalizeSubnet({ cidr: '10.0.0.0/24', name: '' })],
    ['no CIDR', () => normalizeNetwork({ subnets: [{} as SubnetSpec] })],
    ['no subnets list', () => normalizeNetwork({} as NetworkSpec)],
    ['host bits in the CIDR', () => normalizeSubnet({ cidr: '10.0.0.1/24' })],
    ['a gateway that is no IP', () => normalizeSubnet({ cidr: '10.0.0.0/24', gateway: 'gw' })],
    [
      'a pool that ends before it starts',
      () =>
        normalizeSubnet({ cidr: '10.0.0.0/24', pools: [{ start: '10.0.0.9', end: '10.0.0.1' }] }),
    ],
    ['a range mixing versions', () => normalizeRange({ start: '10.0.0.1', end: '::1' })],
    [
      'a range with an extra field',
      () => normalizeRange({ start: '10.0.0.1', end: '10.0.0.2', name: 'x' } as never),
    ],
  ]
  for (const [name, f] of bad) t.throws(f, InvalidRequest, name)
})

t.test('compiling accepts a valid definition and refuses a broken one', async (t) => {
  // A pool of `size` addresses from 10.0.0.0.
  const pool = (size: number) => ({
    start: '10.0.0.0',
    end: formatIp({ version: 4, value: 0x0a000000n + BigInt(size) - 1n }),
  })
  const v4 = (extra: Omit<SubnetSpec, 'cidr'> = {}): SubnetSpec => ({
    cidr: '10.0.0.0/24',
    ...extra,
  })
  const cases: {
    name: string
    subnets: SubnetSpec[]
    error?: new (...args: never[]) => Error
  }[] = [
    {
      name: 'one DHCP subnet per IP version',
      subnets: [v4({ dhcp: true }), { cidr: '2001:db8::/64', dhcp: true }],
    },
    {
      name: 'an external range inside a pool',
      subnets: [
        v4({
          pools: [{ start: '10.0.0.10', end: '10.0.0.20' }],
          external: [{ start: '10.0.0.15', end: '10.0.0.25' }],
        }),
      ],
    },
    {
      name: 'a gateway on the first address of a /31',
      subnets: [{ cidr: '10.0.0.0/31', gateway: '10.0.0.0' }],
    },
    {
      name: 'a pool of exactly the largest size',
      subnets: [{ cidr: '10.0.0.0/8', pools: [pool(MAX_POOL_SIZE)] }],
    },
    {
      name: 'overlapping subnets',
      subnets: [v4(), { cidr: '10.0.0.128/25' }],
      error: Overlap,
    },
    {
      name: 'two IPv4 subnets with DHCP',
      subnets: [v4({ dhcp: true }), { cidr: '10.0.1.0/24', dhcp: true }],
      error: Conflict,
    },
    {
      name: 'two subnets with one name',
      subnets: [v4({ name: 'a' }), { cidr: '10.0.1.0/24', name: 'a' }],
      error: Conflict,
    },
    {
      name: 'a gateway outside the subnet',
      subnets: [v4({ gateway: '10.0.1.1' })],
      error: NotInSubnet,
    },
    {
      name: 'a gateway on the network address',
      subnets: [v4({ gateway: '10.0.0.0' })],
      error: Conflict,
    },
    {
      name: 'a gateway on the broadcast address',
      subnets: [v4({ gateway: '10.0.0.255' })],
      error: Conflict,
    },
    {
      name: 'a gateway on the broadcast address of a /30',
      subnets: [{ cidr: '10.0.0.0/30', gateway: '10.0.0.3' }],
      error: Conflict,
    },
    {
      name: 'a pool reaching past the subnet',
      subnets: [v4({ pools: [{ start: '10.0.0.250', end: '10.0.1.5' }] })],
      error: NotInSubnet,
    },
    {
      name: 'pools sharing one address',
      subnets: [
        v4({
          pools: [
            { start: '10.0.0.10', end: '10.0.0.20' },
            { start: '10.0.0.20', end: '10.0.0.30' },
          ],
        }),
      ],
      error: Overlap,
    },
    {
      name: 'a pool one address too large',
      subnets: [{ cidr: '10.0.0.0/8', pools: [pool(MAX_POOL_SIZE + 1)] }],
      error: InvalidRequest,
    },
    {
      name: 'an external range outside the subnet',
      subnets: [v4({ external: [{ start: '10.0.1.1', end: '10.0.1.1' }] })],
      error: NotInSubnet,
    },
    {
      name: 'overlapping external ranges',
      subnets: [
        v4({
          external: [
            { start: '10.0.0.1', end: '10.0.0.5' },
            { start: '10.0.0.5', end: '10.0.0.9' },
          ],
        }),
      ],
      error: Overlap,
    },
  ]
  for (const c of cases) {
    const definition = normalizeNetwork({ subnets: c.subnets })
    if (c.error === undefined) t.doesNotThrow(() => compile('n', definition), `${c.name}: accepted`)
    else t.throws(() => compile('n', definition), c.error, `${c.name}: ${c.error.name}`)
  }
})

t.test('a layout numbers pools across subnets in allocation order', async (t) => {
  const layout = layoutOf({
    subnets: [
      {
        cidr: '10.0.0.0/24',
        pools: [
          { start: '10.0.0.10', end: '10.0.0.19', name: 'a' },
          { start: '10.0.0.30', end: '10.0.0.39' },
        ],
      },
      { cidr: '2001:db8::/64', pools: [{ start: '2001:db8::10', end: '2001:db8::1f' }] },
    ],
  })
  t.same(
    layout.pools.map((p) => [p.index, p.subnet, p.label, p.size, p.startHex, p.endHex]),
    [
      [0, 0, 'a', 10, '0a00000a', '0a000013'],
      [1, 0, '10.0.0.30-10.0.0.39', 10, '0a00001e', '0a000027'],
      [
        2,
        1,
        '2001:db8::10-2001:db8::1f',
        16,
        '20010db8000000000000000000000010',
        '20010db800000000000000000000001f',
      ],
    ],
  )
  t.same(
    layout.subnets.map((s) => s.pools.map((p) => p.index)),
    [[0, 1], [2]],
    'each subnet holds its own pools',
  )
})

t.test('addresses never handed out: network, broadcast, gateway', async (t) => {
  const cases: { cidr: string; gateway?: string; reserved: string[] }[] = [
    { cidr: '10.0.0.0/24', gateway: '10.0.0.1', reserved: ['10.0.0.0', '10.0.0.255', '10.0.0.1'] },
    { cidr: '10.0.0.0/30', reserved: ['10.0.0.0', '10.0.0.3'] },
    { cidr: '10.0.0.0/31', reserved: [] },
    { cidr: '10.0.0.7/32', reserved: [] },
    { cidr: '2001:db8::/64', gateway: '2001:db8::1', reserved: ['2001:db8::', '2001:db8::1'] },
    { cidr: '2001:db8::/127', reserved: [] },
  ]
  for (const { reserved, ...c } of cases) {
    const subnet = layoutOf({ subnets: [c] }).subnets[0]
    const version = c.cidr.includes(':') ? 6 : 4
    t.same(
      subnet?.reserved.map((value) => formatIp({ version, value })),
      reserved,
      `${c.cidr}${c.gateway ? ` via ${c.gateway}` : ''}`,
    )
  }
})

t.test('exclusion bitmaps: reserved and external addresses and the padding are set', async (t) => {
  const cases: { name: string; subnet: SubnetSpec; bits: string }[] = [
    {
      name: 'network, gateway, external, broadcast',
      subnet: {
        cidr: '10.0.0.0/29',
        gateway: '10.0.0.1',
        pools: [{ start: '10.0.0.0', end: '10.0.0.7' }],
        external: [{ start: '10.0.0.6', end: '10.0.0.6' }],
      },
      bits: '11000011',
    },
    {
      name: 'nothing excluded inside a small pool: only the padding',
      subnet: {
        cidr: '10.0.0.0/29',
        gateway: '10.0.0.1',
        pools: [{ start: '10.0.0.2', end: '10.0.0.5' }],
      },
      bits: '00001111',
    },
    {
      name: 'a pool over two bytes',
      subnet: { cidr: '10.0.0.0/24', pools: [{ start: '10.0.0.0', end: '10.0.0.9' }] },
      bits: '1000000000111111',
    },
    {
      name: 'an external range clipped to the pool',
      subnet: {
        cidr: '10.0.0.0/24',
        pools: [{ start: '10.0.0.10', end: '10.0.0.17' }],
        external: [
          { start: '10.0.0.3', end: '10.0.0.12' },
          { start: '10.0.0.17', end: '10.0.0.40' },
        ],
      },
      bits: '11100001',
    },
    {
      name: 'IPv6: anycast, gateway, external; no broadcast',
      subnet: {
        cidr: '2001:db8::/64',
        gateway: '2001:db8::1',
        pools: [{ start: '2001:db8::', end: '2001:db8::6' }],
        external: [{ start: '2001:db8::5', end: '2001:db8::5' }],
      },
      bits: '11000101',
    },
    {
      name: 'a /31 reserves nothing',
      subnet: { cidr: '10.0.0.0/31', pools: [{ start: '10.0.0.0', end: '10.0.0.1' }] },
      bits: '00111111',
    },
  ]
  for (const c of cases) {
    const subnet = layoutOf({ subnets: [c.subnet] }).subnets[0]
    const pool = subnet?.pools[0]
    if (subnet === undefined || pool === undefined) throw new Error(`${c.name}: no pool`)
    t.equal(bits(exclusionBitmap(subnet, pool)), c.bits, c.name)
  }
})

t.test('subnets are found by name or CIDR, however the CIDR is written', async (t) => {
  const layout = layoutOf({
    subnets: [{ cidr: '10.0.0.0/24', name: 'main' }, { cidr: '2001:db8::/64' }],
  })
  const cases: [string, string | undefined][] = [
    ['main', '10.0.0.0/24'],
    ['10.0.0.0/24', '10.0.0.0/24'],
    ['2001:DB8:0::/64', '2001:db8::/64'],
    ['10.0.1.0/24', undefined],
    ['not a cidr', undefined],
  ]
  for (const [ident, cidr] of cases) {
    t.equal(findSubnet(layout, ident)?.cidr.text, cidr, `${ident} → ${cidr ?? 'none'}`)
  }
})

t.test(
  'a changed definition must find free what it drops and what it newly reserves',
  async (t) => {
    const primary = { cidr: '10.0.0.0/24', gateway: '10.0.0.1', dhcp: true }
    const spans = (from: NetworkSpec, to: NetworkSpec) =>
      vacatedSpans(layoutOf(from), layoutOf(to)).map(formatSpan)
    const reservedOfPrimary = ['10.0.0.0-10.0.0.0', '10.0.0.255-10.0.0.255', '10.0.0.1-10.0.0.1']
    const cases: { name: string; from: NetworkSpec; to: NetworkSpec; spans: string[] }[] = [
      {
        name: 'a subnet added: only the reserved addresses',
        from: { subnets: [primary] },
        to: { subnets: [primary, { cidr: '10.20.0.0/24', gateway: '10.20.0.1' }] },
        spans: [
          ...reservedOfPrimary,
          '10.20.0.0-10.20.0.0',
          '10.20.0.255-10.20.0.255',
          '10.20.0.1-10.20.0.1',
        ],
      },
      {
        name: 'a subnet removed: all of it',
        from: { subnets: [primary, { cidr: 'fd00:20::/64' }] },
        to: { subnets: [primary] },
        spans: ['fd00:20::-fd00:20::ffff:ffff:ffff:ffff', ...reservedOfPrimary],
      },
      {
        name: 'a subnet shrunk: the part cut off',
        from: { subnets: [primary, { cidr: '10.20.0.0/23' }] },
        to: { subnets: [primary, { cidr: '10.20.0.0/24' }] },
        spans: [
          '10.20.1.0-10.20.1.255',
          ...reservedOfPrimary,
          '10.20.0.0-10.20.0.0',
          '10.20.0.255-10.20.0.255',
        ],
      },
    ]
    for (const c of cases) t.same(spans(c.from, c.to), c.spans, c.name)
  },
)

t.test('what a changed definition drops: parts of its subnets no new one holds', async (t) => {
  const primary = { cidr: '10.0.0.0/24', gateway: '10.0.0.1', dhcp: true }
  const cases: { name: string; from: NetworkSpec; to: NetworkSpec; spans: string[] }[] = [
    {
      name: 'network6 moved: the old /64',
      from: { subnets: [primary, { cidr: 'fd00:10::/64' }] },
      to: { subnets: [primary, { cidr: 'fd00:20::/64' }] },
      spans: ['fd00:10::-fd00:10::ffff:ffff:ffff:ffff'],
    },
    {
      name: 'a gateway added: nothing (it is reserved, not dropped)',
      from: { subnets: [{ cidr: '10.0.0.0/24', dhcp: true }] },
      to: { subnets: [primary] },
      spans: [],
    },
    {
      name: 'a subnet shrunk: the part cut off',
      from: { subnets: [primary, { cidr: '10.20.0.0/23' }] },
      to: { subnets: [primary, { cidr: '10.20.0.0/24' }] },
      spans: ['10.20.1.0-10.20.1.255'],
    },
  ]
  for (const c of cases) {
    t.same(droppedSpans(layoutOf(c.from), layoutOf(c.to)).map(formatSpan), c.spans, c.name)
  }
})
