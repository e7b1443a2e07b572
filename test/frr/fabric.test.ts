import { type ChildProcess, execFile, spawn } from 'node:child_process'
import { once } from 'node:events'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { Queue, QueueEvents } from 'bullmq'
import { Redis } from 'ioredis'
import t from 'tap'
import { createFrrController, createVty, createVtysh } from '../../lib/frr/index.ts'
import { FRR_QUEUE, type FrrAck } from '../../lib/jobs/frr.ts'
import { createFrrProducer } from '../../queues/frr.ts'
import type { Teardown } from '../helpers/stack.ts'
import { eventually, fabricBgpRoutes, withPeeredBgpd } from './fixtures.ts'

const run = promisify(execFile)
const consumerMain = fileURLToPath(new URL('./consumer-main.ts', import.meta.url))

const NAT_A = '10.77.0.105'
const NAT_B = '10.77.0.106'
const NAT_FAR = '172.18.0.105'
const STORE_KEY = 'hz:test:publicips'
/** How long the test waits for one FRR job to finish. */
const JOB_WAIT_MS = 60_000

/** Starts the consumer in its own process; resolves with its start-up resync result. */
async function startConsumer(t: Teardown, env: Record<string, string>) {
  const child: ChildProcess = spawn(process.execPath, ['--import=tsx', consumerMain], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  t.teardown(() => {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
  })
  let out = ''
  const ready = new Promise<unknown>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString()
      const line = out.split('\n').find((l) => l.startsWith('READY '))
      if (line) resolve(JSON.parse(line.slice('READY '.length)))
    })
    child.once('exit', (code) => reject(new Error(`consumer exited (${code}) before READY`)))
  })
  return { child, resynced: await ready }
}

