/**
 * A queue producer end to end, as `npm start` runs it (`infra/service.ts`): its user and
 * queue on the agents' Redis, its request taken by the controller and converged like an
 * API call; it has no user on the store's Redis.
 */
import { createHash, randomBytes } from 'node:crypto'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Queue } from 'bullmq'
import { Redis } from 'ioredis'
import { pino } from 'pino'
import t from 'tap'
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
  const queue = new Queue(producerQueueName('ci-a'), { connection })
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
