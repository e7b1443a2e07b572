/**
 * The controller's side of Fabric access levels, on real Redis: a leaked address is held by
 * one host at a time (claimed all or nothing, owner-keyed, given back), and a host request
 * that would leak an address another host leaks is refused at once (409, naming hostIP),
 * while a None host at that address, or a leaking host at a free one, is accepted.
 */
import t from 'tap'
import { LeakedAddressTaken } from '../../app/index.ts'
import { storeAnnouncementSource } from '../../functions/internal/announcements.ts'
import type { ResourceGroup } from '../../lib/model/objects.ts'
import { groupSpec, hostSpec, startPipeline, until } from './fixtures.ts'

const RANGES = {
  vnis: { first: 7100, last: 7101, setting: 'HYDRAZINE_FABRIC_VNIS' },
  vlans: { first: 310, last: 311, setting: 'HYDRAZINE_FABRIC_VLANS' },
}

t.test('Fabric access levels on a running pipeline', async (t) => {
  const p = await startPipeline(t, {
    networkImplementation: { defaultType: 'Overlay', fabricRanges: RANGES, fabricAsn: 65001 },
  })
  const leaks = p.controller.store.fabricLeaks

  t.test('a leaked address is held by one host, all or nothing', async (t) => {
    t.same(await leaks.claim('h1', ['10.10.10.20', 'fd00::20']), { ok: true }, 'h1 claims two')
    t.same(await leaks.claim('h1', ['10.10.10.20', 'fd00::20']), { ok: true }, 'again: the same')
    t.same(
      await leaks.claim('h2', ['10.10.10.30', '10.10.10.20']),
      { ok: false, address: '10.10.10.20', holder: 'h1' },
      'h2 is refused one of them, naming its holder',
    )
    t.equal(await leaks.holderOf('10.10.10.30'), undefined, 'and holds none of its claim')
    t.same(await leaks.claim('h1', ['10.10.10.20']), { ok: true }, 'h1 keeps one')
    t.equal(await leaks.holderOf('fd00::20'), undefined, 'the other is free')
    t.same(await leaks.claim('h2', ['fd00::20']), { ok: true }, 'h2 takes it')
    await leaks.release('h1')
    t.equal(await leaks.holderOf('10.10.10.20'), undefined, "h1's released")
    t.same(await leaks.heldBy('h1'), [], 'h1 holds nothing')
    t.same(await leaks.heldBy('h2'), ['fd00::20'], "h2's untouched")
    await leaks.release('h2')
  })

  t.test('a host request leaking a taken address is 409 naming hostIP', async (t) => {
    await p.client.applyGroup('fab-x', {
      ...groupSpec('tenant-x'),
      networkImplementationType: 'Fabric',
    })
    await until(
      () => p.controller.store.groups.get('fab-x'),
      (g: ResourceGroup | undefined) => g?.status.phase === 'Ready',
    )
    // Another host (of any group: the border's table is one) leaks 10.10.10.20.
    t.same(await leaks.claim('other', ['10.10.10.20']), { ok: true })
    const leaking = (n: number, hostAccess: string, hostIP: string) =>
      hostSpec('fab-x', 'dpu-1', n, { hostIP, hostAccess })
    const refused = await p.client
      .applyHost('leak-1', leaking(1, 'FabricAccess', '10.10.10.20'))
      .catch((e: unknown) => e)
    t.ok(refused instanceof LeakedAddressTaken, 'refused as a conflict')
    t.equal((refused as LeakedAddressTaken).code, 'CONFLICT')
    t.match((refused as LeakedAddressTaken).issues, [
      {
        path: 'hostIP',
        message: /10\.10\.10\.20 is leaked at the fabric's border by another host/,
      },
    ])
    t.notMatch(
      (refused as Error).message,
      /\bother\b/,
      "never naming the holder (another tenant's?)",
    )
    t.equal(await p.controller.store.hosts.get('leak-1'), undefined, 'nothing stored')
    const publicToo = await p.client
      .applyHost('leak-2', leaking(2, 'PublicAccess', '10.10.10.20'))
      .catch((e: unknown) => e)
    t.ok(publicToo instanceof LeakedAddressTaken, 'PublicAccess leaks it too: refused')

    const none = await p.client.applyHost('none-1', leaking(3, 'None', '10.10.10.20'))
    t.ok(none.jobId, 'a None host at that address is accepted: it leaks nothing')
    const free = await p.client.applyHost('leak-3', leaking(4, 'FabricAccess', '10.10.10.21'))
    t.ok(free.jobId, 'a FabricAccess host at a free address is accepted (no longer 400)')
    await leaks.release('other')
  })

  t.test("a Fabric host's public IP is its DPU's to announce, never Hydrazine's FRR", async (t) => {
    await p.controller.ipam.registerPublicIp('203.0.113.60')
    const host = 'pub-1'
    const second = await p.client.applyHost(
      host,
      hostSpec('fab-x', 'dpu-1', 5, { hostAccess: 'PublicAccess' }),
    )
    t.ok(second.jobId, 'a second leaking host on dpu-1: a Fabric host claims no NAT IP')
    // As the attach does it: the host takes a public IP from the pool.
    const ip = await p.controller.ipam.allocatePublicIp(host)
    t.equal(ip, '203.0.113.60', 'the pool lent it')
    const desired = await storeAnnouncementSource(p.controller.store, p.controller.ipam).desired()
    t.notOk(
      desired.some((a) => a.prefix === '203.0.113.60/32'),
      'the FRR resync does not announce it via the DPU NAT IP',
    )
    await p.controller.ipam.releasePublicIp(host)
  })
})
