/**
 * The controller's metrics on the composition root's registry: what its handlers and NB
 * connections report as they work (job runs, hosts turning Ready, repairs, NB
 * transactions), and what is read from Redis when Prometheus scrapes (queue depths, IPAM
 * pools, DPU heartbeat ages). Names and meanings are listed in docs/metrics.md.
 */
import type { Queue } from 'bullmq'
import { Counter, Gauge, Histogram, type Registry } from 'prom-client'
import type { Heartbeat } from '../../lib/agent-protocol/index.ts'
import type { NetworkMap, PublicIpStatus } from '../../lib/ipam/index.ts'
import type { TransactionTiming } from '../../lib/ovn/index.ts'
import { displayQueueName } from '../../lib/redis/slots.ts'
import type { WorkerObservers } from '../../queues/worker.ts'
import { sharedRead } from './shared-read.ts'

/** Where the scrape-time gauges read from (the controller's store, IPAM and queues). */
export interface ControllerMetricSources {
  /** Names of the resource groups (each group's IPAM network has its name). */
  groupNames(): Promise<string[]>
  /** A network's pools drawn as `X` (taken) / `.` (free); throws when it has none yet. */
  networkMap(network: string): Promise<NetworkMap>
  /** How many addresses the network's owners (hosts, relays) hold. */
  heldAddresses(network: string): Promise<number>
  publicIps(): Promise<PublicIpStatus[]>
  heartbeats(): Promise<Heartbeat[]>
  /**
   * Every queue the controller feeds or takes requests from: its own, FRR's, each known
   * DPU's agent queue and each queue producer's.
   */
  queues(): Promise<Queue[]>
  /** Sees a failed read; the gauge it fed is left empty for that scrape. */
  onError?(what: string, error: unknown): void
}

/** What the controller hands its parts so they report as they work. */
export interface ControllerInstruments {
  readonly observers: WorkerObservers
  readonly onTransaction: (transaction: TransactionTiming) => void
}

const JOB_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]
const READY_BUCKETS = [0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600]
const NB_BUCKETS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5]

/** The queue states `hydrazine_queue_jobs` reports. */
export const QUEUE_STATES = ['waiting', 'active', 'delayed', 'failed'] as const

/**
 * Registers the instruments the controller's parts report to, and returns their hooks.
 *
 * @example
 * const { observers, onTransaction } = controllerInstruments(registry)
 * startWorkers({ …, observers }); new NbPool({ onTransaction })
 */
export function controllerInstruments(registry: Registry): ControllerInstruments {
  const registers = [registry]
  const jobSeconds = new Histogram({
    name: 'hydrazine_job_duration_seconds',
    help: 'One run of a controller job handler, by job name and how it ended',
    labelNames: ['job', 'outcome'] as const,
    buckets: JOB_BUCKETS,
    registers,
  })
  const jobs = new Counter({
    name: 'hydrazine_jobs_total',
    help: 'Controller job handler runs, by job name and outcome (completed, waiting, retried, failed)',
    labelNames: ['job', 'outcome'] as const,
    registers,
  })
  const ready = new Histogram({
    name: 'hydrazine_host_ready_seconds',
    help: "From a host spec's acceptance to the status write that turned the host Ready",
    buckets: READY_BUCKETS,
    registers,
  })
  const repairs = new Counter({
    name: 'hydrazine_reconcile_repairs_total',
    help: 'What reconcile repaired, by kind (nb_drift, orphan_rows, retrying, stalled, retries_exhausted, deletion_resumed, chassis_ca_rotated)',
    labelNames: ['kind'] as const,
    registers,
  })
  const dpuRepairs = new Counter({
    name: 'hydrazine_dpu_repairs_total',
    help: 'What dpu.health repaired on DPUs, by kind (port_lost, stray_port_isolated, fabric_route_lost, fabric_stray_isolated)',
    labelNames: ['kind'] as const,
    registers,
  })
  const revoked = new Counter({
    name: 'hydrazine_dpu_credentials_revoked_total',
    help: "DPUs whose credentials dpu.health revoked for holding more than their bound in the agents' Redis",
    registers,
  })
  const producersRevoked = new Counter({
    name: 'hydrazine_producer_credentials_revoked_total',
    help: "Queue producers whose Redis user dpu.health revoked for holding more than their bound in the agents' Redis, by producer",
    labelNames: ['producer'] as const,
    registers,
  })
  const nb = new Histogram({
    name: 'hydrazine_nb_transaction_duration_seconds',
    help: 'OVSDB transactions with an OVN Northbound, by central (its NB remote) and outcome',
    labelNames: ['central', 'outcome'] as const,
    buckets: NB_BUCKETS,
    registers,
  })
  const commitPorts = new Histogram({
    name: 'hydrazine_nb_commit_ports',
    help: 'Logical switch ports one group NB commit added or removed (commits are paced by ovn-northd: the busier it is, the larger they get)',
    buckets: [1, 2, 5, 10, 20, 50, 100, 200, 500],
    registers,
  })
  const northd = new Histogram({
    name: 'hydrazine_nb_commit_northd_seconds',
    help: "From a group's NB commit until ovn-northd had processed it (its ports' SB Port_Bindings), or gave up waiting (caught_up=false)",
    labelNames: ['caught_up'] as const,
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5],
    registers,
  })
  return {
    observers: {
      groupCommitted({ ports, northdSeconds, caughtUp }) {
        commitPorts.observe(ports)
        northd.observe({ caught_up: String(caughtUp) }, northdSeconds)
      },
      jobRun(job, outcome, seconds) {
        jobSeconds.observe({ job, outcome }, seconds)
        jobs.inc({ job, outcome })
      },
      hostReady: (seconds) => ready.observe(seconds),
      reconcileRepaired: (kind, count) => repairs.inc({ kind }, count),
      dpuRepaired: (kind) => dpuRepairs.inc({ kind }),
      dpuRevoked: () => revoked.inc(),
      producerRevoked: (producer) => producersRevoked.inc({ producer }),
    },
    onTransaction({ remote, seconds, ok }) {
      nb.observe({ central: remote, outcome: ok ? 'ok' : 'error' }, seconds)
    },
  }
}

