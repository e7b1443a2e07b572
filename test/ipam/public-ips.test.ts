/** The operator's public IPs against a real Redis: registry, owner-keyed allocation, release. */
import t from 'tap'
import { Conflict, InvalidRequest, PoolExhausted } from '../../lib/ipam/index.ts'
import { ipamFixture } from './fixture.ts'

const fx = await ipamFixture(t)

t.test('public IPs: one host at a time, owner-keyed, released on demand', async (t) => {
  const { ipam } = fx.ipam()
  await ipam.registerPublicIp('203.0.113.9')
  await ipam.registerPublicIp('203.0.113.10')
  await ipam.registerPublicIp('203.0.113.9')
  t.same(
    await ipam.listPublicIps(),
    [
      { ip: '203.0.113.9', allocated: false },
      { ip: '203.0.113.10', allocated: false },
    ],
    'registered, free, registering twice changes nothing',
  )

  t.equal(await ipam.allocatePublicIp('host-a'), '203.0.113.9', 'lowest free first')
  t.equal(await ipam.allocatePublicIp('host-a'), '203.0.113.9', 'same owner, same IP')
  t.equal(await ipam.allocatePublicIp('host-b'), '203.0.113.10')
  await t.rejects(ipam.allocatePublicIp('host-c'), PoolExhausted)
  t.same(await ipam.listPublicIps(), [
    { ip: '203.0.113.9', allocated: true, allocatedTo: 'host-a' },
    { ip: '203.0.113.10', allocated: true, allocatedTo: 'host-b' },
  ])

  const refused = await ipam.unregisterPublicIp('203.0.113.9').catch((e: unknown) => e)
  t.ok(
    refused instanceof Conflict && refused.holder === 'host-a',
    'unregistering an allocated IP: Conflict naming the holder',
  )

  t.equal(await ipam.releasePublicIp('host-a'), '203.0.113.9')
  t.equal(await ipam.releasePublicIp('host-a'), undefined, 'releasing twice is a no-op')
  t.same((await ipam.listPublicIps())[0], { ip: '203.0.113.9', allocated: false })
  t.equal(
    await ipam.allocatePublicIp('host-c'),
    '203.0.113.9',
    'a released IP serves the next host',
  )
  await ipam.releasePublicIp('host-b')
  await ipam.unregisterPublicIp('203.0.113.10')
  await ipam.unregisterPublicIp('203.0.113.10')
  t.same(await ipam.listPublicIps(), [
    { ip: '203.0.113.9', allocated: true, allocatedTo: 'host-c' },
  ])
})

t.test('publicIpOf: the IP an owner holds, if any, of each family', async (t) => {
  const { ipam } = fx.ipam()
  await ipam.registerPublicIp('198.51.100.7')
  await ipam.registerPublicIp('2001:DB8:0::7')
  t.equal(await ipam.publicIpOf('host-a'), undefined, 'never allocated: undefined')
  t.equal(await ipam.allocatePublicIp('host-a'), '198.51.100.7', 'IPv4 from the IPv4 pool')
  t.equal(await ipam.allocatePublicIp('host-a', 6), '2001:db8::7', 'IPv6, canonical, its own pool')
  await t.rejects(ipam.allocatePublicIp('host-b'), PoolExhausted, 'the IPv4 pool is empty')
  await t.rejects(ipam.allocatePublicIp('host-b', 6), PoolExhausted, 'so is the IPv6 one')
  t.equal(await ipam.publicIpOf('host-a'), '198.51.100.7', 'allocated: the IP it holds')
  t.equal(await ipam.publicIpOf('host-a', 6), '2001:db8::7', 'and its IPv6 one')
  t.same(await ipam.listPublicIps(), [
    { ip: '198.51.100.7', allocated: true, allocatedTo: 'host-a' },
    { ip: '2001:db8::7', allocated: true, allocatedTo: 'host-a' },
  ])
  t.equal(await ipam.releasePublicIp('host-a', 6), '2001:db8::7', 'released by family')
  t.equal(await ipam.publicIpOf('host-a', 6), undefined, 'released: undefined')
  t.equal(await ipam.publicIpOf('host-a'), '198.51.100.7', 'its IPv4 one stays')
  t.equal(await ipam.allocatePublicIp('host-b', 6), '2001:db8::7', 'and serves the next host')
  t.same(
    await ipam.publicIpsOf(['host-a', 'host-b', 'host-c']),
    new Map([['host-a', '198.51.100.7']]),
    'publicIpsOf: only the owners that hold one, in one call',
  )
  t.same(
    await ipam.publicIpsOf(['host-a', 'host-b'], 6),
    new Map([['host-b', '2001:db8::7']]),
    'of the family asked for',
  )
  t.same(await ipam.publicIpsOf([]), new Map(), 'no owners: nothing')
  const refused = await ipam.unregisterPublicIp('2001:db8::7').catch((e: unknown) => e)
  t.ok(refused instanceof Conflict && refused.holder === 'host-b', 'an allocated IPv6 stays')
})

t.test('an address no host can be reached at never joins a pool', async (t) => {
  const { ipam } = fx.ipam()
  for (const ip of ['127.0.0.1', '224.0.0.5', 'fe80::1', 'fd00:a9fe::1']) {
    await t.rejects(ipam.registerPublicIp(ip), InvalidRequest, `${ip}: refused`)
  }
  t.same(await ipam.listPublicIps(), [], 'nothing registered')
  t.notOk(await ipam.hasPublicIps(4), 'the IPv4 pool is empty')
  t.notOk(await ipam.hasPublicIps(6), 'and the IPv6 one')
})
