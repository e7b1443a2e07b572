/**
 * `npm run bench -- ipam`: how fast lib/ipam hands out addresses, against a private
 * Redis, compared with a no-op EVALSHA measured in the same run (the Redis limit).
 *
 * The Redis is the embedded one, durable: `appendfsync always` syncs the append-only file
 * before answering any command that wrote. A no-op writes nothing and never waits for the
 * disk; an allocation always does. `durable_write_per_s` (a script that writes one key)
 * says how much of the gap is the disk's.
 *
 * - `alloc_per_s`: allocations from the `default` pool of a group network with one subnet
 *   and nothing else (`{ pool: 'default', version: 4 }`, as a host's attach asks), 4
 *   clients with 64 requests in flight each (pipelined), median of rounds alternating with
 *   the other kinds; baseline = no-op EVALSHA per second, same load; ratio = value /
 *   baseline. Targets: >= 20,000/s and ratio >= 0.5.
 * - `alloc_per_s_pools`: the same from a group network with named pools, reservations, an
 *   extra IPv4 subnet and IPv6 subnets; baseline and ratio as above.
 * - `durable_write_per_s`: a script that sets one key, same load; baseline and ratio as
 *   above: the ceiling durability puts on any write.
 * - `alloc_p99_ms`: p99 latency of one allocation at a time; baseline = p99 of one no-op
 *   EVALSHA at a time; ratio = baseline / value.
 * - `durable_write_p99_ms`: p99 of one one-key write at a time; baseline and ratio as above.
 *
 * `HYDRAZINE_BENCH_SCALE` scales the rounds and every count of operations (0.01: one
 * round of 100, 30 one at a time).
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { performance } from 'node:perf_hooks'
import { Redis } from 'ioredis'
import { startLocalStack } from '../../infra/local/stack.ts'
import { createIpam, type Ipam, type NetworkSpec } from '../../lib/ipam/index.ts'
import { benchScale, quantile, report, scaled, scaleNote } from './report.ts'

const CLIENTS = 4
const IN_FLIGHT = 64
const PIPELINED_OPS = 60_000
const SEQUENTIAL_OPS = 3_000
const ROUNDS = 6
/** Operations of each kind that warm up its path before any is measured. */
const WARM_UP_OPS = 2_000
const WARM_UP_ALLOCS = 1_000

/** What a host naming no pool asks for in a group with an IPv4 network. */
const DEFAULT_POOL = { pool: 'default', version: 4 } as const

/** A group network as the controller defines it: one DHCP subnet, its `default` pool. */
const plainGroup: NetworkSpec = {
  subnets: [
    {
      cidr: '10.0.0.0/12',
      gateway: '10.0.0.1',
      dhcp: true,
      pools: [{ start: '10.0.0.1', end: '10.15.255.254', name: 'default' }],
    },
  ],
}

/**
 * A group with named pools and reservations: `db` splits the primary subnet's `default`
 * in two (its first part, 107 free addresses, fills first), reservations at its start, an
 * extra IPv4 and an extra IPv6 subnet with their own `default`, and a SLAAC `network6`.
 */
