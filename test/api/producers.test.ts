/**
 * Queue producers are callers like any other: each has its own queue and Redis user, and
 * its requests are made as the principal the operator configured it with — a tenant's
 * producer is held to that tenant's tenancy, exactly as its HTTP calls are. Real Redis
 * (its ACLs included), the contract's client and a worker on each producer's queue.
 */
import { createHash, randomBytes } from 'node:crypto'
import { Queue } from 'bullmq'
import { Redis } from 'ioredis'
import t from 'tap'
import { startProducerIngress } from '../../api/producers/ingress.ts'
import { parseProducers } from '../../api/producers/producers-file.ts'
import { createOperations } from '../../app/index.ts'
import { syncProducerUsers } from '../../infra/credentials.ts'
import { producerQueueName, producerRedisUser } from '../../lib/jobs/producers.ts'
import { groupSpec } from '../helpers/requests.ts'
import { asUser, until } from '../pipeline/fixtures.ts'
import { startContract } from './contract.ts'

const PREFIX = 'hzt'
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex')

t.test("a tenant's producer acts as that tenant; an unknown producer is refused", async (t) => {
  const c = await startContract(t)
  const passwords = {
    'ci-a': randomBytes(16).toString('hex'),
    'ci-b': randomBytes(16).toString('hex'),
    ops: randomBytes(16).toString('hex'),
  }
  const producers = parseProducers({
    'ci-a': { tenant: 'tenant-a', passwordSha256: sha256(passwords['ci-a']) },
    'ci-b': { tenant: 'tenant-b', passwordSha256: sha256(passwords['ci-b']) },
    ops: { operator: true, passwordSha256: sha256(passwords.ops) },
  })
  t.same(await syncProducerUsers(c.redis, producers, PREFIX), [], 'no stale producer user')
  const connections: Redis[] = []
  t.teardown(() => {
    for (const connection of connections) connection.disconnect()
  })
  const ingress = await startProducerIngress({
    producers,
    connection: () => {
      const connection = new Redis(c.redisUrl, { maxRetriesPerRequest: null })
      connections.push(connection)
      return connection
    },
    operations: createOperations({ client: c.client }),
    prefix: PREFIX,
  })
  t.teardown(() => ingress.close())

  /** A producer's queue as the producer reaches it: as its own Redis user. */
  const queues: Queue[] = []
  t.teardown(() => Promise.all(queues.map((q) => q.close())))
  const asProducer = (id: keyof typeof passwords, queueOf: string = id) => {
    const connection = new Redis(
      asUser(c.redisUrl, { username: producerRedisUser(id), password: passwords[id] }),
      { maxRetriesPerRequest: null },
    )
    connections.push(connection)
    const queue = new Queue(producerQueueName(queueOf), { connection, prefix: PREFIX })
    queues.push(queue)
    let n = 0
    /** Queues a request and waits for its outcome: `result`, or why it was refused. */
    return async (name: string, data: object) => {
      const jobId = `${id}-${++n}`
      await queue.add(name, data, { jobId, attempts: 1 })
      const job = await until(
        () => queue.getJob(jobId),
        (found) => found?.finishedOn !== undefined,
      )
      return { result: job?.returnvalue as unknown, refused: job?.failedReason }
    }
  }
  const ciA = asProducer('ci-a')
  const ciB = asProducer('ci-b')
  const ops = asProducer('ops')

  // The operator's inventory and tenant-b's group and host, made over the client.
  await c.client.applyDpu('dpu-b', {
    tenantId: 'tenant-b',
    fabricIps: ['172.18.0.22', '172.18.0.122'],
    hostPorts: ['pf0hpf'],
  })
  t.match(
    await ciB('group.apply', { producer: 'ci-b', name: 'group-b', spec: groupSpec('tenant-b') }),
    { result: { kind: 'ResourceGroup', name: 'group-b', specVersion: 1, jobId: /group\.create/ } },
    "tenant-b's producer makes tenant-b's group",
  )
  t.match(
    await ciB('host.apply', {
      producer: 'ci-b',
      name: 'host-b',
      spec: { resourceGroup: 'group-b', hostMAC: '52:54:00:00:0b:01', dpu: { id: 'dpu-b' } },
    }),
    { result: { kind: 'ManagedResource', name: 'host-b', specVersion: 1 } },
    'and its host, on its DPU',
  )
  const before = await c.snapshot()

  // tenant-a's producer, against tenant-b's objects: each refused as tenant-a's HTTP call is.
  const refusals: [string, string, object, RegExp][] = [
    [
      'delete group-b',
      'group.delete',
      { name: 'group-b', force: true },
      /^NOT_FOUND: resource group group-b does not exist/,
    ],
    [
      'delete host-b',
      'host.delete',
      { name: 'host-b' },
      /^NOT_FOUND: managed resource host-b does not exist/,
    ],
    [
      'take over host-b',
      'host.apply',
      {
        name: 'host-b',
        spec: { resourceGroup: 'group-b', hostMAC: '52:54:00:00:0a:01', dpu: { id: 'dpu-b' } },
      },
      /^NAME_TAKEN: /,
    ],
    [
      'attach into group-b',
      'host.apply',
      {
        name: 'host-a',
        spec: { resourceGroup: 'group-b', hostMAC: '52:54:00:00:0a:01', dpu: { id: 'dpu-b' } },
      },
      /resourceGroup: .*group-b/,
    ],
    [
      'make a group for tenant-b',
      'group.apply',
      { name: 'group-x', spec: groupSpec('tenant-b') },
      /^FORBIDDEN: /,
    ],
    [
      'overwrite group-b',
      'group.apply',
      { name: 'group-b', spec: groupSpec('tenant-a') },
      /^NAME_TAKEN: /,
    ],
  ]
  for (const [what, name, data, why] of refusals) {
    const { result, refused } = await ciA(name, { producer: 'ci-a', ...data })
    t.equal(result, null, `tenant-a's producer cannot ${what}`)
    t.match(refused, why, `${what}: ${refused}`)
  }
  t.same(await c.snapshot(), before, 'nothing stored, nothing enqueued')
  t.notOk((await c.store.groups.get('group-b'))?.deletion, 'group-b is not being deleted')

  // No identity, an unknown one, or another producer's: refused before the request is read.
  const unknown: [string, object, RegExp][] = [
    ['no producer', {}, /^UNKNOWN_PRODUCER: producer: producer is required/],
    [
      'an unknown producer',
      { producer: 'nobody' },
      /^UNKNOWN_PRODUCER: producer: no producer "nobody" is configured/,
    ],
    [
      "another producer's id",
      { producer: 'ci-b' },
      /^UNKNOWN_PRODUCER: producer: "ci-b" is not this queue's producer \(ci-a\)/,
    ],
  ]
  for (const [what, identity, why] of unknown) {
    const { refused } = await ciA('group.delete', { ...identity, name: 'group-b' })
    t.match(refused, why, `${what}: ${refused}`)
  }
  t.match(
    (
      await ciA('group.apply', {
        producer: 'ci-a',
        name: 'group-a',
        spec: { tenantId: 'tenant-a', network: { cidr: '10.0.0.0/33' } },
      })
    ).refused,
    /^INVALID: .*network/,
    'an invalid spec names its field',
  )
  t.match(
    (
      await ciA('publicip.allocate', {
        producer: 'ci-a',
        host: 'host-b',
        specVersion: 1,
        families: [4],
      })
    ).refused,
    /^UNKNOWN_REQUEST: "publicip\.allocate" is not a request; a producer may queue group\.apply, group\.delete, host\.apply, host\.delete/,
    "a controller job is not a producer's to queue",
  )
  t.same(await c.snapshot(), before, 'still nothing stored or enqueued')

  // Its own tenant's group: made, as tenant-a.
  t.match(
    await ciA('group.apply', {
      producer: 'ci-a',
      name: 'group-a',
      spec: groupSpec('tenant-a', '10.20.0.0/24', '10.20.0.1'),
    }),
    { result: { kind: 'ResourceGroup', name: 'group-a', specVersion: 1 } },
  )
  t.equal((await c.store.groups.get('group-a'))?.spec.tenantId, 'tenant-a')

  // The operator's producer may delete any tenant's group.
  t.match(await ops('group.delete', { producer: 'ops', name: 'group-b' }), {
    result: { kind: 'ResourceGroup', name: 'group-b' },
  })
  t.ok((await c.store.groups.get('group-b'))?.deletion, "the operator's producer deleted group-b")
})

