/**
 * A group's pools and reservations (issue 18, seed 004) through `networkSpecOf` and IPAM
 * on a real Redis: reservations are never handed out, named pools hand out their own
 * ranges only, a re-defined network keeps every held address, `orphans` names what a
 * change would leave behind, and `usage` draws what is held.
 */
import t from 'tap'
import { networkSpecOf } from '../../functions/internal/network.ts'
import type { ResourceGroupSpec } from '../../lib/state/objects.ts'
import { ipamFixture } from './fixture.ts'

const fx = await ipamFixture(t)

const spec = (extra: Partial<ResourceGroupSpec> = {}) =>
  networkSpecOf({
    spec: {
      tenantId: 't1',
      network: { cidr: '10.0.0.0/28', gateway: '10.0.0.1' },
      pools: [{ name: 'vms', start: '10.0.0.10', end: '10.0.0.12' }],
      reservations: [{ start: '10.0.0.2', end: '10.0.0.4' }],
      ...extra,
    },
  })

t.test('reservations are skipped, named pools hand out their own range', async (t) => {
  const { ipam } = fx.ipam()
  await ipam.defineNetwork('g', spec())
  const defaults = []
  for (const owner of ['a', 'b', 'c', 'd', 'e']) {
    defaults.push((await ipam.allocate('g', owner, { pool: 'default' })).ip)
  }
  t.same(defaults, ['10.0.0.5', '10.0.0.6', '10.0.0.7', '10.0.0.8', '10.0.0.9'])
  t.equal((await ipam.allocate('g', 'f', { pool: 'default' })).ip, '10.0.0.13', 'past vms')
  t.equal((await ipam.allocate('g', 'g', { pool: 'default' })).ip, '10.0.0.14')
  await t.rejects(ipam.allocate('g', 'h', { pool: 'default' }), { code: 'POOL_EXHAUSTED' })
  t.equal((await ipam.allocate('g', 'vm', { pool: 'vms' })).ip, '10.0.0.10')
  await t.rejects(ipam.allocate('g', 'x', { ip: '10.0.0.3' }), { code: 'CONFLICT' })
})

t.test('a changed plan keeps held addresses; orphans names what would go', async (t) => {
  const { ipam } = fx.ipam()
  await ipam.defineNetwork(
    'g',
    spec({ extraSubnets: [{ cidr: '10.1.0.0/28', gateway: '10.1.0.1' }] }),
  )
  const a = await ipam.allocate('g', 'a', { pool: 'vms' })
  const b = await ipam.allocate('g', 'b', { ip: '10.1.0.5' })
  // The pool moves away from a's address and a reservation now covers it: a keeps it.
  const moved = spec({
    extraSubnets: [{ cidr: '10.1.0.0/28', gateway: '10.1.0.1' }],
    pools: [{ name: 'vms', start: '10.0.0.12', end: '10.0.0.14' }],
    reservations: [{ start: '10.0.0.10' }],
  })
  t.same(await ipam.orphans('g', moved), [])
  await ipam.defineNetwork('g', moved)
  t.same(
    (await ipam.allocations('g')).map((x) => x.ip),
    [a.ip, b.ip],
  )
  t.equal((await ipam.allocate('g', 'c', { pool: 'vms' })).ip, '10.0.0.12')

  const dropped = spec()
  t.same(await ipam.orphans('g', dropped), [{ owner: 'b', ip: '10.1.0.5' }])
  await t.rejects(ipam.defineNetwork('g', dropped), {
    code: 'CONFLICT',
    message: /10\.1\.0\.5 is held by b/,
  })
  t.same(await ipam.orphans('nothing-yet', dropped), [], 'a new network orphans nothing')

  const usage = await ipam.usage('g')
  t.equal(usage.subnets[0]?.map, 'XX........+.+..X', '+ a (reserved now, still its own), c')
  t.match(usage.subnets[1], { cidr: '10.1.0.0/28', used: 1 })
})
