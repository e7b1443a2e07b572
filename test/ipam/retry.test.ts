/**
 * Allocation on a real Redis, for group networks as the controller defines them
 * (`networkSpecOf`): a retried allocation, however many at once, takes no second address,
 * whatever the pools, reservations and IP version; a released address comes back to its
 * pool unless something reserves it, and a change of definition drops the bitmaps of
 * the pools it replaces, including those an earlier layout kept.
 */
import t from 'tap'
import { networkSpecOf } from '../../lib/ipam/group-network.ts'
import type { AllocateOptions, NetworkSpec } from '../../lib/ipam/index.ts'
import type { ResourceGroupSpec } from '../../lib/model/objects.ts'
import { ipamFixture } from './fixture.ts'

const fx = await ipamFixture(t)

const group = (spec: Partial<ResourceGroupSpec>): NetworkSpec =>
  networkSpecOf({ spec: { tenantId: 't1', ...spec } })

const cases: {
  name: string
  spec: NetworkSpec
  options: AllocateOptions
  /** The first two addresses handed out, in order. */
  first: [string, string]
}[] = [
  {
    name: 'IPv4, default pool only',
    spec: group({ network: { cidr: '10.0.0.0/24', gateway: '10.0.0.1' } }),
    options: { pool: 'default', version: 4 },
    first: ['10.0.0.2', '10.0.0.3'],
  },
  {
    name: 'IPv4, default pool around a named pool and reservations',
    spec: group({
      network: { cidr: '10.0.0.0/28', gateway: '10.0.0.1' },
      pools: [{ name: 'vms', start: '10.0.0.3', end: '10.0.0.5' }],
      reservations: [{ start: '10.0.0.2' }, { start: '10.0.0.7' }],
      extraSubnets: [{ cidr: 'fd00:1::/64', gateway: 'fd00:1::1' }],
      network6: { cidr: 'fd00:9::/64', gateway: 'fd00:9::1' },
    }),
    options: { pool: 'default', version: 4 },
    first: ['10.0.0.6', '10.0.0.8'],
  },
  {
    name: 'IPv4, a named pool with a reservation in it',
    spec: group({
      network: { cidr: '10.0.0.0/28', gateway: '10.0.0.1' },
      pools: [{ name: 'vms', start: '10.0.0.3', end: '10.0.0.6' }],
      reservations: [{ start: '10.0.0.4' }],
    }),
    options: { pool: 'vms' },
    first: ['10.0.0.3', '10.0.0.5'],
  },
  {
    name: 'IPv6, the default pool of an extra subnet',
    spec: group({
      network: { cidr: '10.0.0.0/28', gateway: '10.0.0.1' },
      extraSubnets: [{ cidr: 'fd00:1::/64', gateway: 'fd00:1::1' }],
      reservations: [{ start: 'fd00:1::2', end: 'fd00:1::3' }],
    }),
    options: { pool: 'default', version: 6 },
    first: ['fd00:1::4', 'fd00:1::5'],
  },
  {
    name: 'IPv6, a named pool across a 32-bit boundary',
    spec: group({
      network: { cidr: '10.0.0.0/28', gateway: '10.0.0.1' },
      extraSubnets: [{ cidr: 'fd00:1::/64', gateway: 'fd00:1::1' }],
      pools: [{ name: 'edge', start: 'fd00:1::ffff:fffe', end: 'fd00:1::1:0:1' }],
      reservations: [{ start: 'fd00:1::ffff:fffe', end: 'fd00:1::ffff:ffff' }],
    }),
    options: { pool: 'edge' },
    first: ['fd00:1::1:0:0', 'fd00:1::1:0:1'],
  },
]

for (const c of cases) {
  t.test(`${c.name}: a retry takes no second address`, async (t) => {
    const { ipam } = fx.ipam()
    await ipam.defineNetwork('g', c.spec)
    const [ip, next] = c.first
    t.equal((await ipam.allocate('g', 'h1', c.options)).ip, ip)
    t.equal((await ipam.allocate('g', 'h1', c.options)).ip, ip, 'retried: the same address')
    const racing = await Promise.all(
      Array.from({ length: 16 }, () => ipam.allocate('g', 'h2', c.options)),
    )
    t.same(new Set(racing.map((a) => a.ip)), new Set([next]), '16 retries at once: one address')
    t.equal(await ipam.allocatedCount('g'), 2)
    t.same(
      (await ipam.allocations('g')).map((a) => `${a.owner} ${a.ip}`),
      [`h1 ${ip}`, `h2 ${next}`],
    )
    t.equal(await ipam.release('g', 'h1'), ip)
    t.equal((await ipam.allocate('g', 'h3', c.options)).ip, ip, 'released: handed out again')
  })
}

t.test('a held address a reservation now covers is not handed out once released', async (t) => {
  const { ipam } = fx.ipam()
  const at = (reservations: ResourceGroupSpec['reservations']) =>
    group({
      network: { cidr: '10.0.0.0/28', gateway: '10.0.0.1' },
      extraSubnets: [{ cidr: 'fd00:1::/120' }],
      ...(reservations ? { reservations } : {}),
    })
  await ipam.defineNetwork('g', at(undefined))
  t.equal((await ipam.allocate('g', 'a', { pool: 'default', version: 4 })).ip, '10.0.0.2')
  t.equal((await ipam.allocate('g', 'b', { pool: 'default', version: 6 })).ip, 'fd00:1::1')
  await ipam.defineNetwork('g', at([{ start: '10.0.0.2' }, { start: 'fd00:1::1' }]))
  t.equal(await ipam.release('g', 'a'), '10.0.0.2')
  t.equal(await ipam.release('g', 'b'), 'fd00:1::1')
  t.equal((await ipam.allocate('g', 'c', { pool: 'default', version: 4 })).ip, '10.0.0.3')
  t.equal((await ipam.allocate('g', 'd', { pool: 'default', version: 6 })).ip, 'fd00:1::2')
  t.equal(
    (await ipam.map('g')).subnets[0]?.pools[0]?.map.slice(0, 4),
    'XXX.',
    'the gateway, the reserved 10.0.0.2, c; then free',
  )
})

t.test('a definition change drops the bitmaps of the pools it replaces', async (t) => {
  const { ipam, prefix } = fx.ipam()
  const spec = group({ network: { cidr: '10.0.0.0/28', gateway: '10.0.0.1' } })
  await ipam.defineNetwork('g', spec)
  await ipam.allocate('g', 'a', { pool: 'default' })
  // The bitmap of held addresses alone that an earlier layout kept beside the others.
  const earlier = `${prefix}{net:g}:pool:0:res`
  await fx.redis.set(earlier, '\x80')
  await ipam.defineNetwork('g', {
    subnets: [
      ...spec.subnets,
      { cidr: '10.1.0.0/28', pools: [{ start: '10.1.0.1', end: '10.1.0.14' }] },
    ],
  })
  t.equal(await fx.redis.exists(earlier), 0, 'the earlier layout leaves nothing behind')
  t.equal((await ipam.allocate('g', 'b', { pool: 'default' })).ip, '10.0.0.3', 'a keeps 10.0.0.2')
  await ipam.deleteNetwork('g', { force: true })
  t.same(await fx.redis.keys(`${prefix}*`), [`${prefix}{net:g}:meta`], 'deleted: only the version')
})
