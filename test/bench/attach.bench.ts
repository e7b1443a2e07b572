/**
 * `npm run bench -- attach`: 20 groups × 50 hosts (1,000 attaches; each group on a DPU of
 * its own, with a NAT IP, as a DPU serves one group at a time) through the producer
 * client, with real Redis, a real OVN central, the real workers and in-process agents
 * answering their queues, in two rounds: `rate_per_s` from 1,000 attaches requested at once
 * (the capacity), and request → `Ready` latency per host (from `applyHost` to the
 * host.attach job's completion, which is when its status became Ready) from 1,000 attaches
 * arriving steadily at OFFERED_RATE, as Carbide's would — latency of the pipeline, not of
 * a backlog.
 *
 * rate_per_s (target ≥ 100), ready_p50_ms / ready_p95_ms (target < 1,000) / ready_p99_ms.
 *
 * Then the same on a private 3-master Redis Cluster (`redis+cluster://`), each figure as
 * `cluster_<metric>` with the single-Redis figure of this run as its baseline: ratio =
 * cluster rate / single rate, and single latency / cluster latency (target ≥ 0.8).
 *
 * `HYDRAZINE_BENCH_SCALE` scales the groups (and with them the DPUs) and the hosts per
 * group (0.01: one group of 2 hosts per round); the offered rate stays.
 */
import { attachRound, startBenchPipeline } from './fixtures.ts'
import { benchScale, quantile, report, scaled, scaleNote } from './report.ts'

const GROUPS = 20
const HOSTS = 50
/** Requests per second offered: the target rate; a pipeline slower than that falls behind and its latency shows it. */
const OFFERED_RATE = 100

interface AttachFigures {
  readonly rate: number
  readonly p50: number
  readonly p95: number
  readonly p99: number
}

/**
 * Both rounds (burst, then steady) of `groups` × `hosts` on a fresh pipeline, on one Redis
 * or a cluster. DPUs per round: a DPU serves one group at a time, so group g has DPU g of
 * its round.
 */
async function measure(
  redisCluster: boolean,
  groups: number,
  hosts: number,
): Promise<AttachFigures> {
  const p = await startBenchPipeline({
    centrals: 'shared',
    dpus: Array.from({ length: 2 * groups }, (_, d) => `dpu-${d}`),
    name: redisCluster ? 'attach-cluster' : 'attach',
    redisCluster,
  })
  try {
    /**
     * Group g's hosts on DPU `firstDpu + g` (its encap IP and its NAT IP): each round has
     * DPUs of its own, the burst round's groups staying attached.
     */
    const round = (tag: string, offered: number, firstDpu: number) =>
      attachRound(p, {
        tag,
        groups,
        hostsPerGroup: hosts,
        offered,
        host: (g, h) => {
          const d = firstDpu + (g % groups)
          return {
            hostMAC: `52:54:00:${g.toString(16).padStart(2, '0')}:00:${h.toString(16).padStart(2, '0')}`,
            dpu: { id: `dpu-${d}`, ips: [`172.18.0.${d + 1}`, `172.18.1.${d + 1}`] },
          }
        },
      })
    const burst = await round('burst', Number.POSITIVE_INFINITY, 0)
    const { latencies } = await round('steady', OFFERED_RATE, groups)
    return {
      rate: burst.rate,
      p50: quantile(latencies, 0.5),
      p95: quantile(latencies, 0.95),
      p99: quantile(latencies, 0.99),
    }
  } finally {
    await p.close()
  }
}

export default async function attachBench(): Promise<void> {
  const scale = benchScale()
  const groups = scaled(GROUPS, scale)
  const hosts = scaled(HOSTS, scale, 2)
  const single = await measure(false, groups, hosts)
  const burstNote = `${groups * hosts} attaches requested at once${scaleNote(scale)}`
  const steadyNote = `${groups * hosts} attaches offered at ${OFFERED_RATE}/s${scaleNote(scale)}`
  report({
    suite: 'attach',
    metric: 'rate_per_s',
    value: single.rate,
    unit: '1/s',
    note: `${burstNote}; target >= 100`,
  })
  report({
    suite: 'attach',
    metric: 'ready_p50_ms',
    value: single.p50,
    unit: 'ms',
    note: steadyNote,
  })
  report({
    suite: 'attach',
    metric: 'ready_p95_ms',
    value: single.p95,
    unit: 'ms',
    note: `${steadyNote}; target < 1000`,
  })
  report({
    suite: 'attach',
    metric: 'ready_p99_ms',
    value: single.p99,
    unit: 'ms',
    note: steadyNote,
  })

  const cluster = await measure(true, groups, hosts)
  const onCluster = '3-master Redis Cluster; baseline: one Redis, this run; target ratio >= 0.8'
  report({
    suite: 'attach',
    metric: 'cluster_rate_per_s',
    value: cluster.rate,
    unit: '1/s',
    baseline: single.rate,
    ratio: cluster.rate / single.rate,
    note: `${burstNote}; ${onCluster}`,
  })
  for (const [metric, key] of [
    ['cluster_ready_p50_ms', 'p50'],
    ['cluster_ready_p95_ms', 'p95'],
    ['cluster_ready_p99_ms', 'p99'],
  ] as const) {
    report({
      suite: 'attach',
      metric,
      value: cluster[key],
      unit: 'ms',
      baseline: single[key],
      ratio: single[key] / cluster[key],
      note: `${steadyNote}; ${onCluster}`,
    })
  }
}
