/**
 * What the benchmarks share: a controller on a private stack with in-process agents
 * answering the agent queues (`attach`, `scale`), a round of attaches offered through its
 * client at a given rate, and a private NB ovsdb-server (`ovn`, `scale`).
 */

import { execFile } from 'node:child_process'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { QueueEvents, Worker } from 'bullmq'
import { pino } from 'pino'
import { type Histogram, Registry } from 'prom-client'
import { COMMIT_PACE, type CommitPace } from '../../functions/internal/group-apply.ts'
import { type PerGroupCentrals, startPerGroupCentrals } from '../../infra/centrals/local.ts'
import { type Controller, startController } from '../../infra/controller.ts'
import { type LocalStack, startLocalStack } from '../../infra/local/stack.ts'
import { agentQueueName } from '../../lib/agent-protocol/index.ts'
import { CONTROLLER_QUEUE } from '../../lib/jobs/index.ts'
import { type OvnCentralProvider, sharedCentralProvider } from '../../lib/ovn/central.ts'
import { type OvnInstall, ovnInstallAt } from '../../lib/ovn/install.ts'
import { type Daemon, startDaemon } from '../../lib/process/daemon.ts'
import { canConnect } from '../../lib/process/ports.ts'
import { createRedis } from '../../lib/redis/connection.ts'
import { FakeChassis } from '../helpers/fake-chassis.ts'
import { withRedisCluster } from '../helpers/redis-cluster.ts'

const run = promisify(execFile)

/** Where the groups' OVN centrals are: one the stack runs for every group, or one per group. */
export type CentralLayout = 'shared' | 'per-group'

export interface CommitStats {
  readonly count: number
  readonly meanPorts: number
  /** The smallest histogram bound at or above 95 % of commits' port counts. */
  readonly p95PortsAtMost: number
  readonly meanNorthdSeconds: number
  /** Commits whose wait for northd reached the pace's ceiling. */
  readonly notCaughtUp: number
}

/** `12 commits, 8.3 ports each (p95 <= 20), northd 0.21 s each, 0 past the ceiling`. */
export function describeCommits(c: CommitStats): string {
  return `${c.count} NB commits with ports, ${c.meanPorts.toFixed(1)} ports each (p95 <= ${c.p95PortsAtMost}), northd ${c.meanNorthdSeconds.toFixed(3)} s each, ${c.notCaughtUp} past the ceiling`
}

async function commitStats(registry: Registry): Promise<CommitStats> {
  type Values = Awaited<ReturnType<Histogram['get']>>['values']
  const values = async (name: string): Promise<Values> =>
    ((await registry.getSingleMetric(name)?.get()) as { values: Values } | undefined)?.values ?? []
  const ports = await values('hydrazine_nb_commit_ports')
  const northd = await values('hydrazine_nb_commit_northd_seconds')
  const total = (vs: Values, name: string) =>
    vs.filter((v) => v.metricName === name).reduce((sum, v) => sum + v.value, 0)
  const count = total(ports, 'hydrazine_nb_commit_ports_count')
  const buckets = ports
    .filter((v) => v.metricName === 'hydrazine_nb_commit_ports_bucket')
    .map((v) => ({ le: Number(v.labels.le), n: v.value }))
    .sort((a, b) => a.le - b.le)
  const p95 = buckets.find((b) => b.n >= 0.95 * count)?.le ?? Number.POSITIVE_INFINITY
  const northdCount = total(northd, 'hydrazine_nb_commit_northd_seconds_count')
  const notCaughtUp = northd
    .filter(
      (v) =>
        v.metricName === 'hydrazine_nb_commit_northd_seconds_count' &&
        v.labels.caught_up === 'false',
    )
    .reduce((sum, v) => sum + v.value, 0)
  return {
    count,
    meanPorts: count > 0 ? total(ports, 'hydrazine_nb_commit_ports_sum') / count : 0,
    p95PortsAtMost: p95,
    meanNorthdSeconds:
      northdCount > 0 ? total(northd, 'hydrazine_nb_commit_northd_seconds_sum') / northdCount : 0,
    notCaughtUp,
  }
}

/**
 * When an in-process agent worked on a host's `configure` (`performance.now()` ms): took
 * the job, saw its port bound in the SB (FakeChassis), and returned its ack.
 */
