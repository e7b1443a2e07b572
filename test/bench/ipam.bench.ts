/**
 * `npm run bench -- ipam`: how fast lib/ipam hands out addresses, against a private
 * Redis, compared with a no-op EVALSHA measured in the same run (the Redis limit).
 *
 * - `alloc_per_s`: single allocations per second, 4 clients with 64 requests in flight
 *   each (pipelined), median of rounds alternating with no-op rounds; baseline = no-op EVALSHA per second, same load; ratio =
 *   value / baseline. Targets: >= 20,000/s and ratio >= 0.5.
 * - `alloc_p99_ms`: p99 latency of one allocation at a time; baseline = p99 of one no-op
 *   EVALSHA at a time; ratio = baseline / value.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { Redis } from 'ioredis'
import { startLocalStack } from '../../infra/local/stack.ts'
import { createIpam, type Ipam } from '../../lib/ipam/index.ts'
import { quantile, report } from './report.ts'

const CLIENTS = 4
const IN_FLIGHT = 64
const PIPELINED_OPS = 60_000
const SEQUENTIAL_OPS = 3_000
const ROUNDS = 6

/** Runs `op(i)` for i in [0, total) over `lanes` concurrent lanes; returns ops/s and latencies. */
async function drive(
  total: number,
  lanes: number,
  op: (i: number, lane: number) => Promise<unknown>,
): Promise<{ perSecond: number; latencies: number[] }> {
  const latencies: number[] = []
  let next = 0
  const started = performance.now()
  await Promise.all(
    Array.from({ length: lanes }, async (_, lane) => {
      while (next < total) {
        const i = next++
        const t0 = performance.now()
        await op(i, lane)
        latencies.push(performance.now() - t0)
      }
    }),
  )
  return { perSecond: total / ((performance.now() - started) / 1000), latencies }
}

export default async function ipamBench(): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'hz-bench-ipam-'))
  const stack = await startLocalStack({ dataDir, redis: true, ovn: false, frr: false })
  const clients = Array.from({ length: CLIENTS }, () => new Redis(stack.redis?.url ?? ''))
  try {
    const noop = await clients[0]?.script('LOAD', 'return 0')
    if (typeof noop !== 'string') throw new Error('SCRIPT LOAD returned no sha')
    const ipams = clients.map((c) => createIpam(c, { prefix: 'bench:ipam:' }))
    const first = ipams[0]
    if (first === undefined) throw new Error('no client')
    await first.load()
    const pool = (n: number) => ({
      subnets: [
        {
          cidr: '10.0.0.0/8',
          gateway: '10.0.0.1',
          pools: [{ start: '10.0.0.2', end: `10.${n}.255.254` }],
        },
      ],
    })
    await first.createNetwork('pipelined', pool(1))
    await first.createNetwork('sequential', pool(0))

    const client = (lane: number) => clients[lane % CLIENTS] as Redis
    const ipamOf = (lane: number) => ipams[lane % CLIENTS] as Ipam
    // Warm up both paths (connections, JIT, the definition cache).
    await drive(2_000, CLIENTS * IN_FLIGHT, (_, lane) => client(lane).evalsha(noop, 0))
    await drive(1_000, CLIENTS, (i, lane) => ipamOf(lane).allocate('sequential', `warm-${i}`))

    // Rounds alternate no-op and allocation so that both see the same machine load;
    // each figure is the median of its rounds.
    const noopRates: number[] = []
    const allocRates: number[] = []
    const perRound = PIPELINED_OPS / ROUNDS
    for (let round = 0; round < ROUNDS; round++) {
      const n = await drive(perRound, CLIENTS * IN_FLIGHT, (_, lane) =>
        client(lane).evalsha(noop, 0),
      )
      noopRates.push(n.perSecond)
      const a = await drive(perRound, CLIENTS * IN_FLIGHT, (i, lane) =>
        ipamOf(lane).allocate('pipelined', `host-${round}-${i}`),
      )
      allocRates.push(a.perSecond)
    }
    const noopLoad = { perSecond: quantile(noopRates, 0.5) }
    const allocLoad = { perSecond: quantile(allocRates, 0.5) }
    const noopOne = await drive(SEQUENTIAL_OPS, 1, () => client(0).evalsha(noop, 0))
    const allocOne = await drive(SEQUENTIAL_OPS, 1, (i) => first.allocate('sequential', `one-${i}`))
    if ((await first.allocatedCount('pipelined')) !== PIPELINED_OPS)
      throw new Error('allocations went missing')

    report({
      suite: 'ipam',
      metric: 'alloc_per_s',
      value: allocLoad.perSecond,
      unit: '1/s',
      baseline: noopLoad.perSecond,
      ratio: allocLoad.perSecond / noopLoad.perSecond,
      note: `median of ${ROUNDS} rounds of ${PIPELINED_OPS / ROUNDS} allocations, ${CLIENTS} clients x ${IN_FLIGHT} in flight, alternating with no-op EVALSHA rounds (baseline); target >= 20000/s, ratio >= 0.5`,
    })
    const p99 = quantile(allocOne.latencies, 0.99)
    const noopP99 = quantile(noopOne.latencies, 0.99)
    report({
      suite: 'ipam',
      metric: 'alloc_p99_ms',
      value: p99,
      unit: 'ms',
      baseline: noopP99,
      ratio: noopP99 / p99,
      note: `${SEQUENTIAL_OPS} allocations one at a time; baseline no-op EVALSHA one at a time; ratio = baseline / value`,
    })
  } finally {
    for (const c of clients) c.disconnect()
    await stack.stop()
    await rm(dataDir, { recursive: true, force: true })
  }
}
