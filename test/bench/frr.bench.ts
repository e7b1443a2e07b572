/**
 * `npm run bench -- frr`: the FRR consumer (BullMQ jobs → one vty session per batch to
 * bgpd → acked per prefix, config saved) against `/usr/lib/frr/frr-reload.py` applying
 * the same change from a rendered config, in the same run. Ratios are baseline / value
 * (higher is better).
 *
 * - announce_1000_ms: 1,000 /32s announced, enqueue → all acks. Target ratio ≥ 1.0.
 * - withdraw_1000_ms: the same 1,000 withdrawn. Target ratio ≥ 1.0.
 * - announce_one_at_10k_ms: with 10,000 announced, one more /32, enqueue → ack, median
 *   of 20. Target ratio ≥ 20 and value < 50 ms.
 *
 * `HYDRAZINE_BENCH_SCALE` scales every count (0.01: 10 announced and withdrawn, one more
 * with 100 announced, one run each).
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
  type BgpSettings,
  createFrrController,
  createVty,
  type FrrController,
  parseBgpSettings,
  renderBgpdConfig,
} from '../../lib/frr/index.ts'
import { FRR_QUEUE, FrrJobName } from '../../lib/jobs/frr.ts'
import { createFrrProducer, FRR_CONCURRENCY, startFrrConsumer } from '../../queues/frr.ts'
import { benchScale, quantile, report, scaled, scaleNote } from './report.ts'

const run = promisify(execFile)
const COUNT = 1000
const LARGE = 10_000
const ONE_RUNS = 20
const RELOAD_RUNS = 3
const NAT_IPS = ['172.18.0.105', '172.18.0.106', '172.18.0.107', '172.18.0.108']

/** The i-th public IP of the bench: 100.64.0.1 onwards, 250 per /24. */
const announcement = (i: number): Announcement => ({
  prefix: `100.${64 + Math.floor(i / 62_500)}.${Math.floor(i / 250) % 250}.${(i % 250) + 1}/32`,
  nextHop: NAT_IPS[i % NAT_IPS.length] ?? '172.18.0.105',
})
const range = (from: number, count: number) =>
  Array.from({ length: count }, (_, i) => announcement(from + i))

type Connection = { url: string; maxRetriesPerRequest: null }

export default async function frrBench(): Promise<void> {
  const scale = benchScale()
  const count = scaled(COUNT, scale)
  const large = scaled(LARGE, scale)
  const oneRuns = scaled(ONE_RUNS, scale)
  const reloadRuns = scaled(RELOAD_RUNS, scale)
  const dataDir = await mkdtemp(join(tmpdir(), 'hz-bench-frr-'))
  const settings = parseBgpSettings({ localAs: 65001, routerId: '127.0.0.1', peers: [] })
  const stack = await startLocalStack({
    dataDir,
    redis: true,
    ovn: false,
    frr: { bgpdConfig: renderBgpdConfig(settings) },
  })
  const vtyDir = stack.frr?.vtyDir
  const redisUrl = stack.redis?.url
  if (!redisUrl || !vtyDir) throw new Error('stack started without redis or frr')
  const connection: Connection = { url: redisUrl, maxRetriesPerRequest: null }
  // As the embedded FRR runs: every acknowledged change is saved first.
  const vty = createVty({ vtyDir })
  const frr = createFrrController({ vty, saveConfig: true })
  try {
    const shown = async () => (await frr.table()).size
    const thousand = range(0, count)

    const consumer = await startConsumer(connection, frr, 'hzbench')
    const announceMs = await timeJobs(connection, 'hzbench', FrrJobName.announce, thousand)
    if ((await shown()) !== count) throw new Error(`consumer: table shows ${await shown()}`)
    const withdrawMs = await timeJobs(connection, 'hzbench', FrrJobName.withdraw, thousand)
    if ((await shown()) !== 0) throw new Error(`consumer: ${await shown()} left after withdraw`)

    const reloadAnnounceMs = await throughFrrReload(vtyDir, settings, thousand, shown, count)
    const reloadWithdrawMs = await throughFrrReload(vtyDir, settings, [], shown, 0)

    // 10,000 announced (set up directly, not measured), then one more at a time.
    const announced = range(0, large)
    await frr.converge(new Map(announced.map((a) => [a.prefix, a.nextHop])))
    if ((await shown()) !== large) throw new Error(`setup: table shows ${await shown()}`)
    const one = await oneAtATime(connection, 'hzbench', range(large, oneRuns + 2))
    await consumer.close()

    let current = [...announced, ...range(large, oneRuns + 2)]
    const reloadOne: number[] = []
    for (let i = 0; i < reloadRuns; i++) {
      current = [...current, announcement(large + oneRuns + 2 + i)]
      reloadOne.push(await throughFrrReload(vtyDir, settings, current, shown, current.length))
    }
    const noopMs = await throughNoopWorker(connection, count)

    const oneMedian = quantile(one, 0.5)
    const reloadOneMedian = quantile(reloadOne, 0.5)
    report({
      suite: 'frr',
      metric: 'announce_one_at_10k_ms',
      value: oneMedian,
      unit: 'ms',
      baseline: reloadOneMedian,
      ratio: reloadOneMedian / oneMedian,
      note: `one more /32 with ${large} announced, enqueue→ack (bgpd shows it selected, config saved), median of ${oneRuns} (p95 ${quantile(one, 0.95).toFixed(1)} ms); baseline frr-reload.py --reload of the same one-prefix change, median of ${reloadRuns}; target ratio>=20, value<50${scaleNote(scale)}`,
    })
    report({
      suite: 'frr',
      metric: 'announce_1000_ms',
      value: announceMs,
      unit: 'ms',
      baseline: reloadAnnounceMs,
      ratio: reloadAnnounceMs / announceMs,
      note: `${count} /32 over ${NAT_IPS.length} next hops, enqueue→all acks vs frr-reload.py --reload until bgpd shows all; target ratio>=1${scaleNote(scale)}`,
    })
    report({
      suite: 'frr',
      metric: 'withdraw_1000_ms',
      value: withdrawMs,
      unit: 'ms',
      baseline: reloadWithdrawMs,
      ratio: reloadWithdrawMs / withdrawMs,
      note: `the same ${count} /32 withdrawn, enqueue→all acks vs frr-reload.py --reload until bgpd shows none; target ratio>=1${scaleNote(scale)}`,
    })
    report({
      suite: 'frr',
      metric: 'bullmq_noop_1000_ms',
      value: noopMs,
      unit: 'ms',
      note: `context: ${count} jobs through a BullMQ worker whose handler does nothing, same concurrency (${FRR_CONCURRENCY}): one job per round trip; the consumer's batches can beat it${scaleNote(scale)}`,
    })
  } finally {
    vty.close()
    await stack.stop()
    await rm(dataDir, { recursive: true, force: true })
  }
}

