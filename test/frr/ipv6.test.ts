import t from 'tap'
import { createFrrSync } from '../../functions/frr-sync.ts'
import {
  createFrrController,
  createVty,
  createVtysh,
  InvalidAnnouncementError,
  resync,
  type Vtysh,
} from '../../lib/frr/index.ts'
import { eventually, FABRIC_IPV6_IN, fabricBgpRoutes, withPeeredBgpd } from './fixtures.ts'

const PUBLIC_V6 = '2001:db8:ff::5'
const PREFIX_V6 = `${PUBLIC_V6}/128`
const NAT_V6_A = 'fd00:77::105'
const NAT_V6_B = 'fd00:77::106'
const PREFIX_V4 = '203.0.113.7/32'
const NAT_V4 = '10.77.0.105'

/** How many times bgpd's session with `peer` has come up (a reset adds one). */
async function sessionsEstablished(bgpd: Vtysh, peer: string): Promise<number> {
  const neighbors = JSON.parse(await bgpd.show(`show bgp neighbors ${peer} json`)) as Record<
    string,
    { bgpState?: string; connectionsEstablished?: number }
  >
  const neighbor = neighbors[peer]
  return neighbor?.bgpState === 'Established' ? (neighbor.connectionsEstablished ?? 0) : 0
}

t.test(
  'IPv6 /128s via IPv6 NAT addresses, beside IPv4 /32s, seen by a fabric router',
  async (t) => {
    const { ns, vtyDir, fabric } = await withPeeredBgpd(t, { ipv6: true })
    const hydrazineFrr = createVtysh({ vtyDir })
    const vty = createVty({ vtyDir })
    t.teardown(() => vty.close())
    const frr = createFrrController({ vty })
    const frrSync = createFrrSync({ frr })

    const up = await eventually(
      () => sessionsEstablished(hydrazineFrr, ns.fabricIp),
      (n) => n > 0,
    )
    t.equal(up, 1, 'the session is up, once')

    const routes6 = () => fabricBgpRoutes(fabric, 'ipv6')
    const routes4 = () => fabricBgpRoutes(fabric, 'ipv4')

    // Through the FRR queue's handler, as a job would.
    const job = { publicIp: PUBLIC_V6, nextHop: NAT_V6_A, owner: 'host-a', specVersion: 1 }
    const ack = await frrSync({ name: 'announce', data: job })
    t.match(ack, { publicIp: PUBLIC_V6, prefix: PREFIX_V6, announced: true, nextHop: NAT_V6_A })
    const v4 = await frr.converge(new Map([[PREFIX_V4, NAT_V4]]))
    t.match(v4.get(PREFIX_V4), { ok: true, nextHop: NAT_V4 }, 'a /32 beside it')

    let seen6 = await eventually(routes6, (r) => r.get(PREFIX_V6) === NAT_V6_A)
    t.equal(seen6.get(PREFIX_V6), NAT_V6_A, 'fabric installs the /128 via the IPv6 NAT address')
    let seen4 = await eventually(routes4, (r) => r.get(PREFIX_V4) === NAT_V4)
    t.equal(seen4.get(PREFIX_V4), NAT_V4, 'and the /32 via the IPv4 NAT IP')
    t.same(
      Object.fromEntries(await frr.table()),
      { [PREFIX_V4]: NAT_V4, [PREFIX_V6]: NAT_V6_A },
      "Hydrazine's table: both families",
    )
    t.equal(
      await sessionsEstablished(hydrazineFrr, ns.fabricIp),
      1,
      'the first /128 went out on the session as it was (no reset)',
    )
    t.equal(frr.announced(), 2, 'both count as announced prefixes')

    const running = await hydrazineFrr.show('show running-config')
    t.match(
      running,
      /address-family ipv6 unicast\n {2}network 2001:db8:ff::5\/128 route-map HZ-NH-fd00:77::105\n/,
      'the /128 is in the IPv6 block, tagged with its next hop',
    )
    t.match(
      running,
      /route-map HZ-NH-fd00:77::105 permit 10\n set ipv6 next-hop global fd00:77::105/,
    )

    // Another DPU: the /128 moves; the old next hop's route-map goes.
    const moved = await frrSync({
      name: 'announce',
      data: { ...job, nextHop: NAT_V6_B, specVersion: 2 },
    })
    t.equal(moved.nextHop, NAT_V6_B)
    seen6 = await eventually(routes6, (r) => r.get(PREFIX_V6) === NAT_V6_B)
    t.equal(seen6.get(PREFIX_V6), NAT_V6_B, 'fabric follows the move')
    t.notOk((await frr.state()).routeMaps.has(NAT_V6_A), 'the unused route-map is removed')

    // A mixed-family announcement is refused for that prefix alone; FRR is not touched.
    const mixed = await frr.converge(
      new Map([
        ['2001:db8:ff::7/128', NAT_V4],
        ['203.0.113.8/32', NAT_V6_A],
      ]),
    )
    for (const prefix of ['2001:db8:ff::7/128', '203.0.113.8/32']) {
      const outcome = mixed.get(prefix)
      t.ok(
        outcome && !outcome.ok && outcome.error instanceof InvalidAnnouncementError,
        `${prefix}: InvalidAnnouncementError`,
      )
    }
    t.notMatch(await hydrazineFrr.show('show running-config'), /2001:db8:ff::7|203\.0\.113\.8/)

    // A resync repairs both families: a /128 lost by hand comes back, a stale one goes.
    await hydrazineFrr.configure([
      'router bgp 65001',
      ' address-family ipv6 unicast',
      `  no network ${PREFIX_V6}`,
      `  network 2001:db8:ff::66/128 route-map HZ-NH-${NAT_V6_B}`,
      ' exit-address-family',
      'exit',
    ])
    const repaired = await resync(frr, {
      desired: async () => [
        { prefix: PREFIX_V4, nextHop: NAT_V4 },
        { prefix: PREFIX_V6, nextHop: NAT_V6_B },
      ],
    })
    t.same(repaired, { announced: 1, withdrawn: 1, conflicts: [], failed: [], held: [] })
    seen6 = await eventually(
      routes6,
      (r) => r.get(PREFIX_V6) === NAT_V6_B && !r.has('2001:db8:ff::66/128'),
    )
    t.same(Object.fromEntries(seen6), { [PREFIX_V6]: NAT_V6_B }, 'fabric IPv6: exactly the store')

    // Withdraw the /128: gone from the fabric; the /32 stays.
    const withdrawn = await frrSync({
      name: 'withdraw',
      data: { publicIp: PUBLIC_V6, owner: 'host-a', specVersion: 3 },
    })
    t.match(withdrawn, { prefix: PREFIX_V6, announced: false, nextHop: null })
    seen6 = await eventually(routes6, (r) => !r.has(PREFIX_V6))
    t.notOk(seen6.has(PREFIX_V6), 'after withdraw: gone from the fabric')
    seen4 = await routes4()
    t.equal(seen4.get(PREFIX_V4), NAT_V4, 'the /32 is still there')
    t.equal(await sessionsEstablished(hydrazineFrr, ns.fabricIp), 1, 'one session throughout')
  },
)

