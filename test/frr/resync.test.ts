import { Queue } from 'bullmq'
import { Redis } from 'ioredis'
import t from 'tap'
import { createFrrSync } from '../../functions/frr-sync.ts'
import { storeAnnouncementSource } from '../../functions/internal/announcements.ts'
import {
  createFrrController,
  createVty,
  createVtysh,
  type FrrController,
  type ResyncResult,
  type Vtysh,
} from '../../lib/frr/index.ts'
import { FRR_QUEUE, FRR_RESYNC_JOB } from '../../lib/jobs/frr.ts'
import { type FrrConsumerOptions, startFrrConsumer } from '../../queues/frr.ts'
import { type Teardown, withStack } from '../helpers/stack.ts'
import { groupSpec, hostSpec, startPipeline, until } from '../pipeline/fixtures.ts'
import { eventually, redisAnnouncementSource } from './fixtures.ts'

/** Runs configuration lines inside the default BGP instance's IPv4 unicast table, by hand. */
async function byHand(vtysh: Vtysh, frr: FrrController, lines: string[]) {
  const { localAs } = await frr.state()
  await vtysh.configure([
    `router bgp ${localAs}`,
    ' address-family ipv4 unicast',
    ...lines.map((l) => `  ${l}`),
    ' exit-address-family',
    'exit',
  ])
}

/** An FRR consumer in this process whose periodic resyncs' results the test reads. */
async function consumer(
  t: Teardown,
  options: Omit<FrrConsumerOptions, 'connection' | 'handler' | 'onResync'> & { redisUrl: string },
) {
  const { redisUrl, ...rest } = options
  const connection = new Redis(redisUrl, { maxRetriesPerRequest: null })
  const resyncs: ResyncResult[] = []
  const started = await startFrrConsumer({
    ...rest,
    connection,
    handler: createFrrSync({ frr: options.frr }),
    onResync: (result) => resyncs.push(result),
  })
  t.teardown(async () => {
    await started.close()
    connection.disconnect()
  })
  return { ...started, resyncs }
}

const PERIOD_MS = 1000

t.test(
  'FRR drift is repaired by the periodic resync, without restarting the consumer',
  async (t) => {
    const p = await startPipeline(t, { frr: true })
    await p.agent('dpu-1')
    if (!p.frrVtyDir) throw new Error('no FRR')
    const vtysh = createVtysh({ vtyDir: p.frrVtyDir })
    const frr = createFrrController({ vty: createVty({ vtyDir: p.frrVtyDir }) })
    const c = await consumer(t, {
      redisUrl: p.redisUrl,
      frr,
      source: storeAnnouncementSource(p.controller.store, p.controller.ipam),
      prefix: p.prefix,
      resyncEveryMs: PERIOD_MS,
    })
    // An operator's own prefix (no Hydrazine route-map): never touched.
    await byHand(vtysh, frr, ['network 192.0.2.77/32'])

    await p.client.registerPublicIp('203.0.113.7')
    await p.client.applyGroup('group-p', groupSpec())
    await p.client.applyHost(
      'host-p',
      hostSpec('group-p', 'dpu-1', 3, { hostAccess: 'PublicAccess' }),
    )
    await until(
      () => p.controller.store.hosts.get('host-p'),
      (h) => h?.status.phase === 'Ready',
    )
    const natIp = '172.18.0.111'
    t.equal((await frr.table()).get('203.0.113.7/32'), natIp, 'announced through the pipeline')

    // Someone removes the announcement by hand: the next resyncs put it back.
    const before = c.resyncs.length
    const removedAt = Date.now()
    await byHand(vtysh, frr, ['no network 203.0.113.7/32'])
    const back = await eventually(
      () => frr.table(),
      (table) =>
        table.get('203.0.113.7/32') === natIp &&
        c.resyncs.slice(before).some((r) => r.announced === 1),
      5 * PERIOD_MS,
    )
    t.equal(back.get('203.0.113.7/32'), natIp, 'announced again via the NAT IP')
    t.ok(
      c.resyncs.slice(before).some((r) => r.announced === 1),
      'a periodic resync re-announced it (its result says so)',
    )
    t.ok(Date.now() - removedAt <= 5 * PERIOD_MS, 'within a few resync periods')

    // A /32 added by hand inside Hydrazine's own config (its route-map), which no host
    // holds: withdrawn.
    const stale = '198.51.100.99/32'
    await byHand(vtysh, frr, [`network ${stale} route-map HZ-NH-${natIp}`])
    const afterAdd = c.resyncs.length
    const cleaned = await eventually(
      () => frr.state(),
      (state) => !state.owned.has(stale) && c.resyncs.slice(afterAdd).some((r) => r.withdrawn > 0),
      5 * PERIOD_MS,
    )
    t.notOk(cleaned.owned.has(stale), 'the stale Hydrazine prefix is withdrawn')
    t.notOk((await frr.table()).has(stale), 'and gone from the BGP table')
    t.same(
      [...cleaned.owned],
      [['203.0.113.7/32', natIp]],
      "Hydrazine's config holds exactly the store's public IP",
    )
    t.ok(cleaned.foreign.has('192.0.2.77/32'), "the operator's prefix stays")

    t.ok(c.worker.isRunning(), 'the same consumer did all of it')
    const queue = new Queue(FRR_QUEUE, { connection: { url: p.redisUrl }, prefix: p.prefix })
    t.teardown(() => queue.close())
    const kept = await queue.getCompleted(0, -1)
    t.ok(
      kept.some((job) => job.name === FRR_RESYNC_JOB && job.returnvalue !== null),
      "resync jobs' results are there for operators to read",
    )
  },
)

