/**
 * `npm run bench -- attach`: 20 groups × 50 hosts (1,000 attaches) through the producer
 * client, with real Redis, a real OVN central, the real workers and in-process agents
 * answering their queues, in two rounds: `rate_per_s` from 1,000 attaches requested at once
 * (the capacity), and request → `Ready` latency per host (from `applyHost` to the
 * host.attach job's completion, which is when its status became Ready) from 1,000 attaches
 * arriving steadily at OFFERED_RATE, as Carbide's would — latency of the pipeline, not of
 * a backlog.
 *
 * rate_per_s (target ≥ 100), ready_p50_ms / ready_p95_ms (target < 1,000) / ready_p99_ms.
 */
import { attachRound, startBenchPipeline } from './fixtures.ts'
import { quantile, report } from './report.ts'

const GROUPS = 20
const HOSTS = 50
const DPUS = 20
/** Requests per second offered: the target rate; a pipeline slower than that falls behind and its latency shows it. */
const OFFERED_RATE = 100

export default async function attachBench(): Promise<void> {
  const p = await startBenchPipeline({
    centrals: 'shared',
    dpus: Array.from({ length: DPUS }, (_, d) => `dpu-${d}`),
    name: 'attach',
  })
  try {
    /** Hosts spread over the DPUs in request order; every DPU serves every group. */
    const round = (tag: string, offered: number) =>
      attachRound(p, {
        tag,
        groups: GROUPS,
        hostsPerGroup: HOSTS,
        offered,
        host: (g, h) => {
          const n = g * HOSTS + h
          return {
            hostMAC: `52:54:00:${g.toString(16).padStart(2, '0')}:00:${h.toString(16).padStart(2, '0')}`,
            dpu: { id: `dpu-${n % DPUS}`, ips: [`172.18.0.${n % DPUS}`] },
          }
        },
      })

    const burst = await round('burst', Number.POSITIVE_INFINITY)
    report({
      suite: 'attach',
      metric: 'rate_per_s',
      value: burst.rate,
      unit: '1/s',
      note: `${GROUPS * HOSTS} attaches requested at once; target >= 100`,
    })
    const { latencies } = await round('steady', OFFERED_RATE)
    const note = `${GROUPS * HOSTS} attaches offered at ${OFFERED_RATE}/s`
    report({
      suite: 'attach',
      metric: 'ready_p50_ms',
      value: quantile(latencies, 0.5),
      unit: 'ms',
      note,
    })
    report({
      suite: 'attach',
      metric: 'ready_p95_ms',
      value: quantile(latencies, 0.95),
      unit: 'ms',
      note: `${note}; target < 1000`,
    })
    report({
      suite: 'attach',
      metric: 'ready_p99_ms',
      value: quantile(latencies, 0.99),
      unit: 'ms',
      note,
    })
  } finally {
    await p.close()
  }
}