t.test(
  "why the fabric needs 'prefer-global': FRR installs Hydrazine's link-local next hop",
  async (t) => {
    const { ns, vtyDir, fabric } = await withPeeredBgpd(t, { ipv6: true })
    const vty = createVty({ vtyDir })
    t.teardown(() => vty.close())
    const frr = createFrrController({ vty })
    await eventually(
      () => sessionsEstablished(createVtysh({ vtyDir }), ns.fabricIp),
      (n) => n > 0,
    )
    await frr.converge(new Map([[PREFIX_V6, NAT_V6_A]]))
    const routes6 = () => fabricBgpRoutes(fabric, 'ipv6')
    t.equal(
      (await eventually(routes6, (r) => r.get(PREFIX_V6) === NAT_V6_A)).get(PREFIX_V6),
      NAT_V6_A,
      'with prefer-global: via the NAT address',
    )

    await fabric.configure([
      `route-map ${FABRIC_IPV6_IN} permit 10`,
      ' no set ipv6 next-hop prefer-global',
      'exit',
    ])
    await fabric.show(`clear bgp ipv6 unicast ${ns.hydrazineIp} soft in`)
    const seen = await eventually(routes6, (r) => r.get(PREFIX_V6)?.startsWith('fe80:') === true)
    t.match(
      seen.get(PREFIX_V6),
      /^fe80:/,
      "without: via Hydrazine's own link-local address, not the DPU",
    )
  },
)
