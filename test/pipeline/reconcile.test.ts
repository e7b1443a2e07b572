import type { Job } from 'bullmq'
import { Redis } from 'ioredis'
import t from 'tap'
import type { ChildJobs } from '../../functions/internal/deps.ts'
import { GroupApplier } from '../../functions/internal/group-apply.ts'
import { createReconcile, type ReconcileOptions } from '../../functions/reconcile.ts'
import { agentDirectory } from '../../infra/controller.ts'
import { Heartbeats } from '../../lib/agent-protocol/heartbeats.ts'
import { queueJobs } from '../../lib/jobs/redrive.ts'
import { NbPool, sharedCentralProvider, topologyNames } from '../../lib/ovn/index.ts'
import { StateStore } from '../../lib/state/store.ts'
import type { Teardown } from '../helpers/stack.ts'
import { groupSpec, type Pipeline, startPipeline, until } from './fixtures.ts'
import { readyFabricHost, runReconcile } from './scenarios.ts'

/**
 * One reconcile run over the pipeline's shared central with `store` as its store (one that
 * answers late, one that lost its data), through an NB pool and applier of its own; nothing
 * is converging here, so every job counts as still pending.
 */
function reconcileOnce(
  t: Teardown,
  p: Pipeline,
  store: StateStore,
  options: ReconcileOptions = {},
) {
  const nb = new NbPool()
  t.teardown(() => nb.close())
  const ovn = sharedCentralProvider({ nb: p.nb, sb: p.sb })
  const fabric = { dummyIp: '172.18.0.254/24', physicalNetwork: 'physnet' }
  const groups = new GroupApplier({ store, ipam: p.controller.ipam, ovn, nb, fabric })
  const children = { outcome: async () => ({ state: 'pending' }) } as unknown as ChildJobs
  const deps = {
    store,
    ovn,
    nb,
    groups,
    children,
    jobs: queueJobs(p.controller.queue),
    agents: agentDirectory(new Heartbeats(p.controller.agentsRedis)),
  }
  return createReconcile(deps, options)({} as Job)
}

t.test('reconcile repairs drift in NB and removes orphan rows, and says what it did', async (t) => {
  const p = await startPipeline(t)
  await readyFabricHost(p)
  const natBefore = await p.nbctl('lr-nat-list', topologyNames.gatewayRouter('group-a', 'dpu-1'))

  // Drift: someone deletes the host's DNAT rule by hand.
  await p.nbctl(
    'lr-nat-del',
    topologyNames.gatewayRouter('group-a', 'dpu-1'),
    'dnat_and_snat',
    '172.18.0.111',
  )
  t.notMatch(
    await p.nbctl('lr-nat-list', topologyNames.gatewayRouter('group-a', 'dpu-1')),
    /dnat_and_snat/,
  )
  // An orphan: rows of a group Hydrazine no longer knows.
  await p.nbctl(
    '--',
    '--id=@lr',
    'create',
    'Logical_Router',
    'name=hz-gone-lr',
    'external_ids:hydrazine\\:owner=group/gone',
    'external_ids:hydrazine\\:group=gone',
    'external_ids:hydrazine\\:key=lr',
  )
  // Not Hydrazine's: must be left alone.
  await p.nbctl('ls-add', 'operator-switch')

  const job = await p.controller.queue.add('reconcile', {}, { jobId: 'reconcile-now' })
  await until(
    () => job.getState(),
    (s) => s === 'completed' || s === 'failed',
  )
  const done = await p.controller.queue.getJob('reconcile-now')
  t.match(done?.returnvalue, { repaired: ['group-a'], orphansRemoved: ['gone'], checkedGroups: 1 })
  t.equal(
    await p.nbctl('lr-nat-list', topologyNames.gatewayRouter('group-a', 'dpu-1')),
    natBefore,
    'the DNAT rule is back',
  )
  t.notMatch(await p.nbctl('lr-list'), /hz-gone-lr/, 'the orphan router is gone')
  t.match(await p.nbctl('ls-list'), /operator-switch/, "the operator's switch is untouched")

  const again = await p.controller.queue.add('reconcile', {}, { jobId: 'reconcile-again' })
  await until(
    () => again.getState(),
    (s) => s === 'completed',
  )
  t.match(
    (await p.controller.queue.getJob('reconcile-again'))?.returnvalue,
    {
      repaired: [],
      orphansRemoved: [],
    },
    'nothing to repair the second time',
  )
})

