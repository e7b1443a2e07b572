/**
 * A DPU's pending isolations on a running pipeline, one per binding a forced detach left:
 * a host of the same name force-detached twice from one silent DPU, in two tenants'
 * groups, leaves two (neither overwrites the other); each hold is given back on its own
 * `isolate` ack only; and that host name attached again in a group on that DPU is Ready
 * only once the DPU isolated its binding in the other group.
 */
import type { Job } from 'bullmq'
import t from 'tap'
import { Heartbeats } from '../../lib/agent-protocol/heartbeats.ts'
import type { ResourceGroup } from '../../lib/model/objects.ts'
import { createRedis } from '../../lib/redis/connection.ts'
import { dpuFabricIps, groupSpec, hostSpec, startPipeline, until } from './fixtures.ts'
import { heartbeat } from './stand-in-agent.ts'

const RANGES = {
  vnis: { first: 7200, last: 7202, setting: 'HYDRAZINE_FABRIC_VNIS' },
  vlans: { first: 320, last: 322, setting: 'HYDRAZINE_FABRIC_VLANS' },
}
const FABRIC = ['3.1']

t.test(
  'a host of one name force-detached twice from a silent DPU, in two groups: both bindings are isolated',
  async (t) => {
    const p = await startPipeline(t, {
      networkImplementation: { defaultType: 'Fabric', fabricRanges: RANGES, fabricAsn: 65001 },
    })
    const { store, ipam } = p.controller
    await ipam.registerPublicIp('203.0.113.80')
    for (const [group, tenant] of [
      ['fab-a', 'tenant-a'],
      ['fab-b', 'tenant-b'],
    ] as const) {
      await p.client.applyGroup(group, groupSpec(tenant))
      await until(
        () => store.groups.get(group),
        (g: ResourceGroup | undefined) => g?.status.phase === 'Ready',
      )
    }
    const phase = (name: string, wanted: string) =>
      until(
        () => store.hosts.get(name),
        (h) => h?.status.phase === wanted,
      )
    const gone = (name: string) =>
      until(
        () => store.hosts.get(name),
        (h) => h === undefined,
      )
    const holderOf = (address: string) => store.fabricLeaks.holderOf(address)
    const pending = async () =>
      (await store.dpus.needsIsolation('dpu-1')).map(({ host, group }) => ({ host, group }))

    // dpu-1's agent hangs: its last heartbeat (protocol 3.1) stands, nothing answers its queue.
    const beats = createRedis({ url: p.agentsRedisUrl })
    t.teardown(() => beats.disconnect())
    await new Heartbeats(beats).write(heartbeat('dpu-1', FABRIC), 60_000)

    // Tenant a's `twin` on dpu-1, then tenant b's `twin` there: each force-detached.
    await p.client.applyDpu('dpu-1', { tenantId: 'tenant-a', fabricIps: dpuFabricIps('dpu-1') })
    await p.client.applyHost(
      'twin',
      hostSpec('fab-a', 'dpu-1', 1, { hostIP: '10.10.10.50', hostAccess: 'PublicAccess' }),
    )
    const first = await phase('twin', 'Configuring')
    await p.client.deleteHost('twin', { force: true })
    await gone('twin')
    // The operator hands dpu-1 to tenant b (it serves no host): its twin is placed there.
    await p.client.applyDpu('dpu-1', { tenantId: 'tenant-b', fabricIps: dpuFabricIps('dpu-1') })
    await p.client.applyHost(
      'twin',
      hostSpec('fab-b', 'dpu-1', 2, { hostIP: '10.10.10.51', hostAccess: 'FabricAccess' }),
    )
    const second = await phase('twin', 'Configuring')
    await p.client.deleteHost('twin', { force: true })
    await gone('twin')

    t.same(
      await pending(),
      [
        { host: 'twin', group: 'fab-a' },
        { host: 'twin', group: 'fab-b' },
      ],
      'dpu-1 must isolate both bindings of twin: the second detach overwrote nothing',
    )
    const ownerA = `dpu:dpu-1:isolates:twin:${first?.specVersion}`
    const ownerB = `dpu:dpu-1:isolates:twin:${second?.specVersion}`
    t.equal(
      await holderOf('10.10.10.50'),
      ownerA,
      "tenant a's leaked hostIP is held for its isolation",
    )
    t.equal(await holderOf('203.0.113.80'), ownerA, 'and its public IP')
    t.equal(await holderOf('10.10.10.51'), ownerB, "tenant b's for its own")

    // dpu-1 comes back, slow to withdraw tenant a's binding. `twin` is attached again, in
    // tenant b's group: the configure replaces the binding of fab-b, not the one of fab-a.
    const vniA = (await ipam.fabricIdsOf('fab-a'))?.vni
    let openGate = () => {}
    const gate = new Promise<void>((resolve) => {
      openGate = resolve
    })
    // Open before the agent stops (it waits for the job the gate holds), whatever failed.
    t.teardown(() => openGate())
    let isolatedA = false
    const agent = await p.agent('dpu-1', {
      protocolVersions: FABRIC,
      isolateAfter: async (job: Job) => {
        if (job.data.group?.vni !== vniA) return
        await gate
        isolatedA = true
      },
    })
    await p.controller.queue.upsertJobScheduler(
      'dpu.health',
      { every: 250 },
      { name: 'dpu.health', data: {}, opts: { removeOnComplete: { count: 10 } } },
    )
    const third = await p.client.applyHost(
      'twin',
      hostSpec('fab-b', 'dpu-1', 3, { hostIP: '10.10.10.52', hostAccess: 'FabricAccess' }),
    )
    t.equal(
      await until(
        () => holderOf('10.10.10.51'),
        (holder) => holder !== ownerB,
      ),
      undefined,
      "tenant b's address goes back once dpu-1 acked the isolate of its binding",
    )
    t.same(
      await until(pending, (left) => left.length < 2),
      [{ host: 'twin', group: 'fab-a' }],
      'the binding of fab-a is still pending: its isolate is not acked',
    )
    t.equal(await holderOf('10.10.10.50'), ownerA, "tenant a's hostIP is still held")
    t.equal(await holderOf('203.0.113.80'), ownerA, 'and its public IP')
    const configure = await until(
      async () =>
        agent.jobs.find(
          (j) => j.name === 'configure' && j.data.specVersion === third.object.specVersion,
        ),
      (job) => job !== undefined,
    )
    t.equal(
      await until(
        async () => (await configure?.isCompleted()) === true,
        (done) => done,
      ),
      true,
      'dpu-1 acked the configure of twin in fab-b',
    )
    t.not(
      (await store.hosts.get('twin'))?.status.phase,
      'Ready',
      'twin is not Ready in fab-b while dpu-1 may still hold it in the VRF of fab-a',
    )

    // The gate opens a while after that ack: a twin Ready before then is served too early.
    const later = setTimeout(openGate, 1500)
    t.teardown(() => clearTimeout(later))
    t.equal((await phase('twin', 'Ready'))?.spec.resourceGroup, 'fab-b', 'twin is Ready in fab-b')
    t.ok(isolatedA, 'only once dpu-1 had isolated its binding in fab-a')
    // Given back on its own ack: the hold's record goes last, then its pending isolation.
    t.same(
      await until(
        async () => ({ holds: await store.dpus.isolationHolds('dpu-1'), left: await pending() }),
        ({ holds, left }) => holds.length === 0 && left.length === 0,
      ),
      { holds: [], left: [] },
      'dpu-1 holds nothing and has nothing left to isolate',
    )
    t.equal(await holderOf('10.10.10.50'), undefined, "tenant a's hostIP is given back")
    t.equal(await holderOf('203.0.113.80'), undefined, 'and its public IP')
    const confirmed = (events: { reason: string; message: string }[]) =>
      events.filter((e) => e.reason === 'IsolationConfirmed').map((e) => e.message)
    t.match(
      confirmed(await p.client.events('dpu', 'dpu-1', undefined, { tenant: 'tenant-a' })),
      [/withdrew host twin of group fab-a: 10\.10\.10\.50, 203\.0\.113\.80 given back/],
      'tenant a reads that its addresses were given back',
    )
    t.notMatch(
      confirmed(await p.client.events('dpu', 'dpu-1', undefined, { tenant: 'tenant-b' })).join(),
      /fab-a|10\.10\.10\.50|203\.0\.113\.80/,
      'tenant b, holding dpu-1 now, does not',
    )
  },
)
