/**
 * A Fabric group's life as far as this version goes, on real Redis and OVN: it takes a
 * VNI and a VLAN id from the operator's pools and shows them (`status.fabric`), reports
 * Failed saying the fabric's AS number is not configured (and is not retried), builds
 * nothing in OVN, refuses hosts, and gives both ids back when it is deleted. An exhausted
 * pool fails the next Fabric group naming the setting that widens it. An Overlay group
 * beside it is Ready as ever.
 */
import t from 'tap'
import { ValidationError } from '../../app/index.ts'
import type { ChildJobs } from '../../functions/internal/deps.ts'
import { retryDue } from '../../functions/internal/retries.ts'
import { queueJobs } from '../../lib/jobs/redrive.ts'
import type { Condition, ResourceGroup } from '../../lib/model/objects.ts'
import { groupSpec, hostSpec, type Pipeline, startPipeline, until } from './fixtures.ts'
import { runReconcile } from './scenarios.ts'

const RANGES = {
  vnis: { first: 7000, last: 7001, setting: 'HYDRAZINE_FABRIC_VNIS' },
  vlans: { first: 300, last: 302, setting: 'HYDRAZINE_FABRIC_VLANS' },
}

const groupWhere = (p: Pipeline, name: string, check: (g: ResourceGroup) => boolean) =>
  until(
    () => p.controller.store.groups.get(name),
    (g) => g !== undefined && check(g),
  ) as Promise<ResourceGroup>
const gone = (p: Pipeline, name: string) =>
  until(
    () => p.controller.store.groups.get(name),
    (g) => g === undefined,
  )
const condition = (g: ResourceGroup, type: string): Condition | undefined =>
  g.status.conditions.find((c) => c.type === type)
const fabric = (tenant = 'tenant-f') => ({
  ...groupSpec(tenant),
  networkImplementationType: 'Fabric',
})

