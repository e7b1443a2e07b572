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

t.test(
  "a forced detach keeps what the host's silent DPU may still announce held until it confirms isolation",
  async (t) => {
    const p = await startPipeline(t, {
      networkImplementation: { defaultType: 'Fabric', fabricRanges: RANGES, fabricAsn: 65001 },
    })
    const { store, ipam } = p.controller
    const FABRIC = ['3.1']
    const silent = await p.agent('dpu-1', { protocolVersions: FABRIC })
    await p.agent('dpu-2', { protocolVersions: FABRIC })
    await ipam.registerPublicIp('203.0.113.70')
    await ipam.registerPublicIp('203.0.113.71')
    // Two tenants, the same CIDR: the border's table of leaked addresses is one.
    await p.client.applyGroup('fab-a', groupSpec('tenant-a'))
    await p.client.applyGroup('fab-b', groupSpec('tenant-b'))
    for (const g of ['fab-a', 'fab-b']) {
      await until(
        () => store.groups.get(g),
        (group: ResourceGroup | undefined) => group?.status.phase === 'Ready',
      )
    }
    const ready = (name: string) =>
      until(
        () => store.hosts.get(name),
        (h) => h?.status.phase === 'Ready' || h?.status.phase === 'Failed',
      )
    const gone = (name: string) =>
      until(
        () => store.hosts.get(name),
        (h) => h === undefined,
      )
    const released = (address: string) =>
      until(
        () => store.fabricLeaks.holderOf(address),
        (holder) => holder === undefined,
      )
    // The pool as operators read it (`GET /v1/public-ips`).
    const publicOf = async (ip: string) =>
      (await p.client.listPublicIps()).find((entry) => entry.ip === ip)

    await p.client.applyHost(
      'pa-1',
      hostSpec('fab-a', 'dpu-1', 1, { hostIP: '10.10.10.40', hostAccess: 'PublicAccess' }),
    )
    const attached = await ready('pa-1')
    t.equal(attached?.status.phase, 'Ready', "tenant a's PublicAccess host is Ready on dpu-1")
    t.equal(attached?.status.hostAccessIPs?.publicIP, '203.0.113.70', 'its public IP')
    t.equal(await store.fabricLeaks.holderOf('10.10.10.40'), 'pa-1', 'it leaks its hostIP')

    // dpu-1 goes silent: no agent answers its queue. The detach cannot wait for it.
    await silent.close()
    await p.client.deleteHost('pa-1', { force: true })
    t.equal(await gone('pa-1'), undefined, 'pa-1 is gone')
    const owner = /^dpu:dpu-1:isolates:pa-1:\d+$/
    t.match(
      await store.fabricLeaks.holderOf('10.10.10.40'),
      owner,
      "its hostIP is held by dpu-1's pending isolation, not given back",
    )
    t.match(
      await store.fabricLeaks.holderOf('203.0.113.70'),
      owner,
      'and so is its leaked public IP',
    )
    t.strictSame(
      await publicOf('203.0.113.70'),
      {
        ip: '203.0.113.70',
        allocated: true,
        heldUntilIsolatedBy: { dpu: 'dpu-1', host: 'pa-1' },
      },
      "the pool lists the public IP as held for that isolation, as no host's",
    )
    await t.rejects(
      p.client.unregisterPublicIp('203.0.113.70'),
      {
        code: 'CONFLICT',
        message:
          /^public IP 203\.0\.113\.70 is held until DPU dpu-1 confirms isolation of host pa-1$/,
      },
      'and refuses to take it out of the pool, saying why',
    )
    const events = await p.client.events('dpu', 'dpu-1')
    t.match(
      events.find((e) => e.reason === 'HeldUntilIsolated')?.message,
      /10\.10\.10\.40, 203\.0\.113\.70 held until DPU dpu-1 confirms isolation of pa-1/,
      "the DPU's events say what is held and why",
    )

    // Tenant b asks for the same leaked address: refused at once, naming it and why.
    const refused = await p.client
      .applyHost(
        'pb-1',
        hostSpec('fab-b', 'dpu-2', 1, { hostIP: '10.10.10.40', hostAccess: 'FabricAccess' }),
      )
      .catch((e: unknown) => e)
    t.ok(refused instanceof LeakedAddressTaken, '409')
    t.match((refused as LeakedAddressTaken).issues, [
      {
        path: 'hostIP',
        message: /10\.10\.10\.40 is held until the DPU that announced it confirms isolation/,
      },
    ])
    t.notMatch(
      (refused as LeakedAddressTaken).issues[0]?.message ?? '',
      /dpu-1/,
      "and does not name the other tenant's DPU",
    )
    t.equal(await store.hosts.get('pb-1'), undefined, 'nothing stored')
    // A new PublicAccess host is not given the public IP dpu-1 may still announce.
    await p.client.applyHost(
      'pb-2',
      hostSpec('fab-b', 'dpu-2', 2, { hostIP: '10.10.10.41', hostAccess: 'PublicAccess' }),
    )
    const other = await ready('pb-2')
    t.equal(other?.status.phase, 'Ready', "tenant b's PublicAccess host is Ready")
    t.equal(other?.status.hostAccessIPs?.publicIP, '203.0.113.71', 'with the other public IP')

    // dpu-1 comes back: its agent takes the queued isolate. The next host there waits for
    // it, and once the DPU confirmed, what was held goes back.
    const back = await p.agent('dpu-1', { protocolVersions: FABRIC })
    await p.client.applyHost(
      'pa-2',
      hostSpec('fab-a', 'dpu-1', 2, { hostIP: '10.10.10.42', hostAccess: 'FabricAccess' }),
    )
    t.equal((await ready('pa-2'))?.status.phase, 'Ready', 'a host of tenant a on dpu-1 again')
    t.equal(
      await released('10.10.10.40'),
      undefined,
      'the hostIP is free once dpu-1 confirmed it withdrew pa-1',
    )
    t.equal(await store.fabricLeaks.holderOf('203.0.113.70'), undefined, 'the public IP too')
    t.same(
      await publicOf('203.0.113.70'),
      { ip: '203.0.113.70', allocated: false },
      'back in the pool',
    )
    t.same(await store.dpus.isolationHolds('dpu-1'), [], 'no hold left on dpu-1')
    t.match(
      (await p.client.events('dpu', 'dpu-1')).find((e) => e.reason === 'IsolationConfirmed')
        ?.message,
      /DPU dpu-1 confirmed it withdrew host pa-1 of group fab-a: 10\.10\.10\.40, 203\.0\.113\.70 given back/,
    )
    const now = await p.client.applyHost(
      'pb-1',
      hostSpec('fab-b', 'dpu-2', 1, { hostIP: '10.10.10.40', hostAccess: 'PublicAccess' }),
    )
    t.ok(now.jobId, "tenant b's host at that address is accepted now")
    const taken = await ready('pb-1')
    t.equal(taken?.status.phase, 'Ready')
    t.equal(taken?.status.hostAccessIPs?.publicIP, '203.0.113.70', 'given the freed public IP')

    // dpu-1 silent again, its host force-detached: held, until dpu-1 comes back and
    // `dpu.health` (it heartbeats again) sees the isolate acked: no new host needed.
    await back.close()
    await p.client.deleteHost('pa-2', { force: true })
    t.equal(await gone('pa-2'), undefined, 'pa-2 is gone')
    t.match(await store.fabricLeaks.holderOf('10.10.10.42'), /^dpu:dpu-1:isolates:pa-2:\d+$/)
    t.same(await store.dpus.dpusHolding(), ['dpu-1'], 'dpu-1 is listed as holding')
    const again = await p.agent('dpu-1', { protocolVersions: FABRIC })
    await p.controller.queue.upsertJobScheduler(
      'dpu.health',
      { every: 250 },
      { name: 'dpu.health', data: {}, opts: { removeOnComplete: { count: 10 } } },
    )
    t.equal(
      await released('10.10.10.42'),
      undefined,
      'dpu.health gives it back once dpu-1, Online again, acked the isolate',
    )
    t.same(await store.dpus.dpusHolding(), [], 'no DPU holds anything')

    // Once more, and dpu-1 leaves the inventory while silent: what it held goes back.
    await p.client.applyHost(
      'pa-3',
      hostSpec('fab-a', 'dpu-1', 3, { hostIP: '10.10.10.43', hostAccess: 'FabricAccess' }),
    )
    t.equal((await ready('pa-3'))?.status.phase, 'Ready')
    await again.close()
    await p.client.deleteHost('pa-3', { force: true })
    t.equal(await gone('pa-3'), undefined, 'pa-3 is gone')
    t.match(await store.fabricLeaks.holderOf('10.10.10.43'), /^dpu:dpu-1:isolates:pa-3:\d+$/)
    await p.client.deleteDpu('dpu-1')
    t.equal(
      await store.fabricLeaks.holderOf('10.10.10.43'),
      undefined,
      'a DPU gone from the inventory holds nothing',
    )
    t.same(await store.dpus.isolationHolds('dpu-1'), [])
  },
)