export interface AgentMoments {
  readonly took: number
  bound?: number
  acked?: number
}

export interface BenchPipeline {
  readonly controller: Controller
  /** The Redis the controller, its queues and the agents use (single Redis or the cluster). */
  readonly redisUrl: string
  /** With `shared`: the central's NB and SB (unix sockets), for a bench to follow. */
  readonly central?: { readonly nb: string; readonly sb: string }
  /** Per logical port: its latest `configure` as the in-process agents handled it. */
  readonly agentMoments: ReadonlyMap<string, AgentMoments>
  /**
   * Per host: when its host.attach first reached each of its checkpoints
   * (`HandlerDeps.checkpoint`, e.g. `attach:allocated`), `performance.now()` ms.
   */
  readonly checkpoints: ReadonlyMap<string, ReadonlyMap<string, number>>
  /** Events of the controller's queue (`completed` carries the job id). */
  readonly events: QueueEvents
  /** The stack's data directory (per-group centrals live in `<dataDir>/centrals/`). */
  readonly dataDir: string
  /** With `per-group`: the controller's centrals. */
  readonly centrals?: PerGroupCentrals
  /**
   * What went wrong while it ran: the controller's `job failed` warnings and the agents'
   * failed jobs, counted by message (retries included: a NotReady is a failure too).
   */
  failures(): Map<string, number>
  /**
   * The group NB commits that added or removed ports so far (the controller's
   * `hydrazine_nb_commit_ports` and `_northd_seconds`): how many, their mean size, and
   * the histogram buckets their sizes and northd's lag fell in.
   */
  commits(): Promise<CommitStats>
  /** Stops everything it started, in order; never throws. */
  close(): Promise<void>
}

/**
 * Starts Redis (and, for `shared`, one OVN central) in a temp directory, the controller
 * with its real workers (their default concurrency, no periodic reconcile), and one in-process agent
 * per DPU in `dpus`: each binds the host's port to its chassis in the group's SB (through
 * `FakeChassis`, as its ovn-controller would) and acks `configure`. On failure, whatever
 * had started is stopped before it throws.
 *
 * @example
 * const p = await startBenchPipeline({ centrals: 'per-group', dpus: ['dpu-0'], name: 'scale' })
 * try { await attachRound(p, { … }) } finally { await p.close() }
 */
