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
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { QueueEvents, Worker } from 'bullmq'
import { Redis } from 'ioredis'
import { startController } from '../../infra/controller.ts'
import { startLocalStack } from '../../infra/local/stack.ts'
import { CONTROLLER_QUEUE } from '../../lib/jobs/index.ts'
import { sharedCentralProvider } from '../../lib/ovn/central.ts'
import { FakeChassis } from '../helpers/fake-chassis.ts'
import { quantile, report } from './report.ts'

const GROUPS = 20
const HOSTS = 50
const DPUS = 20
/** Requests per second offered: the target rate; a pipeline slower than that falls behind and its latency shows it. */
const OFFERED_RATE = 100

export default async function attachBench(): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'hz-bench-attach-'))
  const stack = await startLocalStack({ dataDir, frr: false })
  const cleanups: (() => Promise<unknown>)[] = [
    () => stack.stop(),
    () => rm(dataDir, { recursive: true, force: true }),
  ]
  try {
    if (!stack.redis || !stack.ovn) throw new Error('stack without redis or ovn')
    const redisUrl = stack.redis.url
    const controller = await startController({
      redisUrl,
      ovn: sharedCentralProvider({
        nb: stack.ovn.nb.unix,
        sb: stack.ovn.sb.remote,
        sbController: stack.ovn.sb.unix,
      }),
      fabric: { dummyIp: '172.18.0.254/24', physicalNetwork: 'physnet' },
      reconcileEveryMs: 0,
      concurrency: 64,
    })
    cleanups.unshift(() => controller.close())
    const agentConnection = new Redis(redisUrl, { maxRetriesPerRequest: null })
    // What each DPU's ovn-controller would write to the SB, which the controller checks.
    const chassis = new FakeChassis()
    cleanups.push(() => chassis.close())
    for (let d = 0; d < DPUS; d++) {
      const dpuId = `dpu-${d}`
      const agent = new Worker(
        `agent-${dpuId}`,
        async (job) => {
          const data = job.data as {
            specVersion: number
            protocolVersion: string
            host: { logicalPort: string }
            group: { sbRemote: string }
          }
          await chassis.bind(data.group.sbRemote, dpuId, data.host.logicalPort)
          const observed = {
            chassis: dpuId,
            bridges: ['br-int'],
            ovnRemote: null,
            ovnController: { running: true, connected: true },
            boundPorts: [],
            relays: [],
          }
          return {
            dpuId,
            specVersion: data.specVersion,
            protocolVersion: data.protocolVersion,
            hostPort: `hp${job.id?.length ?? 0}`,
            ovnInstalled: true,
            chassis: dpuId,
            observed,
          }
        },
        { connection: agentConnection, concurrency: 50 },
      )
      cleanups.unshift(() => agent.close())
    }
    cleanups.push(async () => agentConnection.disconnect())

    const { client } = controller
    const events = new QueueEvents(CONTROLLER_QUEUE, { connection: { url: redisUrl } })
    await events.waitUntilReady()
    cleanups.unshift(() => events.close())

    /**
     * Attaches GROUPS × HOSTS hosts to fresh groups `<round>-group-<g>`, offering them at
     * `offered` per second (Infinity: all at once); resolves with the completion rate and
     * each host's request → Ready latency.
     */
    const round = async (tag: string, offered: number) => {
      for (let g = 0; g < GROUPS; g++) {
        await client.applyGroup(`${tag}-group-${g}`, {
          tenantId: 't',
          network: { cidr: '10.10.0.0/16', gateway: '10.10.0.1' },
        })
      }
      await waitFor(async () =>
        (await controller.store.listGroups()).every((g) => g.status.phase === 'Ready'),
      )
      const requested = new Map<string, number>()
      const latencies: number[] = []
      let last = 0
      const done = new Promise<void>((resolve) => {
        const onCompleted = ({ jobId }: { jobId: string }) => {
          const started = requested.get(jobId)
          if (started === undefined) return
          const now = performance.now()
          latencies.push(now - started)
          last = now
          requested.delete(jobId)
          if (latencies.length === GROUPS * HOSTS) {
            events.off('completed', onCompleted)
            resolve()
          }
        }
        events.on('completed', onCompleted)
      })
      const first = performance.now()
      const requests: Promise<unknown>[] = []
      let sent = 0
      for (let h = 0; h < HOSTS; h++) {
        for (let g = 0; g < GROUPS; g++) {
          const due = first + (sent++ * 1000) / offered
          const wait = due - performance.now()
          if (wait > 0) await new Promise((r) => setTimeout(r, wait))
          const name = `${tag}-g${g}-h${h}`
          const n = g * HOSTS + h
          requested.set(`host.attach-${name}-v1`, performance.now())
          requests.push(
            client.applyHost(name, {
              resourceGroup: `${tag}-group-${g}`,
              hostMAC: `52:54:00:${g.toString(16).padStart(2, '0')}:00:${h.toString(16).padStart(2, '0')}`,
              dpu: { id: `dpu-${n % DPUS}`, ips: [`172.18.0.${n % DPUS}`] },
            }),
          )
        }
      }
      await Promise.all(requests)
      await done
      return { rate: (GROUPS * HOSTS) / ((last - first) / 1000), latencies }
    }

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
    for (const cleanup of cleanups) await cleanup().catch(() => {})
  }
}

async function waitFor(check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out')
    await new Promise((r) => setTimeout(r, 50))
  }
}