t.test(
  "a Fabric host whose DPU's agent is not heard from waits for it; one heard without protocol 3 is refused",
  async (t) => {
    const p = await startPipeline(t, {
      networkImplementation: { defaultType: 'Fabric', fabricRanges: RANGES, fabricAsn: 65001 },
    })
    const { store } = p.controller
    await p.client.applyGroup('fab-w', groupSpec('tenant-a'))
    await until(
      () => store.groups.get('fab-w'),
      (g: ResourceGroup | undefined) => g?.status.phase === 'Ready',
    )
    // dpu-1's agent is not up yet (or its heartbeat lapsed): nothing says what it speaks.
    const accepted = await p.client.applyHost('w-1', hostSpec('fab-w', 'dpu-1', 1))
    const job = await until(
      async () => p.controller.queue.getJob(accepted.jobId ?? ''),
      (j) => (j?.attemptsMade ?? 0) >= 1,
    )
    t.match(
      job?.failedReason,
      /AGENT_NOT_HEARD|has no live heartbeat/,
      'its attach waits, saying why',
    )
    t.not((await store.hosts.get('w-1'))?.status.phase, 'Failed', 'the host is not Failed')
    await p.agent('dpu-1', { protocolVersions: ['3.1'] })
    const ready = await until(
      () => store.hosts.get('w-1'),
      (h) => h?.status.phase === 'Ready' || h?.status.phase === 'Failed',
    )
    t.equal(ready?.status.phase, 'Ready', 'heard from with protocol 3: Ready')

    // An agent heard from that speaks no Fabric: refused for good, saying why.
    await p.agent('dpu-2', { protocolVersions: ['2.0'] })
    await p.client.applyHost('w-2', hostSpec('fab-w', 'dpu-2', 2))
    const refused = await until(
      () => store.hosts.get('w-2'),
      (h) => h?.status.phase === 'Failed',
    )
    t.match(
      refused?.status.conditions.find((c) => c.type === 'AgentConfigured'),
      { status: 'False', reason: 'DpuCannotDoFabric', message: /does not advertise protocol 3\.0/ },
    )
  },
)