export async function startBenchPipeline(options: {
  readonly centrals: CentralLayout
  readonly dpus: readonly string[]
  /** Names the temp directory (`hz-bench-<name>-…`). */
  readonly name: string
  /** Queues and state on a private 3-master Redis Cluster instead of one Redis. */
  readonly redisCluster?: boolean
  /** The OVN the per-group centrals run (default: the system's). */
  readonly install?: OvnInstall
}): Promise<BenchPipeline> {
  const dataDir = await mkdtemp(join(tmpdir(), `hz-bench-${options.name}-`))
  // Run last to first.
  const cleanups: [string, () => Promise<unknown>][] = [
    ['temp dir', () => rm(dataDir, { recursive: true, force: true })],
  ]
  const close = async () => {
    for (const [what, cleanup] of cleanups.reverse()) {
      const began = performance.now()
      await cleanup().catch(() => {})
      const took = performance.now() - began
      if (took > 5000)
        process.stderr.write(
          `bench ${options.name}: stopping ${what} took ${Math.round(took / 1000)} s\n`,
        )
    }
    cleanups.length = 0
  }
  const failures = new Map<string, number>()
  const failed = (message: string) => {
    const key = message.split('\n')[0]?.slice(0, 160) ?? ''
    failures.set(key, (failures.get(key) ?? 0) + 1)
  }
  try {
    const cluster = options.redisCluster
      ? await withRedisCluster({
          teardown: (fn) => cleanups.push(['the Redis Cluster', async () => fn()]),
        })
      : undefined
    const stack: LocalStack = await startLocalStack({
      dataDir,
      frr: false,
      redis: !cluster,
      ovn: options.centrals === 'shared',
    })
    cleanups.push(['the stack', () => stack.stop()])
    const redisUrl = cluster?.url ?? stack.redis?.url
    if (!redisUrl) throw new Error('stack without redis')
    let ovn: OvnCentralProvider
    let centrals: PerGroupCentrals | undefined
    if (stack.ovn) {
      ovn = sharedCentralProvider({
        nb: stack.ovn.nb.unix,
        sb: stack.ovn.sb.remote,
        sbController: stack.ovn.sb.unix,
      })
    } else {
      const started = await startPerGroupCentrals({
        dataDir,
        pki: stack.pki,
        ...(options.install ? { install: options.install } : {}),
        // `HYDRAZINE_BENCH_NORTHD_CPUS=<n>`: the cores the centrals' ovn-northd share, as
        // `HYDRAZINE_CENTRALS_NORTHD_CPUS` says it for `npm start`.
        ...benchNorthdCpus(),
      })
      cleanups.push(['the centrals', () => started.close()])
      centrals = started
      ovn = started
    }
    // What each DPU's ovn-controller would write to the SB, which the controller checks.
    const chassis = new FakeChassis()
    cleanups.push(['FakeChassis', () => chassis.close()])
    const agentMoments = new Map<string, AgentMoments>()
    const agentConnection = createRedis({ url: redisUrl }, { maxRetriesPerRequest: null })
    cleanups.push(["the agents' connection", async () => agentConnection.disconnect()])
    for (const dpuId of options.dpus) {
      const agent = new Worker(
        agentQueueName(dpuId),
        async (job) => {
          const data = job.data as {
            specVersion: number
            protocolVersion: string
            host: { logicalPort: string }
            group: { sbRemote: string }
          }
          const moments: AgentMoments = { took: performance.now() }
          agentMoments.set(data.host.logicalPort, moments)
          await chassis.bind(data.group.sbRemote, dpuId, data.host.logicalPort)
          moments.bound = performance.now()
          const observed = {
            chassis: dpuId,
            bridges: ['br-int'],
            ovnRemote: null,
            ovnController: { running: true, connected: true },
            boundPorts: [],
            relays: [],
          }
          moments.acked = performance.now()
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
      agent.on('failed', (_job, error) => failed(`agent: ${error.message}`))
      cleanups.push([`agent ${dpuId}`, () => agent.close()])
    }
    const checkpoints = new Map<string, Map<string, number>>()
    const metrics = new Registry()
    const controller = await startController({
      // Attaches park while their commit waits, as by default; `HYDRAZINE_BENCH_PARK_FOR_COMMIT=0`
      // makes them wait in their worker slots.
      ...(process.env.HYDRAZINE_BENCH_PARK_FOR_COMMIT === '0' ? { parkForCommit: false } : {}),
      ...benchCommitPace(),
      checkpoint: (point, object) => {
        if (object === undefined) return
        const seen = checkpoints.get(object) ?? new Map<string, number>()
        checkpoints.set(object, seen)
        if (!seen.has(point)) seen.set(point, performance.now())
      },
      metrics,
      redisUrl,
      ovn,
      fabric: { dummyIp: '172.18.0.254/24', physicalNetwork: 'physnet' },
      reconcileEveryMs: 0,
      logger: pino(
        { level: 'warn' },
        {
          write(line: string) {
            const entry = JSON.parse(line) as { msg?: string; err?: unknown }
            failed(`controller: ${entry.msg}: ${String(entry.err ?? '')}`)
          },
        },
      ),
    })
    cleanups.push(['the controller', () => controller.close()])
    // A round cut at its deadline leaves thousands of jobs that closing would work through.
    cleanups.push([
      'the backlog',
      async () => {
        await controller.queue.pause()
        await controller.queue.drain(true)
      },
    ])
    const eventsConnection = createRedis({ url: redisUrl }, { maxRetriesPerRequest: null })
    const events = new QueueEvents(CONTROLLER_QUEUE, { connection: eventsConnection })
    cleanups.push([
      'queue events',
      async () => {
        await events.close()
        eventsConnection.disconnect()
      },
    ])
    await events.waitUntilReady()
    return {
      controller,
      redisUrl,
      ...(stack.ovn ? { central: { nb: stack.ovn.nb.unix, sb: stack.ovn.sb.unix } } : {}),
      agentMoments,
      checkpoints,
      events,
      dataDir,
      ...(centrals ? { centrals } : {}),
      failures: () => failures,
      commits: () => commitStats(metrics),
      close,
    }
  } catch (error) {
    await close()
    throw error
  }
}

export interface AttachRoundOptions {
  /** Groups are `<tag>-group-<g>`, hosts `<tag>-g<g>-h<h>`. */
  readonly tag: string
  readonly groups: number
  readonly hostsPerGroup: number
  /** Requests per second offered (Infinity: all at once), interleaved across groups. */
  readonly offered: number
  /** Host h of group g: its MAC and DPU (the DPU's agent must be running). */
  readonly host: (
    g: number,
    h: number,
  ) => { readonly hostMAC: string; readonly dpu: { readonly id: string; readonly ips: string[] } }
  /** Stop waiting this long after the first request; what completed by then is returned. */
  readonly deadlineMs?: number
  /** How long the groups may take to become Ready (default 60 s). */
  readonly groupsReadyMs?: number
  /**
   * The groups (`<groupTag>-group-<g>`) exist already, made by an earlier round with that
   * tag: hosts are added to them. Default: the round makes its own, tagged `tag`.
   */
  readonly groupTag?: string
}

/** When one host's attach reached each point the round sees (`performance.now()` ms). */
export interface RoundMoments {
  readonly host: string
  readonly group: string
  /** The bench asked the client to apply it. */
  readonly put: number
  /** The client answered: its spec stored and its host.attach queued. */
  accepted?: number
  /** A worker first took its host.attach job (the converge step). */
  started?: number
  /** Its host.attach job completed: its status is Ready. */
  ready?: number
}

export interface AttachRoundResult {
  readonly requested: number
  /** Request → host.attach completion, ms, of each host whose job completed in time. */
  readonly latencies: number[]
  /** Each requested host's moments, in request order. */
  readonly moments: readonly RoundMoments[]
  /** Completions per second, first request to last completion. */
  readonly rate: number
  /** Hosts whose job had not completed by the deadline. */
  readonly timedOut: number
}

/**
 * Creates `groups` fresh groups (`10.10.0.0/16`), waits until they are Ready, then
 * applies `groups × hostsPerGroup` hosts through the producer client at the offered rate
 * and measures each host's request → host.attach job completion (which is when its status
 * became Ready).
 */
export async function attachRound(
  p: BenchPipeline,
  options: AttachRoundOptions,
): Promise<AttachRoundResult> {
  const { tag, groups, hostsPerGroup, offered } = options
  const { client, store } = p.controller
  const total = groups * hostsPerGroup
  const groupTag = options.groupTag ?? tag
  for (let g = 0; g < groups && options.groupTag === undefined; g++) {
    await client.applyGroup(`${tag}-group-${g}`, {
      tenantId: 't',
      network: { cidr: '10.10.0.0/16', gateway: '10.10.0.1' },
    })
  }
  await waitFor(
    async () => (await store.groups.list()).every((g) => g.status.phase === 'Ready'),
    options.groupsReadyMs,
  )
  const requested = new Map<string, RoundMoments>()
  const moments: RoundMoments[] = []
  const latencies: number[] = []
  let last = 0
  let onCompleted: (event: { jobId: string }) => void = () => {}
  const onActive = ({ jobId }: { jobId: string }) => {
    const host = requested.get(jobId)
    if (host && host.started === undefined) host.started = performance.now()
  }
  p.events.on('active', onActive)
  const done = new Promise<void>((resolve) => {
    onCompleted = ({ jobId }) => {
      const host = requested.get(jobId)
      if (host === undefined) return
      const now = performance.now()
      host.ready = now
      latencies.push(now - host.put)
      last = now
      requested.delete(jobId)
      if (latencies.length === total) resolve()
    }
    p.events.on('completed', onCompleted)
  })
  const first = performance.now()
  let timer: NodeJS.Timeout | undefined
  const deadline =
    options.deadlineMs === undefined
      ? new Promise<never>(() => {})
      : new Promise<void>((resolve) => {
          timer = setTimeout(resolve, options.deadlineMs)
        })
  try {
    const requests: Promise<unknown>[] = []
    let sent = 0
    for (let h = 0; h < hostsPerGroup; h++) {
      for (let g = 0; g < groups; g++) {
        const due = first + (sent++ * 1000) / offered
        const wait = due - performance.now()
        if (wait > 0) await new Promise((r) => setTimeout(r, wait))
        const name = `${tag}-g${g}-h${h}`
        const group = `${groupTag}-group-${g}`
        const host: RoundMoments = { host: name, group, put: performance.now() }
        moments.push(host)
        requested.set(`host.attach-${name}-v1`, host)
        requests.push(
          client.applyHost(name, { resourceGroup: group, ...options.host(g, h) }).then(() => {
            host.accepted = performance.now()
          }),
        )
      }
    }
    await Promise.all(requests)
    await Promise.race([done, deadline])
  } finally {
    clearTimeout(timer)
    p.events.off('completed', onCompleted)
    p.events.off('active', onActive)
  }
  return {
    requested: total,
    latencies,
    moments,
    rate: latencies.length > 0 ? latencies.length / ((last - first) / 1000) : 0,
    timedOut: total - latencies.length,
  }
}

/** Polls `check` every 50 ms until it holds; throws after `timeoutMs`. */
export async function waitFor(check: () => Promise<boolean>, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('timed out')
    await new Promise((r) => setTimeout(r, 50))
  }
}

/** A private, empty NB ovsdb-server `<dir>/<name>.db` on a unix socket. */
export async function startPrivateNb(
  dir: string,
  name: string,
): Promise<{ remote: string; daemon: Daemon }> {
  const file = join(dir, `${name}.db`)
  await run('ovsdb-tool', ['create', file, '/usr/share/ovn/ovn-nb.ovsschema'])
  const socket = join(dir, `${name}.sock`)
  const daemon = await startDaemon({
    name: `ovsdb-server(${name})`,
    command: 'ovsdb-server',
    args: [
      file,
      `--remote=punix:${socket}`,
      `--unixctl=${join(dir, `${name}.ctl`)}`,
      `--pidfile=${join(dir, `${name}.pid`)}`,
      `--log-file=${join(dir, `${name}.log`)}`,
    ],
    env: { OVS_RUNDIR: dir, OVS_DBDIR: dir, OVS_LOGDIR: dir },
    logFile: join(dir, `${name}.out`),
    ready: () => canConnect({ path: socket }),
  })
  return { remote: `unix:${socket}`, daemon }
}

/** The centrals' northd cores a bench run was given (`HYDRAZINE_BENCH_NORTHD_CPUS`), if any. */
function benchNorthdCpus(): { northdCpus?: number } {
  const asked = process.env.HYDRAZINE_BENCH_NORTHD_CPUS
  if (asked === undefined) return {}
  const cpus = Number(asked)
  if (!Number.isInteger(cpus) || cpus < 1) {
    throw new Error(
      `HYDRAZINE_BENCH_NORTHD_CPUS must be a whole number of cores >= 1, not ${asked}`,
    )
  }
  return { northdCpus: cpus }
}

/**
 * The commit pace a bench run was given: `HYDRAZINE_BENCH_COMMIT_FLOOR_MS=<ms>` (the least
 * time between two commits to one central), else the controller's `COMMIT_PACE`.
 */
function benchCommitPace(): { commitPace?: CommitPace } {
  const asked = process.env.HYDRAZINE_BENCH_COMMIT_FLOOR_MS
  if (asked === undefined) return {}
  const floorMs = Number(asked)
  if (!Number.isInteger(floorMs) || floorMs < 0 || floorMs > COMMIT_PACE.ceilingMs) {
    throw new Error(
      `HYDRAZINE_BENCH_COMMIT_FLOOR_MS must be whole ms from 0 to ${COMMIT_PACE.ceilingMs}, not ${asked}`,
    )
  }
  return { commitPace: { ...COMMIT_PACE, floorMs } }
}

/**
 * The newer OVN the benches run beside the system's (`scale`, and `attach` when asked): `HYDRAZINE_BENCH_NEWER_OVN` (an
 * install root; `none` for none), else Debian 13's root when the tests made it already
 * (`test/infra/ovn-install.test.ts`). The bench never builds one.
 */
export function newerOvn(env: NodeJS.ProcessEnv = process.env): OvnInstall | undefined {
  const asked = env.HYDRAZINE_BENCH_NEWER_OVN?.trim()
  if (asked === 'none') return undefined
  if (asked) return ovnInstallAt(asked)
  const cached = join(
    env.HYDRAZINE_TEST_CACHE ?? '/var/cache/hydrazine-test',
    'ovn-installs',
    'debian-13',
  )
  try {
    return ovnInstallAt(cached)
  } catch {
    return undefined
  }
}