function startConsumer(connection: Connection, frr: FrrController, prefix: string) {
  return startFrrConsumer({
    connection,
    frr,
    source: { desired: async () => [] },
    handler: createFrrSync({ frr }),
    prefix,
    // The periodic resync would be one more job on the queue being counted.
    resyncEveryMs: 0,
  })
}

/** Enqueue one job per announcement; the clock stops when the last ack is in. */
async function timeJobs(
  connection: Connection,
  prefix: string,
  name: FrrJobName,
  batch: readonly Announcement[],
): Promise<number> {
  const queue = new Queue(FRR_QUEUE, { connection, prefix })
  const events = new QueueEvents(FRR_QUEUE, { connection, prefix })
  try {
    await events.waitUntilReady()
    let done = 0
    let failed = 0
    const finished = new Promise<void>((resolve) => {
      const count = () => {
        if (done + failed === batch.length) resolve()
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
    const started = performance.now()
    await createFrrProducer(queue).addBulk(
      batch.map((a, i) => ({
        name,
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
    if (failed > 0) throw new Error(`${failed} ${name} jobs failed`)
    return elapsed
  } finally {
    await queue.close()
    await events.close()
  }
}

/** Each announcement as one job, waiting for its ack before the next; the first two warm up. */
async function oneAtATime(
  connection: Connection,
  prefix: string,
  batch: readonly Announcement[],
): Promise<number[]> {
  const queue = new Queue(FRR_QUEUE, { connection, prefix })
  const events = new QueueEvents(FRR_QUEUE, { connection, prefix })
  const producer = createFrrProducer(queue)
  try {
    await events.waitUntilReady()
    const samples: number[] = []
    for (const [i, a] of batch.entries()) {
      const started = performance.now()
      const job = await producer.announce({
        publicIp: a.prefix.slice(0, -3),
        nextHop: a.nextHop,
        owner: `one-${i}`,
        specVersion: 1,
      })
      await job.waitUntilFinished(events, 30_000)
      if (i >= 2) samples.push(performance.now() - started)
    }
    return samples
  } finally {
    await queue.close()
    await events.close()
  }
}

/** The floor under any BullMQ consumer: `count` jobs through a handler doing nothing. */
async function throughNoopWorker(connection: Connection, count: number): Promise<number> {
  const prefix = 'hzbenchnoop'
  const worker = new Worker(FRR_QUEUE, async () => null, {
    connection,
    concurrency: FRR_CONCURRENCY,
    prefix,
  })
  await worker.waitUntilReady()
  try {
    return await timeJobs(connection, prefix, FrrJobName.announce, range(0, count))
  } finally {
    await worker.close()
  }
}

/**
 * The same change as a whole rendered config applied by frr-reload.py; the clock stops
 * when bgpd's table shows `expected` prefixes.
 */
async function throughFrrReload(
  vtyDir: string,
  settings: BgpSettings,
  announcements: readonly Announcement[],
  shown: () => Promise<number>,
  expected: number,
): Promise<number> {
  const file = join(vtyDir, 'bench-intended.conf')
  await writeFile(file, renderBgpdConfig(settings, announcements))
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
  while ((await shown()) !== expected) {
    if (performance.now() - started > 600_000) throw new Error('frr-reload.py did not converge')
    await new Promise((r) => setTimeout(r, 20))
  }
  return performance.now() - started
}
