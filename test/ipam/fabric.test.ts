/** The fabric side of IPAM: public IPs, DPU NAT IP claims and per-DPU transit links. */
import t from 'tap'
import { Conflict, Ipam, PoolExhausted } from '../../lib/ipam/index.ts'
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

t.test('a DPU NAT IP serves one host at a time', async (t) => {
  const { ipam } = fx.ipam()
  await ipam.claimNatIp('192.0.2.50', 'host-a')
  await ipam.claimNatIp('192.0.2.50', 'host-a')
  const second = await ipam.claimNatIp('192.0.2.50', 'host-b').catch((e: unknown) => e)
  t.ok(
    second instanceof Conflict && second.holder === 'host-a',
    'a second claim is a Conflict naming the holder',
  )
  t.match(String(second), /192\.0\.2\.50 already serves host-a/)
  t.equal(await ipam.releaseNatIp('192.0.2.50', 'host-b'), false, 'only the holder releases')
  t.equal(await ipam.natIpHolder('192.0.2.50'), 'host-a')
  t.equal(await ipam.releaseNatIp('192.0.2.50', 'host-a'), true)
  await ipam.claimNatIp('192.0.2.50', 'host-b')
  t.equal(await ipam.natIpHolder('192.0.2.50'), 'host-b')
  await ipam.claimNatIp('192.0.2.51', 'host-a')
  t.equal(await ipam.natIpHolder('192.0.2.51'), 'host-a', 'another NAT IP is independent')
})

t.test(
  'transit links: link-local /31 per DPU, unique in the group, deterministic MACs',
  async (t) => {
    const { ipam, prefix } = fx.ipam()
    const dpus = Array.from({ length: 40 }, (_, i) => `dpu-${i}`)
    const links = await Promise.all(dpus.map((d) => ipam.transitAddresses('g1', d)))
    const routers = new Set(links.map((l) => l.routerIp))
    t.equal(routers.size, dpus.length, 'unique per DPU, even when asked concurrently')
    for (const l of links) {
      t.match(l.routerSide, /^169\.254\.\d+\.\d+\/31$/)
      const [a = 0, b = 0] = [l.routerIp, l.gatewayIp].map((ip) => Number(ip.split('.')[3]))
      t.ok(a % 2 === 0 && b === a + 1, `${l.routerSide} / ${l.gatewaySide} form one /31`)
      for (const mac of [l.routerMac, l.gatewayMac]) {
        const first = Number.parseInt(mac.slice(0, 2), 16)
        t.ok(
          /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/.test(mac) && (first & 3) === 2,
          `${mac} is locally administered unicast`,
        )
      }
    }
    const macs = new Set(links.flatMap((l) => [l.routerMac, l.gatewayMac]))
    t.equal(macs.size, dpus.length * 2, 'distinct MACs')

    const again = await ipam.transitAddresses('g1', 'dpu-7')
    t.same(again, links[7], 'asking again returns the same link')
    const other = new Ipam(fx.redis, { prefix: `${prefix}other:` })
    const elsewhere = await other.transitAddresses('g1', 'dpu-7')
    t.equal(elsewhere.routerMac, links[7]?.routerMac, 'MACs depend only on group and DPU')
    t.not(
      (await ipam.transitAddresses('g2', 'dpu-7')).routerMac,
      links[7]?.routerMac,
      'another group, other MACs',
    )
    t.equal(
      (await ipam.transitAddresses('g2', 'dpu-7')).routerIp,
      '169.254.1.0',
      'groups number their links independently',
    )

    t.equal(await ipam.releaseTransit('g1', 'dpu-0'), true)
    t.equal(await ipam.releaseTransit('g1', 'dpu-0'), false)
    t.equal(
      (await ipam.transitAddresses('g1', 'dpu-new')).routerIp,
      links[0]?.routerIp,
      'a freed link is reused',
    )
  },
)