/**
 * Registers the gauges read on each scrape: queue depths, IPAM pools and public IPs, and
 * the age of each DPU's newest heartbeat.
 */
export function controllerCollectors(registry: Registry, sources: ControllerMetricSources): void {
  const registers = [registry]
  const failed = (what: string) => (error: unknown) => {
    sources.onError?.(what, error)
    return undefined
  }

  const queueJobs: Gauge<'queue' | 'state'> = new Gauge({
    name: 'hydrazine_queue_jobs',
    help: 'Jobs in each queue (the controller, FRR, each DPU agent, each queue producer), by state',
    labelNames: ['queue', 'state'] as const,
    registers,
    async collect() {
      queueJobs.reset()
      const queues = (await sources.queues().catch(failed('queues'))) ?? []
      // One round trip per queue, all at once on the connection.
      const counted = await Promise.all(
        queues.map(async (queue) => ({
          queue: displayQueueName(queue.name),
          counts: await queue.getJobCounts(...QUEUE_STATES).catch(failed(queue.name)),
        })),
      )
      for (const { queue, counts } of counted) {
        if (!counts) continue
        for (const state of QUEUE_STATES) queueJobs.set({ queue, state }, counts[state] ?? 0)
      }
    },
  })

  const pools = sharedRead(async () => {
    const networks = await Promise.all(
      (await sources.groupNames()).map(async (network) => {
        // A group whose first job has not defined its network yet has no pool.
        const map = await sources.networkMap(network).catch(() => undefined)
        if (!map) return undefined
        const drawn = map.subnets.flatMap((s) => s.pools.map((p) => p.map)).join('')
        const free = drawn.split('').filter((c) => c === '.').length
        const used = await sources.heldAddresses(network)
        return { network, size: drawn.length, used, free }
      }),
    )
    return networks.filter((n) => n !== undefined)
  })
  const poolGauge = (field: 'size' | 'used' | 'free', help: string) => {
    const gauge: Gauge<'network'> = new Gauge({
      name: `hydrazine_ipam_pool_${field}_addresses`,
      help,
      labelNames: ['network'] as const,
      registers,
      async collect() {
        gauge.reset()
        for (const pool of (await pools().catch(failed('ipam pools'))) ?? []) {
          gauge.set({ network: pool.network }, pool[field])
        }
      },
    })
  }
  poolGauge('size', "Addresses in a group network's pools")
  poolGauge('used', 'Addresses of a group network held by its hosts and DHCP relays')
  poolGauge('free', "Addresses of a group network's pools free to hand out")

  const publicIps = sharedRead(() => sources.publicIps())
  const publicGauge = (field: 'size' | 'used' | 'free', help: string) => {
    const gauge: Gauge = new Gauge({
      name: `hydrazine_public_ip_pool_${field}_addresses`,
      help,
      registers,
      async collect() {
        gauge.reset()
        const pool = await publicIps().catch(failed('public IPs'))
        if (!pool) return
        const used = pool.filter((p) => p.allocated).length
        gauge.set({ size: pool.length, used, free: pool.length - used }[field])
      },
    })
  }
  publicGauge('size', "Public IPs in the operator's pool")
  publicGauge('used', 'Public IPs allocated to hosts')
  publicGauge('free', 'Public IPs free to allocate')

  const heartbeatAge: Gauge<'dpu'> = new Gauge({
    name: 'hydrazine_dpu_heartbeat_age_seconds',
    help: "Seconds since each DPU's newest heartbeat (every DPU ever seen, silent ones too)",
    labelNames: ['dpu'] as const,
    registers,
    async collect() {
      heartbeatAge.reset()
      const now = Date.now()
      for (const beat of (await sources.heartbeats().catch(failed('heartbeats'))) ?? []) {
        const at = Date.parse(beat.at)
        if (Number.isFinite(at)) heartbeatAge.set({ dpu: beat.dpuId }, Math.max(0, now - at) / 1000)
      }
    },
  })
}