t.test("a producer's Redis user reaches its own queue and nothing else", async (t) => {
  const c = await startContract(t)
  const password = randomBytes(16).toString('hex')
  const producers = parseProducers({
    'ci-a': { tenant: 'tenant-a', passwordSha256: sha256(password) },
    'ci-b': { tenant: 'tenant-b', passwordSha256: sha256(randomBytes(16).toString('hex')) },
  })
  await syncProducerUsers(c.redis, producers, PREFIX)
  const redis = new Redis(asUser(c.redisUrl, { username: 'producer-ci-a', password }), {
    maxRetriesPerRequest: null,
  })
  t.teardown(() => redis.disconnect())
  const queueOf = (name: string) => new Queue(name, { connection: redis, prefix: PREFIX })
  const own = queueOf(producerQueueName('ci-a'))
  const other = queueOf(producerQueueName('ci-b'))
  const controller = queueOf('controller')
  t.teardown(() => Promise.all([own, other, controller].map((q) => q.close())))

  const job = await own.add('group.apply', { producer: 'ci-a', name: 'g', spec: {} })
  t.ok(job.id, 'it adds to its own queue')
  await t.rejects(
    other.add('group.delete', { producer: 'ci-b', name: 'group-b' }),
    /NOPERM/,
    "another producer's queue is refused: it cannot speak as that producer",
  )
  await t.rejects(
    controller.add('group.delete', { group: 'group-b', force: true }),
    /NOPERM/,
    "the controller's own queue is refused",
  )
  await t.rejects(redis.get('hz:groups'), /NOPERM/, 'the desired state is refused')
  await t.rejects(redis.call('KEYS', '*'), /NOPERM/, 'listing keys is refused')

  /** The users of the connections open now, as Redis lists them. */
  const connectedUsers = async () =>
    [...String(await c.redis.call('CLIENT', 'LIST')).matchAll(/ user=(\S+)/g)].map((m) => m[1])
  /** Signs in as producer-ci-a with `secret`; resolves with why it was refused, if it was. */
  const signIn = async (secret: string) => {
    const client = new Redis(asUser(c.redisUrl, { username: 'producer-ci-a', password: secret }), {
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    })
    const errors: string[] = []
    client.on('error', (error: Error) => errors.push(error.message))
    try {
      await client.ping()
      return undefined
    } catch {
      return errors.join('\n')
    } finally {
      client.disconnect()
    }
  }
  t.ok((await connectedUsers()).includes('producer-ci-a'), 'it is connected')

  // A new password in the file: the old one stops working, and so do its connections.
  redis.on('error', () => {})
  const rotated = randomBytes(16).toString('hex')
  const renewed = producers.map((p) =>
    p.id === 'ci-a' ? { ...p, passwordSha256: sha256(rotated) } : p,
  )
  t.same(await syncProducerUsers(c.redis, renewed, PREFIX), [], 'nothing removed')
  t.notOk((await connectedUsers()).includes('producer-ci-a'), 'its connection was closed')
  t.match(await signIn(password), /WRONGPASS/, 'the old password is refused')
  t.equal(await signIn(rotated), undefined, 'the new one signs in')

  // Taken out of the file: its user goes, its connections with it.
  t.same(await syncProducerUsers(c.redis, renewed.slice(1), PREFIX), ['ci-a'])
  t.match(await signIn(rotated), /WRONGPASS/, 'it cannot sign in')
})
