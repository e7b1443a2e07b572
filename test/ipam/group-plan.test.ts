/**
 * A group's pools and reservations through `networkSpecOf` and IPAM on a real Redis:
 * reservations are never handed out, named pools hand out their own ranges only, a
 * re-defined network keeps every held address, `orphans` names what a change would leave
 * behind, `usage` draws what is held, and a moved network6 gives its hosts' SLAAC addresses
 * back in the step that defines it.
 */
import t from 'tap'
import { IPV6_OWNERS, networkSpecOf } from '../../lib/ipam/group-network.ts'
import type { ResourceGroupSpec } from '../../lib/model/objects.ts'
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
  const released = { releaseDropped: { ownerPrefix: 'b' } }
  t.same(
    await ipam.orphans('g', dropped, released),
    [],
    'owners whose dropped addresses defineNetwork gives back are no orphans',
  )
  t.same(
    await ipam.orphans('g', dropped, { releaseDropped: { ownerPrefix: 'ipv6/' } }),
    [{ owner: 'b', ip: '10.1.0.5' }],
    'other owners still are',
  )

  const usage = await ipam.usage('g')
  t.equal(usage.subnets[0]?.map, 'XX........+.+..X', '+ a (reserved now, still its own), c')
  t.match(usage.subnets[1], { cidr: '10.1.0.0/28', used: 1 })
})

t.test('a moved network6 gives its SLAAC owners’ addresses back in the same step', async (t) => {
  const { ipam } = fx.ipam()
  const at = (cidr: string) => spec({ network6: { cidr, gateway: cidr.replace('/64', '1') } })
  await ipam.defineNetwork('g', at('fd00:10::/64'))
  await ipam.allocate('g', 'h1', { pool: 'default' })
  await ipam.allocate('g', 'ipv6/h1', { ip: 'fd00:10::800:ff:fe00:1' })
  await ipam.allocate('g', 'ipv6/h2', { ip: 'fd00:10::800:ff:fe00:2' })
  const owners = async () => (await ipam.allocations('g')).map((a) => `${a.owner} ${a.ip}`)

  await t.rejects(
    ipam.defineNetwork('g', at('fd00:20::/64')),
    { code: 'CONFLICT', message: /held by ipv6\/h1/ },
    'without releaseDropped: refused while they are held',
  )
  t.same(
    await ipam.defineNetwork('g', at('fd00:20::/64'), { releaseDropped: IPV6_OWNERS }),
    [
      { owner: 'ipv6/h1', ip: 'fd00:10::800:ff:fe00:1' },
      { owner: 'ipv6/h2', ip: 'fd00:10::800:ff:fe00:2' },
    ],
    'with it: the change goes through and says what it gave back',
  )
  t.same(await owners(), ['h1 10.0.0.5'], 'the IPv4 address stays held')
  await t.rejects(
    ipam.allocate('g', 'ipv6/h1', { ip: 'fd00:10::800:ff:fe00:1' }),
    { code: 'NOT_IN_SUBNET' },
    'the old /64 hands out nothing now',
  )
  await ipam.allocate('g', 'ipv6/h1', { ip: 'fd00:20::800:ff:fe00:1' })

  // Another owner in the dropped /64 refuses the change, and nothing is given back.
  await ipam.allocate('g', 'h6', { ip: 'fd00:20::6' })
  await t.rejects(
    ipam.defineNetwork('g', spec(), { releaseDropped: IPV6_OWNERS }),
    { code: 'CONFLICT', message: /fd00:20::6 is held by h6/ },
    'an address of another owner there: refused',
  )
  t.same(
    await owners(),
    ['h1 10.0.0.5', 'h6 fd00:20::6', 'ipv6/h1 fd00:20::800:ff:fe00:1'],
    'with every address still held',
  )
})
