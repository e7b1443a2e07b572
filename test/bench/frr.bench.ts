/**
 * `npm run bench -- frr`: time to announce 1,000 public IPs through the FRR consumer
 * (BullMQ jobs → batched vtysh → acked from the BGP table), against applying the same
 * change with `/usr/lib/frr/frr-reload.py` from a rendered config, in the same run.
 *
 * announce_1000_ms: baseline = frr-reload.py, ratio = baseline / value (higher is better).
 * Target: ratio ≥ 10 and value < 2000 ms.
 */
import { execFile } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Queue, QueueEvents, Worker } from 'bullmq'
import { createFrrSync } from '../../functions/frr-sync.ts'
import { startLocalStack } from '../../infra/local/stack.ts'
import {
  type Announcement,
  createFrrController,
  createVtysh,
  parseBgpSettings,
  renderBgpdConfig,
} from '../../lib/frr/index.ts'
import { FRR_QUEUE, FrrJobName } from '../../lib/jobs/frr.ts'
import { createFrrProducer, startFrrConsumer } from '../../queues/frr.ts'
import { report } from './report.ts'

const run = promisify(execFile)
const COUNT = 1000
const NAT_IPS = ['172.18.0.105', '172.18.0.106', '172.18.0.107', '172.18.0.108']

const announcements: Announcement[] = Array.from({ length: COUNT }, (_, i) => ({
  prefix: `203.0.${Math.floor(i / 250)}.${(i % 250) + 1}/32`,
  nextHop: NAT_IPS[i % NAT_IPS.length] ?? '172.18.0.105',
}))

export default async function frrBench(): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'hz-bench-frr-'))
  const settings = parseBgpSettings({ localAs: 65001, routerId: '127.0.0.1', peers: [] })
  const stack = await startLocalStack({
    dataDir,
    redis: true,
    ovn: false,
    frr: { bgpdConfig: renderBgpdConfig(settings) },
  })
  try {
    const redisUrl = stack.redis?.url
    const vtyDir = stack.frr?.vtyDir
    if (!redisUrl || !vtyDir) throw new Error('stack started without redis or frr')
    const frr = createFrrController({ vtysh: createVtysh({ vtyDir }) })
    const shown = async () => (await frr.table()).size

    const consumerMs = await throughConsumer(redisUrl, frr)
    if ((await shown()) !== COUNT) throw new Error(`consumer: table shows ${await shown()}`)

    await frr.converge(new Map(announcements.map((a) => [a.prefix, null])))
    if ((await shown()) !== 0) throw new Error('withdraw between runs failed')

    const reloadMs = await throughFrrReload(
      vtyDir,
      renderBgpdConfig(settings, announcements),
      shown,
    )

    const noopMs = await throughNoopWorker(redisUrl)

    report({
      suite: 'frr',
      metric: 'announce_1000_ms',
      value: consumerMs,
      unit: 'ms',
      baseline: reloadMs,
      ratio: reloadMs / consumerMs,
      note: `${COUNT} /32 over ${NAT_IPS.length} next hops, enqueue→all acks (BGP table) vs frr-reload.py --reload + table shows all; target ratio>=10, value<2000`,
    })
    report({
      suite: 'frr',
      metric: 'bullmq_noop_1000_ms',
      value: noopMs,
      unit: 'ms',
      note: `context: the same ${COUNT} jobs through a BullMQ worker whose handler does nothing (the floor under announce_1000_ms)`,
    })
  } finally {
    await stack.stop()
    await rm(dataDir, { recursive: true, force: true })
  }
}

/** Enqueue 1,000 announce jobs; the clock stops when the last ack is in. */
async function throughConsumer(
  redisUrl: string,
  frr: ReturnType<typeof createFrrController>,
): Promise<number> {
  const connection = { url: redisUrl, maxRetriesPerRequest: null }
  const prefix = 'hzbench'
  const consumer = await startFrrConsumer({
    connection,
    frr,
    source: { desired: async () => [] },
    handler: createFrrSync({ frr }),
    concurrency: COUNT,
    prefix,
    // The periodic resync would be one more completed job on the queue being counted.
    resyncEveryMs: 0,
  })
  return timeJobs(connection, prefix, () => consumer.close())
}

/** The floor under any BullMQ consumer: the same jobs through a handler doing nothing. */
async function throughNoopWorker(redisUrl: string): Promise<number> {
  const connection = { url: redisUrl, maxRetriesPerRequest: null }
  const prefix = 'hzbenchnoop'
  const worker = new Worker(FRR_QUEUE, async () => null, { connection, concurrency: COUNT, prefix })
  await worker.waitUntilReady()
  return timeJobs(connection, prefix, () => worker.close())
}

async function timeJobs(
  connection: { url: string; maxRetriesPerRequest: null },
  prefix: string,
  stop: () => Promise<void>,
): Promise<number> {
  const queue = new Queue(FRR_QUEUE, { connection, prefix })
  const events = new QueueEvents(FRR_QUEUE, { connection, prefix })
  try {
    await events.waitUntilReady()
    let done = 0
    let failed = 0
    const finished = new Promise<void>((resolve) => {
      const count = () => {
        if (done + failed === COUNT) resolve()
      }
      events.on('completed', () => {
        done++
        count()
      })
      events.on('failed', () => {
        failed++
        count()
      })
    })
    const producer = createFrrProducer(queue)
    const started = performance.now()
    await producer.addBulk(
      announcements.map((a, i) => ({
        name: FrrJobName.announce,
        data: {
          publicIp: a.prefix.slice(0, -3),
          nextHop: a.nextHop,
          owner: `host-${i}`,
          specVersion: 1,
        },
      })),
    )
    await finished
    const elapsed = performance.now() - started
    if (failed > 0) throw new Error(`${failed} announce jobs failed`)
    return elapsed
  } finally {
    await stop()
    await queue.close()
    await events.close()
  }
}

/** The same change as a whole rendered config applied by frr-reload.py. */
async function throughFrrReload(
  vtyDir: string,
  config: string,
  shown: () => Promise<number>,
): Promise<number> {
  const file = join(vtyDir, 'bench-intended.conf')
  await writeFile(file, config)
  await writeFile(join(vtyDir, 'vtysh.conf'), '')
  const started = performance.now()
  await run(
    '/usr/lib/frr/frr-reload.py',
    [
      '--reload',
      '--vty_socket',
      vtyDir,
      '--bindir',
      '/usr/bin',
      '--confdir',
      vtyDir,
      '--rundir',
      vtyDir,
      file,
    ],
    { maxBuffer: 256 * 1024 * 1024 },
  )
  while ((await shown()) !== COUNT) {
    if (performance.now() - started > 600_000) throw new Error('frr-reload.py did not converge')
    await new Promise((r) => setTimeout(r, 20))
  }
  return performance.now() - started
}