t.test('a resync against an empty or partial store withdraws nothing', async (t) => {
  const stack = await withStack(t, { redis: true, frr: true })
  if (!stack.redis || !stack.frr) throw new Error('stack without redis or frr')
  const frr = createFrrController({ vty: createVty({ vtyDir: stack.frr.vtyDir }) })
  const nat = '10.77.0.105'
  const announced = ['198.51.100.1', '198.51.100.2', '198.51.100.3']
  await frr.converge(new Map(announced.map((ip) => [`${ip}/32`, nat])))
  const redis = new Redis(stack.redis.url)
  t.teardown(() => redis.disconnect())
  const storeKey = 'hz:test:publicips'

  const c = await consumer(t, {
    redisUrl: stack.redis.url,
    frr,
    source: redisAnnouncementSource(redis, storeKey),
    prefix: 'hzguard',
    resyncEveryMs: 100,
    maxResyncWithdrawals: 1,
  })
  const all = announced.map((ip) => `${ip}/32`)
  t.same(c.resynced.held, all, 'at start, an empty store: every prefix held, none withdrawn')

  // Each case: what the store holds, what the resync must hold back or withdraw.
  const cases = [
    {
      name: 'still empty: held, again and again',
      store: [],
      held: all,
      left: all,
    },
    {
      name: 'partial: 2 to withdraw, over the cap of 1: held',
      store: ['198.51.100.1'],
      held: ['198.51.100.2/32', '198.51.100.3/32'],
      left: all,
    },
    {
      name: 'one stale prefix, within the cap: withdrawn',
      store: ['198.51.100.1', '198.51.100.2'],
      held: [],
      left: ['198.51.100.1/32', '198.51.100.2/32'],
    },
  ]
  for (const k of cases) {
    await redis.del(storeKey)
    if (k.store.length > 0) await redis.hset(storeKey, ...k.store.flatMap((ip) => [ip, nat]))
    // The run under way may have read the store before the change; the next one did not.
    const seen = c.resyncs.length
    await eventually(
      async () => c.resyncs.length,
      (n) => n >= seen + 2,
    )
    const last = c.resyncs.at(-1)
    t.same(last?.held, k.held, `${k.name}: held`)
    t.same([...(await frr.table()).keys()].sort(), k.left, `${k.name}: still announced`)
  }
})

t.test('the periodic resync keeps a bounded number of finished jobs', async (t) => {
  const stack = await withStack(t, { redis: true, frr: true })
  if (!stack.redis || !stack.frr) throw new Error('stack without redis or frr')
  const frr = createFrrController({ vty: createVty({ vtyDir: stack.frr.vtyDir }) })
  const c = await consumer(t, {
    redisUrl: stack.redis.url,
    frr,
    source: { desired: async () => [] },
    prefix: 'hzbound',
    resyncEveryMs: 20,
  })
  await eventually(
    async () => c.resyncs.length,
    (n) => n >= 70,
    60_000,
  )
  t.ok(c.resyncs.length >= 70, `resync ran ${c.resyncs.length} times`)
  const queue = new Queue(FRR_QUEUE, { connection: { url: stack.redis.url }, prefix: 'hzbound' })
  t.teardown(() => queue.close())
  const kept = await queue.getCompletedCount()
  t.ok(kept > 0 && kept <= 50, `completed resync jobs kept: ${kept} (at most 50)`)
})