t.test('Fabric groups on a running pipeline', async (t) => {
  const p = await startPipeline(t, {
    networkImplementation: { defaultType: 'Overlay', fabricRanges: RANGES },
  })
  await p.agent('dpu-1')

  t.test('create: identifiers held and shown, Failed saying why, nothing in OVN', async (t) => {
    const accepted = await p.client.applyGroup('fab-a', fabric())
    t.ok(accepted.jobId, 'group.create enqueued')
    t.equal(accepted.object.spec.networkImplementationType, 'Fabric', 'stored as asked')
    const group = await groupWhere(p, 'fab-a', (g) => g.status.phase === 'Failed')
    t.same(group.status.fabric, { vni: 7000, vlan: 300 }, 'the lowest of each range')
    t.equal(group.status.observedVersion, group.specVersion)
    t.equal(group.status.configsSynced, false)
    const why = condition(group, 'FabricConfigured')
    t.match(why, { status: 'False', reason: 'FABRIC_NOT_AVAILABLE' })
    t.match(why?.message, /the fabric's AS number is not configured \(HYDRAZINE_FABRIC_ASN\)/)
    t.match(condition(group, 'FabricAllocated'), { status: 'True' })
    t.equal(group.status.ovnCentral, undefined, 'no OVN central')
    t.same(await p.ownedRows(), [], 'no NB row for it')
    t.same(await p.controller.ipam.fabricIdsOf('fab-a'), { vni: 7000, vlan: 300 })

    // The same spec sent again to a Failed group is a new attempt: Failed again, same ids.
    const again = await p.client.applyGroup('fab-a', fabric())
    t.equal(again.object.specVersion, group.specVersion, 'the spec is unchanged')
    const second = await groupWhere(
      p,
      'fab-a',
      (g) => g.status.attempt === 2 && g.status.phase === 'Failed',
    )
    t.same(second.status.fabric, { vni: 7000, vlan: 300 }, 'the same identifiers')

    const report = await runReconcile(p, 'reconcile-fabric')
    t.ok(report.skipped.includes('fab-a'), 'reconcile has no OVN topology to compare')
    const deps = {
      store: p.controller.store,
      children: {} as ChildJobs,
      jobs: queueJobs(p.controller.queue),
    }
    const later = await retryDue(deps, { now: new Date(Date.now() + 3_600_000) })
    t.notOk(
      later.some((r) => r.name === 'fab-a'),
      'never retried by the controller: only a new version of Hydrazine can change it',
    )
  })

  t.test('a host is refused, naming its resourceGroup', async (t) => {
    const refused = await p.client
      .applyHost('host-f1', hostSpec('fab-a', 'dpu-1', 1))
      .catch((e: unknown) => e)
    t.ok(refused instanceof ValidationError)
    t.match((refused as ValidationError).issues, [
      { path: 'resourceGroup', message: /is a Fabric group.*HYDRAZINE_FABRIC_ASN/ },
    ])
    t.equal(await p.controller.store.hosts.get('host-f1'), undefined, 'nothing stored')
  })

  t.test('an Overlay group beside it is Ready; the default is the operator’s', async (t) => {
    const accepted = await p.client.applyGroup('ovl-a', groupSpec('tenant-o'))
    t.equal(accepted.object.spec.networkImplementationType, 'Overlay', 'stored explicitly')
    const group = await groupWhere(p, 'ovl-a', (g) => g.status.phase === 'Ready')
    t.equal(group.status.fabric, undefined, 'no fabric identifiers')
    t.equal(await p.controller.ipam.fabricIdsOf('ovl-a'), undefined)
  })

  t.test('an exhausted pool fails the group naming the setting; a delete frees it', async (t) => {
    await p.client.applyGroup('fab-b', fabric())
    const b = await groupWhere(p, 'fab-b', (g) => g.status.phase === 'Failed')
    t.same(b.status.fabric, { vni: 7001, vlan: 301 })

    await p.client.applyGroup('fab-c', fabric())
    const c = await groupWhere(p, 'fab-c', (g) => g.status.phase === 'Failed')
    t.equal(c.status.fabric, undefined)
    const full = condition(c, 'FabricAllocated')
    t.match(full, { status: 'False', reason: 'POOL_EXHAUSTED' })
    t.match(full?.message, /no VNI is free.*widen HYDRAZINE_FABRIC_VNIS/)

    await p.client.deleteGroup('fab-a')
    await gone(p, 'fab-a')
    t.equal(await p.controller.ipam.fabricIdsOf('fab-a'), undefined, 'VNI and VLAN back')
    // The exhausted group is tried again (a retryable failure): by hand here, as the
    // controller's retries would with backoff.
    await p.client.applyGroup('fab-c', { ...fabric(), dns: { enabled: false } })
    const retried = await groupWhere(p, 'fab-c', (g) => g.status.fabric !== undefined)
    t.same(retried.status.fabric, { vni: 7000, vlan: 300 }, "fab-a's identifiers, reused")
  })

  t.test('delete: every identifier back in the pools', async (t) => {
    for (const name of ['fab-b', 'fab-c', 'ovl-a']) await p.client.deleteGroup(name)
    for (const name of ['fab-b', 'fab-c', 'ovl-a']) await gone(p, name)
    t.same(await p.controller.ipam.fabricIdsUsage(), { held: 0, size: 2 })
    const redis = p.controller.redis
    t.equal(await redis.bitcount('hz:ipam:{fabric-ids}:vni:busy'), 0, 'no VNI bit left set')
    t.equal(await redis.bitcount('hz:ipam:{fabric-ids}:vlan:busy'), 0, 'no VLAN bit left set')
    t.same(await p.ownedRows(), [], 'and nothing in NB')
  })
})

t.test(
  'a group deleted while its create takes its identifiers waits for it, and leaves none held',
  async (t) => {
    let p: Pipeline | undefined
    let raced = false
    let waited = false
    p = await startPipeline(t, {
      networkImplementation: { defaultType: 'Fabric', fabricRanges: RANGES },
      checkpoint: async (point) => {
        if (point !== 'create:fabric-ids' || raced || !p) return
        raced = true
        // The DELETE arrives while the create is about to take the ids; for a second the
        // delete gets its chance to run inside the create (it must wait instead).
        await p.client.deleteGroup('fab-r')
        await new Promise((r) => setTimeout(r, 1000))
        waited = (await p.controller.store.groups.get('fab-r')) !== undefined
      },
    })
    await p.client.applyGroup('fab-r', groupSpec('tenant-r'))
    await gone(p, 'fab-r')
    t.ok(raced, 'the DELETE arrived inside the create')
    t.ok(waited, 'the delete waited for the create to end')
    t.equal(await p.controller.store.groups.get('fab-r'), undefined, 'the group is gone')
    t.same(await p.controller.ipam.fabricIdsUsage(), { held: 0, size: 2 }, 'and holds nothing')
  },
)
