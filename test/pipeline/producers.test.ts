/**
 * A queue producer end to end, as `npm start` runs it (`infra/service.ts`): its user and
 * queue on the agents' Redis, its request taken by the controller and converged like an
 * API call; it has no user on the store's Redis. What it may hold there is bounded like a
 * DPU's, and its queue is on the operator's dashboard.
 */
import { createHash, randomBytes } from 'node:crypto'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Queue } from 'bullmq'
import { Redis } from 'ioredis'
import { pino } from 'pino'
import { Registry } from 'prom-client'
import t from 'tap'
import { createApp } from '../../api/http/app.ts'
import { parseProducers } from '../../api/producers/producers-file.ts'
import { startProducers } from '../../infra/service.ts'
import { producerQueueName } from '../../lib/jobs/producers.ts'
import { asUser, groupSpec, startPipeline, until } from './fixtures.ts'

t.test("a producer's request from its own queue converges like the same API call", async (t) => {
  const p = await startPipeline(t, { agentsRedis: true })
  const password = randomBytes(16).toString('hex')
  const dir = await mkdtemp(join(tmpdir(), 'hz-producers-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  const file = join(dir, 'producers.json')
  const passwordSha256 = createHash('sha256').update(password).digest('hex')
  await writeFile(file, JSON.stringify({ 'ci-a': { tenant: 'tenant-a', passwordSha256 } }))
  const ingress = await startProducers(file, p.controller, pino({ level: 'silent' }))
  t.teardown(() => ingress.close())

  const user = { username: 'producer-ci-a', password }
  const connection = new Redis(asUser(p.agentsRedisUrl, user), { maxRetriesPerRequest: null })
  const queue = new Queue(producerQueueName('ci-a'), { connection, prefix: p.prefix })
  t.teardown(async () => {
    await queue.close()
    connection.disconnect()
  })
  await queue.add(
    'group.apply',
    { producer: 'ci-a', name: 'group-a', spec: groupSpec('tenant-a') },
    { jobId: 'apply-1', attempts: 1 },
  )
  const group = await until(
    () => p.client.getGroup('group-a'),
    (g) => g?.status.phase === 'Ready',
  )
  t.equal(group?.spec.tenantId, 'tenant-a', "tenant-a's group, Ready")
  t.match((await queue.getJob('apply-1'))?.returnvalue, {
    kind: 'ResourceGroup',
    name: 'group-a',
    specVersion: 1,
    jobId: 'group.create-group-a-v1',
  })
  await queue.add(
    'group.apply',
    { producer: 'ci-a', name: 'group-b', spec: groupSpec('tenant-b') },
    { jobId: 'apply-2', attempts: 1 },
  )
  const refused = await until(
    () => queue.getJob('apply-2'),
    (job) => job?.finishedOn !== undefined,
  )
  t.match(refused?.failedReason, /^FORBIDDEN: /, 'a group for another tenant is refused')
  t.equal(await p.client.getGroup('group-b'), undefined, 'and not stored')

  // The store's Redis knows no such user.
  const store = new Redis(asUser(p.redisUrl, user), {
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  })
  const errors: string[] = []
  store.on('error', (error: Error) => errors.push(error.message))
  t.teardown(() => store.disconnect())
  await t.rejects(store.ping(), "the producer cannot sign in to the store's Redis")
  t.match(errors.join('\n'), /WRONGPASS/)
})

t.test(
  "a producer over its bound in the agents' Redis loses its Redis user; the others keep theirs",
  async (t) => {
    const passwords = {
      'ci-big': randomBytes(16).toString('hex'),
      'ci-ok': randomBytes(16).toString('hex'),
    }
    const sha = (password: string) => createHash('sha256').update(password).digest('hex')
    const producers = parseProducers({
      'ci-big': { tenant: 'tenant-a', passwordSha256: sha(passwords['ci-big']) },
      'ci-ok': { operator: true, passwordSha256: sha(passwords['ci-ok']) },
    })
    const metrics = new Registry()
    const warnings: string[] = []
    const logger = pino({ level: 'warn' }, { write: (line: string) => warnings.push(line) })
    const p = await startPipeline(t, {
      agentsRedis: true,
      producers,
      producerRedisBound: { limitBytes: 1024 * 1024, everyMs: 0 },
      metrics,
      logger,
    })
    const ingress = await startProducers(producers, p.controller, pino({ level: 'silent' }))
    t.teardown(() => ingress.close())
    await p.controller.queue.upsertJobScheduler(
      'dpu.health',
      { every: 250 },
      { name: 'dpu.health', data: {}, opts: { removeOnComplete: { count: 10 } } },
    )
    const signIn = (id: 'ci-big' | 'ci-ok') => {
      const connection = new Redis(
        asUser(p.agentsRedisUrl, { username: `producer-${id}`, password: passwords[id] }),
        { maxRetriesPerRequest: 1 },
      )
      connection.on('error', () => {})
      t.teardown(() => connection.disconnect())
      return connection
    }
    const big = signIn('ci-big')
    const ok = signIn('ci-ok')
    t.equal(await ok.ping(), 'PONG', 'ci-ok is signed in')

    // ci-big writes 1.5 MB under its own queue's keys, each value within the 1 MB bulk bound.
    for (let i = 0; i < 3; i++)
      await big.set(
        `${p.prefix}:${producerQueueName('ci-big')}:filler-${i}`,
        'x'.repeat(512 * 1024),
      )
    const probe = new Redis(p.agentsRedisUrl, { maxRetriesPerRequest: 1 })
    t.teardown(() => probe.disconnect())
    const userOf = (id: string) => probe.call('ACL', 'GETUSER', `producer-${id}`)
    const user = await until(
      () => userOf('ci-big'),
      (found) => found === null,
    )
    t.equal(user, null, "over its bound, ci-big's Redis user is deleted")
    await t.rejects(
      probe.call('AUTH', 'producer-ci-big', passwords['ci-big']),
      /WRONGPASS/,
      'its password signs in no more',
    )
    await t.rejects(big.ping(), 'and its open connection was closed')
    t.equal(
      await probe.call('AUTH', 'producer-ci-ok', passwords['ci-ok']),
      'OK',
      "ci-ok's user stays",
    )
    const scraped = await metrics.getSingleMetricAsString(
      'hydrazine_producer_credentials_revoked_total',
    )
    t.match(
      scraped,
      /hydrazine_producer_credentials_revoked_total\{producer="ci-big"\} 1$/m,
      'the metric counts it, naming the producer',
    )
    t.notMatch(scraped, /producer="ci-ok"/)
    const warned = warnings.map((line) => JSON.parse(line) as { producer?: string; msg: string })
    const named = warned.filter((w) => w.producer !== undefined)
    t.equal(named.length, 1, 'a warning names it, once')
    t.match(named[0], {
      producer: 'ci-big',
      msg: /queue producer ci-big holds \d+ bytes in the agents' Redis, over its bound/,
    })
  },
)

t.test("the producers' queues are on the operator's queue dashboard", async (t) => {
  const passwordSha256 = createHash('sha256').update('unused').digest('hex')
  const producers = parseProducers({ 'ci-a': { tenant: 'tenant-a', passwordSha256 } })
  const p = await startPipeline(t, { agentsRedis: true, producers })
  const ingress = await startProducers(producers, p.controller, pino({ level: 'silent' }))
  t.teardown(() => ingress.close())
  const operator = 'operator-token-0123456789abcdef'
  const tokens = { operator: [operator], tenants: {} }
  const app = createApp({
    readiness: {},
    v1: { client: p.client, tokens },
    dashboard: { tokens, queues: () => p.controller.queues() },
  })
  // A request of the producer's, refused: its queue holds one failed job.
  const connection = new Redis(p.agentsRedisUrl, { maxRetriesPerRequest: null })
  const queue = new Queue(producerQueueName('ci-a'), { connection, prefix: p.prefix })
  t.teardown(async () => {
    await queue.close()
    connection.disconnect()
  })
  await queue.add('group.apply', { producer: 'someone-else', name: 'g', spec: {} }, { attempts: 1 })
  const listed = async () => {
    const answer = await app.request('/admin/queues/api/queues', {
      headers: { authorization: `Bearer ${operator}` },
    })
    return (await answer.json()) as {
      queues: { displayName: string; counts: Record<string, number> }[]
    }
  }
  const { queues } = await until(listed, (l) =>
    l.queues.some((q) => q.displayName === 'producer-ci-a' && q.counts.failed === 1),
  )
  t.same(
    queues.map((q) => q.displayName).sort(),
    ['frr', 'hydrazine', 'producer-ci-a'],
    "the producer queue is listed beside the controller's",
  )
  t.equal(
    queues.find((q) => q.displayName === 'producer-ci-a')?.counts.failed,
    1,
    'with its jobs: the request it refused',
  )
})