t.test(
  'a group created after reconcile listed the groups keeps its rows; a real orphan goes',
  async (t) => {
    const p = await startPipeline(t)
    await p.client.applyGroup('group-new', groupSpec('tenant-a', '10.30.30.0/24', '10.30.30.1'))
    await until(
      () => p.client.getGroup('group-new'),
      (g) => g?.status.phase === 'Ready',
    )
    await p.nbctl(
      '--',
      '--id=@lr',
      'create',
      'Logical_Router',
      'name=hz-gone-lr',
      'external_ids:hydrazine\\:owner=group/gone',
      'external_ids:hydrazine\\:group=gone',
      'external_ids:hydrazine\\:key=lr',
    )

    // The run's list of groups was read before group-new was stored.
    const store = p.controller.store
    const staleList = new Proxy(store, {
      get: (target, key) => {
        if (key === 'listGroups') return async () => []
        const value = Reflect.get(target, key, target)
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
    const report = await reconcileOnce(t, p, staleList)

    t.same(report.orphansRemoved, ['gone'], 'the group no store has is removed')
    t.match(
      await p.nbctl('ls-list'),
      topologyNames.switch('group-new'),
      'the group created meanwhile keeps its switch: the store was asked again',
    )
    t.notMatch(await p.nbctl('lr-list'), /hz-gone-lr/)
  },
)

t.test('reconcile deletes nothing from an NB when the store lost its data', async (t) => {
  const p = await startPipeline(t)
  for (const [name, net] of [
    ['group-a', '10.31.1'],
    ['group-b', '10.31.2'],
  ] as const) {
    await p.client.applyGroup(name, groupSpec('tenant-a', `${net}.0/24`, `${net}.1`))
    await until(
      () => p.client.getGroup(name),
      (g) => g?.status.phase === 'Ready',
    )
  }
  // A run with the real store: the NB records its epoch.
  await runReconcile(p, 'reconcile-epoch')
  t.match(await p.nbctl('get', 'NB_Global', '.', 'external_ids'), /hydrazine:store-epoch/)

  const redis = new Redis(p.redisUrl)
  t.teardown(() => redis.disconnect())
  const reconcileWith = (store: StateStore, maxOrphanDeletions?: number) =>
    reconcileOnce(t, p, store, maxOrphanDeletions ? { maxOrphanDeletions } : {})

  // An empty store (a wrong REDIS_URL, a lost AOF) has an epoch of its own.
  const wiped = await reconcileWith(new StateStore(redis, 'hz:{wiped}:'))
  t.same(wiped.orphansRemoved, [], 'nothing deleted')
  t.match(wiped.orphansHeld, [
    { nb: p.nb, groups: ['group-a', 'group-b'], reason: 'StoreEpochMismatch' },
  ])
  const switches = await p.nbctl('ls-list')
  t.match(switches, topologyNames.switch('group-a'), "group-a's switch is still there")
  t.match(switches, topologyNames.switch('group-b'), "group-b's switch is still there")

  // With the NB's own store, orphans beyond the run's cap are held too.
  for (const gone of ['gone-1', 'gone-2']) {
    await p.nbctl(
      '--',
      '--id=@lr',
      'create',
      'Logical_Router',
      `name=hz-${gone}-lr`,
      `external_ids:hydrazine\\:owner=group/${gone}`,
      'external_ids:hydrazine\\:key=lr',
    )
  }
  const capped = await reconcileWith(p.controller.store, 1)
  t.match(capped.orphansHeld, [{ groups: ['gone-1', 'gone-2'], reason: 'TooManyOrphans' }])
  t.same(capped.orphansRemoved, [])
  const within = await reconcileWith(p.controller.store, 2)
  t.same(within.orphansRemoved, ['gone-1', 'gone-2'], 'within the cap they go')
  t.same(within.orphansHeld, [])
})