const pooledGroup: NetworkSpec = {
  subnets: [
    {
      cidr: '10.0.0.0/12',
      gateway: '10.0.0.1',
      dhcp: true,
      pools: [
        { start: '10.0.0.1', end: '10.0.0.127', name: 'default' },
        { start: '10.0.1.0', end: '10.15.255.254', name: 'default' },
        { start: '10.0.0.128', end: '10.0.0.255', name: 'db' },
      ],
      external: [
        { start: '10.0.0.2', end: '10.0.0.20' },
        { start: '10.0.0.130', end: '10.0.0.130' },
      ],
    },
    {
      cidr: '10.32.0.0/16',
      gateway: '10.32.0.1',
      pools: [{ start: '10.32.0.1', end: '10.32.255.254', name: 'default' }],
    },
    {
      cidr: 'fd00:1::/64',
      gateway: 'fd00:1::1',
      pools: [{ start: 'fd00:1::', end: 'fd00:1::ffff', name: 'default' }],
    },
    { cidr: 'fd00:9::/64', pools: [] },
  ],
}

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
  const scale = benchScale()
  const rounds = scaled(ROUNDS, scale)
  const perRound = scaled(PIPELINED_OPS / ROUNDS, scale)
  const pipelinedOps = perRound * rounds
  const sequentialOps = scaled(SEQUENTIAL_OPS, scale)
  const warmUpOps = scaled(WARM_UP_OPS, scale)
  const warmUpAllocs = scaled(WARM_UP_ALLOCS, scale)
  const dataDir = await mkdtemp(join(tmpdir(), 'hz-bench-ipam-'))
  const stack = await startLocalStack({ dataDir, redis: true, ovn: false, frr: false })
  const clients = Array.from({ length: CLIENTS }, () => new Redis(stack.redis?.url ?? ''))
  try {
    const admin = clients[0]
    if (admin === undefined) throw new Error('no client')
    const noop = await admin.script('LOAD', 'return 0')
    const write = await admin.script('LOAD', "redis.call('SET', KEYS[1], ARGV[1]) return 0")
    if (typeof noop !== 'string' || typeof write !== 'string')
      throw new Error('SCRIPT LOAD returned no sha')
    const ipams = clients.map((c) => createIpam(c, { prefix: 'bench:ipam:' }))
    const first = ipams[0]
    if (first === undefined) throw new Error('no client')
    await first.load()
    await first.createNetwork('pipelined', plainGroup)
    await first.createNetwork('pooled', pooledGroup)
    await first.createNetwork('sequential', plainGroup)

    const client = (lane: number) => clients[lane % CLIENTS] as Redis
    const ipamOf = (lane: number) => ipams[lane % CLIENTS] as Ipam
    const kinds = {
      noop: (_: number, lane: number) => client(lane).evalsha(noop, 0),
      write: (i: number, lane: number) =>
        client(lane).evalsha(write, 1, `bench:write:${lane % CLIENTS}`, i),
      alloc: (i: number, lane: number, round: number) =>
        ipamOf(lane).allocate('pipelined', `host-${round}-${i}`, DEFAULT_POOL),
      pools: (i: number, lane: number, round: number) =>
        ipamOf(lane).allocate('pooled', `host-${round}-${i}`, DEFAULT_POOL),
    }
    // Warm up every path (connections, JIT, the definition cache).
    await drive(warmUpOps, CLIENTS * IN_FLIGHT, kinds.noop)
    await drive(warmUpOps, CLIENTS * IN_FLIGHT, kinds.write)
    await drive(warmUpAllocs, CLIENTS, (i, lane) =>
      ipamOf(lane).allocate('sequential', `warm-${i}`, DEFAULT_POOL),
    )
    await drive(warmUpAllocs, CLIENTS, (i, lane) => kinds.pools(i, lane, -1))

    // Rounds alternate the kinds so that all see the same machine load; each figure is
    // the median of its rounds.
    const rates = {
      noop: [] as number[],
      write: [] as number[],
      alloc: [] as number[],
      pools: [] as number[],
    }
    for (let round = 0; round < rounds; round++) {
      for (const [kind, op] of Object.entries(kinds) as [
        keyof typeof kinds,
        (typeof kinds)['alloc'],
      ][]) {
        const r = await drive(perRound, CLIENTS * IN_FLIGHT, (i, lane) => op(i, lane, round))
        rates[kind].push(r.perSecond)
      }
    }
    const median = (kind: keyof typeof rates) => quantile(rates[kind], 0.5)
    const noopOne = await drive(sequentialOps, 1, (i) => kinds.noop(i, 0))
    const writeOne = await drive(sequentialOps, 1, (i) => kinds.write(i, 0))
    const allocOne = await drive(sequentialOps, 1, (i) =>
      first.allocate('sequential', `one-${i}`, DEFAULT_POOL),
    )
    if ((await first.allocatedCount('pipelined')) !== pipelinedOps)
      throw new Error('allocations went missing')
    if ((await first.allocatedCount('pooled')) !== pipelinedOps + warmUpAllocs)
      throw new Error('allocations went missing')

    const load = `median of ${rounds} rounds of ${perRound}, ${CLIENTS} clients x ${IN_FLIGHT} in flight, alternating no-op, one-key write, plain and pooled allocation rounds; baseline = no-op EVALSHA${scaleNote(scale)}`
    const noopRate = median('noop')
    const writeRate = median('write')
    for (const [metric, kind, what] of [
      ['alloc_per_s', 'alloc', 'default pool of a one-subnet group'],
      [
        'alloc_per_s_pools',
        'pools',
        'default pool of a group with named pools, reservations, extra IPv4 and IPv6 subnets',
      ],
    ] as const) {
      const value = median(kind)
      report({
        suite: 'ipam',
        metric,
        value,
        unit: '1/s',
        baseline: noopRate,
        ratio: value / noopRate,
        note: `${what}; ${load}; ${(value / writeRate).toFixed(3)} of the one-key durable write; target >= 20000/s, ratio >= 0.5`,
      })
    }
    report({
      suite: 'ipam',
      metric: 'durable_write_per_s',
      value: writeRate,
      unit: '1/s',
      baseline: noopRate,
      ratio: writeRate / noopRate,
      note: `a script that sets one key (appendfsync always: synced before the answer); ${load}`,
    })
    const noopP99 = quantile(noopOne.latencies, 0.99)
    for (const [metric, run, what] of [
      ['alloc_p99_ms', allocOne, 'allocations from the default pool'],
      ['durable_write_p99_ms', writeOne, 'one-key durable writes'],
    ] as const) {
      const p99 = quantile(run.latencies, 0.99)
      report({
        suite: 'ipam',
        metric,
        value: p99,
        unit: 'ms',
        baseline: noopP99,
        ratio: noopP99 / p99,
        note: `${sequentialOps} ${what} one at a time; baseline no-op EVALSHA one at a time; ratio = baseline / value${scaleNote(scale)}`,
      })
    }
  } finally {
    for (const c of clients) c.disconnect()
    await stack.stop()
    await rm(dataDir, { recursive: true, force: true })
  }
}