t.test('announce, withdraw and restart, seen by a fabric router over BGP', async (t) => {
  const { ns, stack, vtyDir, fabric } = await withPeeredBgpd(t, { redis: true })
  const redisUrl = stack.redis?.url
  if (!redisUrl) throw new Error('stack started without redis')
  const hydrazineFrr = createVtysh({ vtyDir })
  const frr = createFrrController({ vty: createVty({ vtyDir }) })

  // Before the consumer ever ran: an operator's prefix, configured by hand, and a stale
  // Hydrazine announcement the store no longer wants.
  await hydrazineFrr.configure([
    'router bgp 65001',
    ' address-family ipv4 unicast',
    '  network 192.0.2.77/32',
    ' exit-address-family',
    'exit',
  ])
  await frr.converge(new Map([['198.51.100.66/32', NAT_B]]))

  const redis = new Redis(redisUrl)
  t.teardown(() => redis.disconnect())
  await redis.hset(STORE_KEY, '198.51.100.1', NAT_A)

  const env = { REDIS_URL: redisUrl, FRR_VTY_DIR: vtyDir, STORE_KEY, QUEUE_PREFIX: 'hzfrr' }
  const first = await startConsumer(t, env)
  t.same(
    first.resynced,
    { announced: 1, withdrawn: 1, conflicts: [], failed: [], held: [] },
    'start-up resync',
  )

  const routes = () => fabricBgpRoutes(fabric)
  let seen = await eventually(
    routes,
    (r) => r.get('198.51.100.1/32') === NAT_A && !r.has('198.51.100.66/32'),
  )
  t.equal(
    seen.get('198.51.100.1/32'),
    NAT_A,
    'fabric routes the allocated public IP via the NAT IP',
  )
  t.notOk(seen.has('198.51.100.66/32'), 'the stale Hydrazine prefix is withdrawn')
  t.equal(seen.get('192.0.2.77/32'), ns.hydrazineIp, "the operator's prefix stays")

  const connection = { url: redisUrl, maxRetriesPerRequest: null }
  const queue = new Queue(FRR_QUEUE, { connection, prefix: 'hzfrr' })
  const events = new QueueEvents(FRR_QUEUE, { connection, prefix: 'hzfrr' })
  t.teardown(async () => {
    await queue.close()
    await events.close()
  })
  await events.waitUntilReady()
  const producer = createFrrProducer(queue)
  // A job is one vtysh run: a second alone, but the full suite runs many files at once on
  // two cores, where 20 s once ran out.
  const ack = async (job: Awaited<ReturnType<typeof producer.announce>>) =>
    (await job.waitUntilFinished(events, JOB_WAIT_MS)) as FrrAck

  const payload = { publicIp: '203.0.113.7', nextHop: NAT_A, owner: 'host-1', specVersion: 1 }
  const announced = await ack(await producer.announce(payload))
  t.match(announced, { prefix: '203.0.113.7/32', announced: true, nextHop: NAT_A, owner: 'host-1' })
  seen = await eventually(routes, (r) => r.get('203.0.113.7/32') === NAT_A)
  t.equal(seen.get('203.0.113.7/32'), NAT_A, 'after announce: fabric has P/32 via the NAT IP')

  // Idempotent: the same change again (a new spec version, so a new job) changes nothing.
  const again = await ack(await producer.announce({ ...payload, specVersion: 2 }))
  t.equal(again.nextHop, NAT_A)
  const config = await hydrazineFrr.show('show running-config')
  t.equal(config.split('\n').filter((l) => l.includes('network 203.0.113.7/32')).length, 1)

  // An operator's prefix is never withdrawn by Hydrazine: the job fails, not retried.
  const foreign = await producer.withdraw({
    publicIp: '192.0.2.77',
    owner: 'host-9',
    specVersion: 1,
  })
  await t.rejects(foreign.waitUntilFinished(events, JOB_WAIT_MS), /FRR_PREFIX_NOT_OWNED/)

  // A NAT IP off the peering subnet (the fabric routes 172.18.0.0/24 elsewhere): the
  // next hop still reaches the fabric unchanged.
  await run('ip', ['-n', ns.fabric, 'route', 'add', '172.18.0.0/24', 'via', '10.77.0.50'])
  const offSubnet = await ack(
    await producer.announce({
      publicIp: '203.0.113.9',
      nextHop: NAT_FAR,
      owner: 'host-2',
      specVersion: 1,
    }),
  )
  t.equal(offSubnet.nextHop, NAT_FAR)
  seen = await eventually(routes, (r) => r.get('203.0.113.9/32') === NAT_FAR)
  t.equal(seen.get('203.0.113.9/32'), NAT_FAR, 'fabric has P/32 via an off-subnet NAT IP')
  await ack(await producer.withdraw({ publicIp: '203.0.113.9', owner: 'host-2', specVersion: 2 }))

  const withdrawn = await ack(
    await producer.withdraw({ publicIp: '203.0.113.7', owner: 'host-1', specVersion: 3 }),
  )
  t.match(withdrawn, { prefix: '203.0.113.7/32', announced: false, nextHop: null })
  seen = await eventually(routes, (r) => !r.has('203.0.113.7/32'))
  t.notOk(seen.has('203.0.113.7/32'), 'after withdraw: gone from the fabric')

  // Kill the consumer, change the store while it is down, start it again.
  first.child.kill('SIGKILL')
  await once(first.child, 'exit')
  await redis.hdel(STORE_KEY, '198.51.100.1')
  await redis.hset(STORE_KEY, '198.51.100.2', NAT_B, '198.51.100.3', NAT_A)
  const second = await startConsumer(t, env)
  t.same(
    second.resynced,
    { announced: 2, withdrawn: 1, conflicts: [], failed: [], held: [] },
    'restart resync',
  )
  seen = await eventually(
    routes,
    (r) =>
      !r.has('198.51.100.1/32') && r.get('198.51.100.2/32') === NAT_B && r.has('198.51.100.3/32'),
  )
  t.same(
    Object.fromEntries([...seen].filter(([p]) => p !== '10.77.0.0/24')),
    {
      '192.0.2.77/32': ns.hydrazineIp,
      '198.51.100.2/32': NAT_B,
      '198.51.100.3/32': NAT_A,
    },
    'after restart the fabric holds exactly the store plus the operator prefix',
  )
})
