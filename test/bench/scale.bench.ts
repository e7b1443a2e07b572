/**
 * `npm run bench -- scale`: Hydrazine at 10,000 hosts, and what one group's
 * OVN central costs.
 *
 * Controller rounds — 10 groups × 1,000 hosts (10.10.0.0/16, access None), 200 DPUs with
 * 50 hosts each, DPU d serving group d % 10 only (a DPU follows one group's central), the
 * real controller on real Redis, in-process agents binding each port in its group's SB
 * through FakeChassis; every round on a fresh stack:
 * - `scale_10k_rate_per_s`: 10,000 attaches requested at once, per-group centrals
 *   (target ≥ 100/s).
 * - `scale_10k_vs_shared_ratio`: that rate over the same burst's with one shared central
 *   for every group (target ≥ 1).
 * - `scale_10k_commit_ports_mean`: ports per group NB commit in the steady per-group round
 *   (commits are paced by each central's ovn-northd; the note has their count, p95 and
 *   northd's lag). Every round also prints its commits and the CPU each of its processes
 *   used (`ovn-northd`, `ovsdb-server`, `redis-server`, `node`) on stderr.
 * - `scale_10k_ready_p50_ms` / `_p95_ms` / `_p99_ms`: request → host.attach completion
 *   of 10,000 attaches offered at 100/s with per-group centrals; baseline = the same with
 *   one shared central for every group (target p95 < 2,000 ms).
 * Every round is bounded: the burst stops waiting once it would be below 30/s, a steady
 * round (either layout) after 2.5 times its offering time. Figures are then over the
 * hosts that completed, the note says how many did not, and the rest of the backlog is
 * dropped, not worked through.
 *
 * One group's NB work — against a private NB ovsdb-server, `applyGroupTopology` with a
 * monitor-fed NbTopologyCache (compile + diff + commit), wall time of one attach:
 * - `group_1000_attach_txn_p50_ms` / `_p99_ms`: 200 attaches growing one group from 1,000
 *   to 1,200 hosts (5 per DPU, access None: with FabricAccess or PublicAccess a DPU's one
 *   NAT IP serves one host); baseline = 200 attaches to groups of 10 hosts (40 groups
 *   growing 10 → 15, so that one attach in five adds a DPU in both) (target p99 < 10 ms).
 * - `group_1000_commit_p50_ms`: the ovsdb-server's share: the `transact` round trips of
 *   those applies alone (which include reading the monitor update the server sends before
 *   its reply); same baseline. The note adds write ops and ovsdb-server CPU per attach.
 *
 * One group's ovn-northd at work — the real controller with a central per group, one group of
 * 1,000 hosts on 20 DPUs (made by a burst), then 200 more attaches offered at 10/s (its
 * share of 100/s over 10 groups), figures of that group's ovn-northd over those 200:
 * - `northd_cpu_ms_per_attach`: its user + system CPU (`/proc`) per attach (target ≤ 10).
 * - `northd_recomputes_per_attach`: full recomputes of its `northd` engine node
 *   (`inc-engine/show-stats`) per attach (target ≤ 0.3).
 *
 * With a newer OVN at hand (`newerOvn`: `HYDRAZINE_BENCH_NEWER_OVN`, else Debian 13's root
 * when the tests made it), the northd round runs again on it
 * (`northd_cpu_ms_per_attach_newer_ovn`, `northd_recomputes_per_attach_newer_ovn`) and so
 * does the steady per-group round (`scale_10k_ready_p95_ms_newer_ovn`, its baseline the
 * system OVN's of this run; target < 2,000).
 *
 * One group's central (NB + SB ovsdb-server + ovn-northd, started by startPerGroupCentrals):
 * - `central_start_ms`: `ensure()` until NB and SB answer and northd has synced (median of 3).
 * - `central_rss_mb`: VmRSS of its three daemons, idle after start (median of 3);
 *   `central_rss_loaded_mb`: the same for one group's central after the steady round.
 * - `central_idle_cpu_pct`: CPU of an idle central's three daemons over 5 s, % of one core.
 *
 * Ratios are baseline / value for every time (above 1: faster than the baseline).
 * `HYDRAZINE_BENCH_SCALE` (a number in (0, 1], default 1) scales the hosts per DPU of the
 * controller rounds (0.1: 5 per DPU, 1,000 attaches) and the hosts and attaches of the
 * northd round. Down to 0.1 that is all: groups, DPUs and the offered rate stay, and the
 * NB and central figures are cheap and run at full size. Below 0.1 (a smoke run) those
 * shrink too, by scale / 0.1: at 0.01 the controller rounds are one group of 2 hosts on
 * 2 DPUs, the northd round 10 hosts on 2 DPUs then 2 attaches, the NB figures 20 attaches
 * into a 100-host group, and one central is sampled, idle for 0.5 s.
 */

import { execFile } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { centralDir, startPerGroupCentrals } from '../../infra/centrals/local.ts'
import { startLocalStack } from '../../infra/local/stack.ts'
import {
  applyGroupTopology,
  type GroupMember,
  type GroupTopologySpec,
  NbTopologyCache,
  OvsdbClient,
} from '../../lib/ovn/index.ts'
import type { OvnInstall } from '../../lib/ovn/install.ts'
import { createRedis } from '../../lib/redis/connection.ts'
import { ChildWatcher, waiterKeys } from '../../queues/children.ts'
import {
  type AttachRoundResult,
  attachRound,
  type BenchPipeline,
  type CentralLayout,
  type CommitStats,
  describeCommits,
  newerOvn,
  startBenchPipeline,
  startPrivateNb,
} from './fixtures.ts'
import { describeCpu, measureProcessCpu, processTicks, ticksPerSecond } from './process-cpu.ts'
import { countCommands, describeCommands } from './redis-commands.ts'
import { benchScale, quantile, report, scaled, scaleNote } from './report.ts'

const run = promisify(execFile)
const SUITE = 'scale'
const GROUPS = 10
const DPUS_PER_GROUP = 20
const HOSTS_PER_DPU = 50
/** Requests per second offered in the steady rounds. */
const OFFERED_RATE = 100
/**
 * The burst round stops waiting once it would be below this rate, a steady round after
 * this many times its offering time (both layouts alike, so their quantiles compare),
 * which keeps the suite near 15 minutes on the 2-core machine.
 */
const BURST_FLOOR_PER_S = 30
const STEADY_PATIENCE = 2.5
const BIG_GROUP = 1000
const SMALL_GROUP = 10
const TXN_ATTACHES = 200
const HOSTS_PER_TXN_DPU = 5
const CENTRAL_SAMPLES = 3
/** Attaches offered to the 1,000-host group in the northd round, and at what rate. */
const NORTHD_ATTACHES = 200
const NORTHD_RATE = 10
/** How long the sampled centrals settle before their RSS is read, and stay idle for their CPU. */
const CENTRAL_SETTLE_MS = 2000
const CENTRAL_IDLE_MS = 5000
/** Agent queues that had jobs (one DPU each at 10,000 hosts), and those still awaited. */
const WATCHER_QUEUES = 10_000
const WATCHER_AWAITED = 10
const WATCHER_IDLE_MS = 10_000

/**
 * The scale down to which groups, DPUs, the NB and the central figures keep their full
 * size (so that runs at 0.1 and 0.2 still set ten centrals against each other).
 */
const FULL_SIZE_DOWN_TO = 0.1

/** `n` down to scale 0.1; below, `n` scaled by scale / 0.1, never below `min`. */
function belowTenth(n: number, scale: number, min = 1): number {
  return Math.min(n, scaled(n, scale / FULL_SIZE_DOWN_TO, min))
}

/** How a note of the NB and central figures says the scale. */
function fullSizeNote(scale: number): string {
  return scale >= FULL_SIZE_DOWN_TO
    ? `HYDRAZINE_BENCH_SCALE=${scale} (not applied here)`
    : `HYDRAZINE_BENCH_SCALE=${scale} (below ${FULL_SIZE_DOWN_TO}: sizes shrunk by scale / ${FULL_SIZE_DOWN_TO})`
}

export default async function scaleBench(): Promise<void> {
  const scale = benchScale()
  await watcherFigures(scale)
  await centralFigures(scale)
  await groupTxnFigures(scale)
  const newer = newerOvn()
  await northdFigures(scale)
  if (newer) await northdFigures(scale, newer)
  await controllerFigures(scale, newer)
}

/** One 1,000-host group's ovn-northd while it takes 10 attaches/s (see the head comment). */
async function northdFigures(scale: number, install?: OvnInstall): Promise<void> {
  const suffix = install ? '_newer_ovn' : ''
  const dpuCount = belowTenth(DPUS_PER_GROUP, scale)
  const hosts = Math.max(dpuCount, Math.round(BIG_GROUP * scale))
  const attaches = scaled(NORTHD_ATTACHES, scale, belowTenth(20, scale))
  const dpus = Array.from({ length: dpuCount }, (_, d) => `dpu-${d}`)
  const host = (_g: number, h: number) => {
    const d = h % dpuCount
    return {
      hostMAC: `52:54:00:00:${hex(h >> 8)}:${hex(h & 255)}`,
      dpu: { id: `dpu-${d}`, ips: [`172.18.0.${d + 1}`, `172.18.1.${d + 1}`] },
    }
  }
  await withPipeline(
    'per-group',
    dpus,
    'northd',
    async (p) => {
      const populated = await attachRound(p, {
        tag: 'northd',
        groups: 1,
        hostsPerGroup: hosts,
        offered: Number.POSITIVE_INFINITY,
        host,
        deadlineMs: 600_000,
        groupsReadyMs: 120_000,
      })
      const dir = centralDir(p.dataDir, 'northd-group-0')
      const northd = northdOf(dir)
      await northd.idle()
      const before = { ticks: await northd.ticks(), recomputes: await northd.recomputes() }
      const offered = NORTHD_RATE
      const result = await attachRound(p, {
        tag: 'northd-more',
        groupTag: 'northd',
        groups: 1,
        hostsPerGroup: attaches,
        offered,
        host: (g, h) => host(g, hosts + h),
        deadlineMs: 300_000,
      })
      await northd.idle()
      const ticks = (await northd.ticks()) - before.ticks
      const recomputes = (await northd.recomputes()) - before.recomputes
      const done = result.latencies.length
      const cpuMs = (ticks * 1000) / (await ticksPerSecond()) / done
      const note = `HYDRAZINE_BENCH_SCALE=${scale}: one group of ${hosts} hosts (${populated.latencies.length} Ready) on ${dpuCount} DPUs, central per group (ovn-northd ${await northd.version()}), then ${attaches} attaches offered at ${offered}/s (${done} done, p50 ${Math.round(quantile(result.latencies, 0.5))} ms, p95 ${Math.round(quantile(result.latencies, 0.95))} ms); over those, from ovn-northd itself`
      report({
        suite: SUITE,
        metric: `northd_cpu_ms_per_attach${suffix}`,
        value: cpuMs,
        unit: 'ms',
        note: `${note}: user + system CPU (/proc) / attaches; target <= 10`,
      })
      report({
        suite: SUITE,
        metric: `northd_recomputes_per_attach${suffix}`,
        value: recomputes / done,
        unit: '1',
        note: `${note}: full recomputes of its northd engine node (inc-engine/show-stats) / attaches; target <= 0.3`,
      })
      return { result }
    },
    install,
  )
}

/** A central's ovn-northd, read from its pid file and control socket under `dir`. */
function northdOf(dir: string) {
  const pidFile = join(dir, 'northd.pid')
  const appctl = async (...args: string[]) =>
    (await run('ovn-appctl', ['-t', join(dir, 'northd.ctl'), ...args])).stdout
  const ticks = () => cpuTicks([pidFile])
  return {
    ticks,
    version: async () => /\d+\.\d+\.\d+/.exec(await appctl('version'))?.[0] ?? '?',
    /** Full recomputes of the `northd` engine node so far. */
    recomputes: async () => {
      const out = await appctl('inc-engine/show-stats')
      const node = out.split(/^Node: /m).find((block) => block.startsWith('northd\n'))
      return Number(/recompute:\s+(\d+)/.exec(node ?? '')?.[1] ?? Number.NaN)
    },
    /** Waits until northd used no CPU over two 250 ms windows in a row. */
    idle: async () => {
      let last = await ticks()
      for (let still = 0; still < 2; ) {
        await sleep(250)
        const now = await ticks()
        still = now === last ? still + 1 : 0
        last = now
      }
    },
  }
}

async function controllerFigures(scale: number, newer?: OvnInstall): Promise<void> {
  const groups = belowTenth(GROUPS, scale)
  const dpusPerGroup = belowTenth(DPUS_PER_GROUP, scale)
  const hostsPerDpu = scaled(HOSTS_PER_DPU, scale)
  const hostsPerGroup = dpusPerGroup * hostsPerDpu
  const total = groups * hostsPerGroup
  const dpus = Array.from({ length: groups * dpusPerGroup }, (_, d) => `dpu-${d}`)
  const sized = `HYDRAZINE_BENCH_SCALE=${scale}: ${total} attaches (${groups} groups x ${hostsPerGroup} hosts, access None, ${dpus.length} DPUs x ${hostsPerDpu} hosts, DPU d serves group d % ${groups})`
  const burstDeadlineMs = Math.max(60_000, (total / BURST_FLOOR_PER_S) * 1000)
  const steadyDeadlineMs = Math.max(60_000, STEADY_PATIENCE * (total / OFFERED_RATE) * 1000)
  /** Host h of group g: the g-th group's DPUs in turn, a MAC unique in its group. */
  const host = (g: number, h: number) => {
    const d = g + groups * (h % dpusPerGroup)
    return {
      hostMAC: `52:54:00:${hex(g)}:${hex(h >> 8)}:${hex(h & 255)}`,
      dpu: { id: `dpu-${d}`, ips: [`172.18.0.${d + 1}`, `172.18.1.${d + 1}`] },
    }
  }
  const round = (
    centrals: CentralLayout,
    tag: string,
    offered: number,
    deadlineMs: number,
    install?: OvnInstall,
  ) =>
    withPipeline(
      centrals,
      dpus,
      tag,
      async (p) => {
        const result = await attachRound(p, {
          tag,
          groups,
          hostsPerGroup,
          offered,
          host,
          deadlineMs,
          groupsReadyMs: 120_000,
        })
        let loadedRss: number | undefined
        if (p.centrals) loadedRss = await centralRssMb(centralDir(p.dataDir, `${tag}-group-0`))
        return { result, loadedRss }
      },
      install,
    )

  const burst = (await round('per-group', 'burst', Number.POSITIVE_INFINITY, burstDeadlineMs))
    .result
  report({
    suite: SUITE,
    metric: 'scale_10k_rate_per_s',
    value: burst.rate,
    unit: '1/s',
    note: `${sized}; requested at once, per-group centrals; completions / (last completion - first request)${incomplete(burst, burstDeadlineMs)}; target >= 100`,
  })

  const sharedBurst = (
    await round('shared', 'shared-burst', Number.POSITIVE_INFINITY, burstDeadlineMs)
  ).result
  report({
    suite: SUITE,
    metric: 'scale_10k_vs_shared_ratio',
    value: burst.rate / sharedBurst.rate,
    unit: '1',
    baseline: sharedBurst.rate,
    note: `${sized}; requested at once: attaches/s with per-group centrals (${burst.rate.toFixed(1)}/s) / with one shared central for every group (baseline, ${sharedBurst.rate.toFixed(1)}/s${incomplete(sharedBurst, burstDeadlineMs)}); target >= 1`,
  })

  const steady = await round('per-group', 'steady', OFFERED_RATE, steadyDeadlineMs)
  report({
    suite: SUITE,
    metric: 'scale_10k_commit_ports_mean',
    value: steady.commits.meanPorts,
    unit: '1',
    note: `${sized}; the steady per-group round's NB commits that added or removed ports (paced by each central's ovn-northd): ${describeCommits(steady.commits)}`,
  })
  if (steady.loadedRss !== undefined) {
    report({
      suite: SUITE,
      metric: 'central_rss_loaded_mb',
      value: steady.loadedRss,
      unit: 'MB',
      note: `${sized}; VmRSS of NB + SB ovsdb-server + ovn-northd of one group's central right after the steady round (its group: ${hostsPerGroup} hosts requested; ${steady.result.latencies.length} of the round's ${total} attaches had completed)`,
    })
  }
  const shared = (await round('shared', 'shared', OFFERED_RATE, steadyDeadlineMs)).result
  const note = `${sized}; offered at ${OFFERED_RATE}/s, request -> host.attach completion; value: per-group centrals${incomplete(steady.result, steadyDeadlineMs)}; baseline: one shared central${incomplete(shared, steadyDeadlineMs)}; ratio = baseline / value`
  for (const [q, target] of [
    [0.5, ''],
    [0.95, '; target < 2000'],
    [0.99, ''],
  ] as const) {
    const value = quantile(steady.result.latencies, q)
    const baseline = quantile(shared.latencies, q)
    report({
      suite: SUITE,
      metric: `scale_10k_ready_p${q * 100}_ms`,
      value,
      unit: 'ms',
      baseline,
      ratio: baseline / value,
      note: `${note}${target}`,
    })
  }
  if (!newer) return
  // The same steady round, the centrals on the newer OVN, beside the system's.
  const onNewer = (await round('per-group', 'newer', OFFERED_RATE, steadyDeadlineMs, newer)).result
  const value = quantile(onNewer.latencies, 0.95)
  const baseline = quantile(steady.result.latencies, 0.95)
  report({
    suite: SUITE,
    metric: 'scale_10k_ready_p95_ms_newer_ovn',
    value,
    unit: 'ms',
    baseline,
    ratio: baseline / value,
    note: `${sized}; offered at ${OFFERED_RATE}/s, request -> host.attach completion; value: per-group centrals on the OVN in ${newer.label}${incomplete(onNewer, steadyDeadlineMs)}; baseline: the same on the system's OVN (this run); ratio = baseline / value; target < 2000`,
  })
}

/** Runs `round` on a fresh pipeline, says on stderr how it went, and always stops it. */
async function withPipeline<T extends { result: AttachRoundResult }>(
  centrals: CentralLayout,
  dpus: readonly string[],
  tag: string,
  round: (p: BenchPipeline) => Promise<T>,
  install?: OvnInstall,
): Promise<T & { commits: CommitStats }> {
  const began = performance.now()
  const p = await startBenchPipeline({
    centrals,
    dpus,
    name: SUITE,
    ...(install ? { install } : {}),
  })
  try {
    const commands = await countCommands(p.redisUrl)
    const cpu = await measureProcessCpu(process.pid)
    const roundBegan = performance.now()
    const out = await round(p)
    const roundSeconds = (performance.now() - roundBegan) / 1000
    const used = await cpu.stop()
    const counted = await commands.stop()
    const commits = await p.commits()
    const phases = new Map<string, number>()
    for (const h of await p.controller.store.hosts.list())
      phases.set(h.status.phase, (phases.get(h.status.phase) ?? 0) + 1)
    const failures = [...p.failures()].sort(([, a], [, b]) => b - a).slice(0, 5)
    const { latencies, requested, rate } = out.result
    if (latencies.length < requested) process.stderr.write(await describeBacklog(p))
    process.stderr.write(
      `scale ${tag} (${centrals}): ${latencies.length}/${requested} completed, ${rate.toFixed(1)}/s, ` +
        `${((performance.now() - began) / 1000).toFixed(0)} s with start; hosts by phase ` +
        `${[...phases].map(([k, v]) => `${k}=${v}`).join(' ')}; failures: ` +
        `${failures.map(([m, n]) => `${n}x ${m}`).join(' | ') || 'none'}\n` +
        `scale ${tag}: ${describeCommits(commits)}; CPU over the round's ${roundSeconds.toFixed(0)} s: ${describeCpu(used, roundSeconds)}; ` +
        `Redis ${(counted.total / Math.max(1, latencies.length)).toFixed(0)} commands per attach done (${describeCommands(counted.byCommand, Math.max(1, latencies.length))})\n`,
    )
    return { ...out, commits }
  } finally {
    await p.close()
  }
}

/**
 * Where a round's unfinished attaches are, when it stopped waiting before all of them
 * completed: the controller queue's jobs by state, and the delayed ones by the step they
 * parked at (`applied`: waiting for their group's commit; `await`: for their DPU's ack).
 */
async function describeBacklog(p: BenchPipeline): Promise<string> {
  const { queue } = p.controller
  const counts = await queue.getJobCounts()
  const steps = new Map<string, number>()
  for (const job of await queue.getDelayed(0, 4999)) {
    const step = String((job.data as { step?: unknown }).step ?? 'none')
    steps.set(`${job.name}:${step}`, (steps.get(`${job.name}:${step}`) ?? 0) + 1)
  }
  const list = (m: Iterable<[string, number]>) =>
    [...m]
      .filter(([, n]) => n > 0)
      .map(([k, n]) => `${k}=${n}`)
      .join(' ')
  return `scale backlog: controller jobs ${list(Object.entries(counts))}; delayed by step ${list(steps) || 'none'}\n`
}

/** What a round's note says when it stopped waiting before every host completed. */
function incomplete(r: AttachRoundResult, deadlineMs: number): string {
  if (r.timedOut === 0) return ''
  return ` (only ${r.latencies.length} of ${r.requested} completed within ${Math.round(deadlineMs / 1000)} s; ${r.timedOut} timed out and are left out)`
}

async function groupTxnFigures(scale: number): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'hz-bench-scale-nb-'))
  const stops: (() => Promise<void>)[] = []
  try {
    const measure = async (name: string, groups: number, base: number, perGroup: number) => {
      const nb = await startPrivateNb(dir, name)
      stops.push(() => nb.daemon.stop())
      const client = await OvsdbClient.connect(nb.remote, { echoIntervalMs: 0 })
      stops.unshift(() => client.close())
      const cache = await NbTopologyCache.start(client)
      stops.unshift(() => cache.close())
      for (let g = 0; g < groups; g++) await applyGroupTopology(client, txnSpec(g, base), { cache })
      const timed = timedTransacts(client)
      const walls: number[] = []
      const commits: number[] = []
      const writes: number[] = []
      const compared: number[] = []
      let retries = 0
      const server = join(dir, `${name}.pid`)
      const cpuBefore = await cpuTicks([server])
      for (let s = 1; s <= perGroup; s++) {
        for (let g = 0; g < groups; g++) {
          const spec = txnSpec(g, base + s)
          timed.take()
          const began = performance.now()
          const result = await applyGroupTopology(timed.client, spec, { cache })
          walls.push(performance.now() - began)
          commits.push(timed.take())
          writes.push(result.ops)
          compared.push(result.compared)
          const { attempts } = result
          retries += attempts - 1
        }
      }
      const serverCpuMs =
        (((await cpuTicks([server])) - cpuBefore) * 1000) / (await ticksPerSecond()) / walls.length
      return {
        walls,
        commits,
        retries,
        ops: quantile(writes, 0.5),
        compared: quantile(compared, 0.5),
        serverCpuMs,
      }
    }
    const bigGroup = belowTenth(BIG_GROUP, scale)
    const attaches = belowTenth(TXN_ATTACHES, scale, 5)
    const smallGroups = Math.max(1, Math.round(attaches / 5))
    const big = await measure('big', 1, bigGroup, attaches)
    const small = await measure('small', smallGroups, SMALL_GROUP, 5)
    const note =
      `${fullSizeNote(scale)}; private NB; ` +
      `applyGroupTopology with a monitor-fed NbTopologyCache; value: ${attaches} attaches ` +
      `growing one group ${bigGroup} -> ${bigGroup + attaches} hosts; baseline: ` +
      `${smallGroups * 5} attaches to ${smallGroups} groups growing ${SMALL_GROUP} -> ` +
      `${SMALL_GROUP + 5}; ${HOSTS_PER_TXN_DPU} hosts per DPU, access None (with FabricAccess ` +
      `or PublicAccess a DPU's NAT IP serves one host); value/baseline: write ops per attach ` +
      `p50 ${big.ops}/${small.ops}, desired rows compared with NB per attach p50 ` +
      `${big.compared}/${small.compared}, ovsdb-server CPU per attach ${big.serverCpuMs.toFixed(1)}/` +
      `${small.serverCpuMs.toFixed(1)} ms, lost races ${big.retries}/${small.retries}; ` +
      'ratio = baseline / value'
    for (const [metric, q, key, what] of [
      ['group_1000_attach_txn_p50_ms', 0.5, 'walls', 'wall time of compile + diff + commit'],
      [
        'group_1000_attach_txn_p99_ms',
        0.99,
        'walls',
        'wall time of compile + diff + commit; target < 10 ms',
      ],
      [
        'group_1000_commit_p50_ms',
        0.5,
        'commits',
        "the apply's transact round trips only (the server's share, plus reading the monitor update sent before the reply)",
      ],
    ] as const) {
      const value = quantile(big[key], q)
      const baseline = quantile(small[key], q)
      report({
        suite: SUITE,
        metric,
        value,
        unit: 'ms',
        baseline,
        ratio: baseline / value,
        note: `${what}; ${note}`,
      })
    }
  } finally {
    for (const stop of stops) await stop().catch(() => {})
    await rm(dir, { recursive: true, force: true })
  }
}

/**
 * Group g with its first n hosts: `HOSTS_PER_TXN_DPU` per DPU, access None. A host's
 * member is the same object from one spec to the next, as the controller's `topologyOf`
 * hands out a member while its host and addresses are unchanged.
 */
function txnSpec(g: number, n: number): GroupTopologySpec {
  const members = Array.from({ length: n }, (_, h) => txnMember(g, h))
  return {
    name: `g${g}`,
    cidr: '10.10.0.0/16',
    gateway: '10.10.0.1',
    dummyFabricIp: '172.18.0.254/16',
    fabricGatewayIp: '172.18.0.1',
    members,
  }
}

/** Host h of group g (see `txnSpec`), made once. */
function txnMember(g: number, h: number): GroupMember {
  const key = `${g}/${h}`
  let member = txnMembers.get(key)
  if (!member) {
    member = newTxnMember(g, h)
    txnMembers.set(key, member)
  }
  return member
}
const txnMembers = new Map<string, GroupMember>()

function newTxnMember(g: number, h: number): GroupMember {
  return {
    hostName: `h${h}`,
    logicalPort: `hz-g${g}-h${h}`,
    mac: `0a:00:00:${hex(g)}:${hex(h >> 8)}:${hex(h & 255)}`,
    ip: `10.10.${Math.floor(h / 200) + 1}.${(h % 200) + 2}`,
    dpu: {
      id: `dpu-${Math.floor(h / HOSTS_PER_TXN_DPU)}`,
      natIp: `172.18.1.${Math.floor(h / HOSTS_PER_TXN_DPU) + 1}`,
    },
    access: 'None',
  }
}

/**
 * The client with its `transact` timed: `take()` returns the ms spent in it since the
 * last `take()`.
 */
function timedTransacts(client: OvsdbClient): { client: OvsdbClient; take(): number } {
  let spent = 0
  const timed = new Proxy(client, {
    get(target, prop) {
      if (prop === 'transact') {
        return async (...args: Parameters<OvsdbClient['transact']>) => {
          const began = performance.now()
          try {
            return await target.transact(...args)
          } finally {
            spent += performance.now() - began
          }
        }
      }
      const value: unknown = Reflect.get(target, prop, target)
      return typeof value === 'function' ? value.bind(target) : value
    },
  })
  return {
    client: timed,
    take() {
      const out = spent
      spent = 0
      return out
    },
  }
}

async function centralFigures(scale: number): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'hz-bench-scale-central-'))
  const stack = await startLocalStack({ dataDir, redis: false, ovn: false, frr: false })
  const centrals = await startPerGroupCentrals({ dataDir, pki: stack.pki }).catch(
    async (error: unknown) => {
      await stack.stop()
      await rm(dataDir, { recursive: true, force: true })
      throw error
    },
  )
  try {
    const starts: number[] = []
    const dirs: string[] = []
    const samples = belowTenth(CENTRAL_SAMPLES, scale)
    const settleMs = belowTenth(CENTRAL_SETTLE_MS, scale)
    const idleMs = belowTenth(CENTRAL_IDLE_MS, scale)
    for (let i = 0; i < samples; i++) {
      const began = performance.now()
      await centrals.ensure(`idle-${i}`)
      starts.push(performance.now() - began)
      dirs.push(centralDir(dataDir, `idle-${i}`))
    }
    await sleep(settleMs)
    const rss = await Promise.all(dirs.map(centralRssMb))
    const pidFiles = dirs.flatMap(centralPidFiles)
    const before = await cpuTicks(pidFiles)
    const began = performance.now()
    await sleep(idleMs)
    const ticks = (await cpuTicks(pidFiles)) - before
    const seconds = (performance.now() - began) / 1000
    const cpuPct = (ticks / (await ticksPerSecond()) / seconds / dirs.length) * 100
    const note = `${fullSizeNote(scale)}; one group's central (NB + SB ovsdb-server + ovn-northd) via startPerGroupCentrals, empty databases`
    report({
      suite: SUITE,
      metric: 'central_start_ms',
      value: quantile(starts, 0.5),
      unit: 'ms',
      note: `${note}; ensure() until NB and SB answer and northd has synced; median of ${samples} started one after another (${starts.map((s) => Math.round(s)).join(', ')} ms)`,
    })
    report({
      suite: SUITE,
      metric: 'central_rss_mb',
      value: quantile(rss, 0.5),
      unit: 'MB',
      note: `${note}; VmRSS of the three daemons summed, idle ${settleMs / 1000} s after start; median of ${samples}`,
    })
    report({
      suite: SUITE,
      metric: 'central_idle_cpu_pct',
      value: cpuPct,
      unit: '%',
      note: `${note}; user + system CPU of the three daemons over ${seconds.toFixed(1)} s idle, % of one core, mean of ${samples} (resolution: one clock tick, ${(100 / ((await ticksPerSecond()) * seconds * dirs.length)).toFixed(2)}%)`,
    })
  } finally {
    await centrals.close().catch(() => {})
    await stack.stop().catch(() => {})
    await rm(dataDir, { recursive: true, force: true })
  }
}

/**
 * What the child watcher costs with every DPU's agent queue having had jobs (10,000 hosts,
 * a DPU each) and only a few still awaited: the controller's and Redis's CPU while it
 * waits, against the same with the awaited queues alone.
 */
async function watcherFigures(scale: number): Promise<void> {
  const dataDir = await mkdtemp(join(tmpdir(), 'hz-bench-scale-watcher-'))
  const stack = await startLocalStack({ dataDir, ovn: false, frr: false })
  const redis = createRedis({ url: stack.redis?.url ?? '' })
  try {
    const redisPid = Number(/process_id:(\d+)/.exec(await redis.info('server'))?.[1])
    const queues = scaled(WATCHER_QUEUES, scale)
    const idleMs = scaled(WATCHER_IDLE_MS, scale, 1000)
    const measure = async (prefix: string, history: number) => {
      const keys = waiterKeys(prefix)
      const now = Date.now()
      const written = redis.pipeline()
      // As parked jobs leave them: each queue's event stream, and its score in the watched
      // set (the moment its last parked parent woke: past for all but the awaited ones).
      for (let i = 0; i < history + WATCHER_AWAITED; i++) {
        const queue = `agent-dpu-${i}`
        written.xadd(keys.events(queue), '*', 'event', 'completed', 'jobId', 'configure-1')
        written.zadd(keys.watched, i < WATCHER_AWAITED ? now + 3600_000 : now - 600_000, queue)
      }
      await written.exec()
      const watcher = new ChildWatcher({
        connection: () =>
          createRedis({ url: stack.redis?.url ?? '' }, { maxRetriesPerRequest: null }),
        keys,
        queueFor: () => {
          throw new Error('no parent is woken here')
        },
      })
      try {
        await sleep(1000)
        const redisBefore = await processTicks(redisPid)
        const nodeBefore = process.cpuUsage()
        const began = performance.now()
        await sleep(idleMs)
        const seconds = (performance.now() - began) / 1000
        const node = process.cpuUsage(nodeBefore)
        const redisSeconds =
          ((await processTicks(redisPid)) - redisBefore) / (await ticksPerSecond())
        return {
          node: ((node.user + node.system) / 1e6 / seconds) * 100,
          redis: (redisSeconds / seconds) * 100,
        }
      } finally {
        await watcher.stop()
      }
    }
    const baseline = await measure('hz-watch-awaited', 0)
    const value = await measure('hz-watch-history', queues)
    const total = (c: { node: number; redis: number }) => c.node + c.redis
    report({
      suite: SUITE,
      metric: 'child_watcher_idle_cpu_pct',
      value: total(value),
      unit: '%',
      baseline: total(baseline),
      ratio: total(value) / Math.max(total(baseline), 0.01),
      note: `the child watcher over ${idleMs / 1000} s with ${queues} agent queues that had jobs, ${WATCHER_AWAITED} of them still awaited: this process ${value.node.toFixed(1)} % + redis-server ${value.redis.toFixed(1)} % of one core; baseline: the ${WATCHER_AWAITED} awaited queues alone (${baseline.node.toFixed(1)} % + ${baseline.redis.toFixed(1)} %); target ratio <= 2${scaleNote(scale)}`,
    })
  } finally {
    redis.disconnect()
    await stack.stop().catch(() => {})
    await rm(dataDir, { recursive: true, force: true })
  }
}

/** The pid files startOvnCentral has a central's three daemons write. */
function centralPidFiles(dir: string): string[] {
  return ['nb.pid', 'sb.pid', 'northd.pid'].map((file) => join(dir, file))
}

async function pidOf(pidFile: string): Promise<number> {
  return Number((await readFile(pidFile, 'utf8')).trim())
}

/** VmRSS of a central's three daemons, summed, in MB. */
async function centralRssMb(dir: string): Promise<number> {
  let kb = 0
  for (const file of centralPidFiles(dir)) {
    const status = await readFile(`/proc/${await pidOf(file)}/status`, 'utf8')
    kb += Number(/^VmRSS:\s+(\d+) kB/m.exec(status)?.[1] ?? Number.NaN)
  }
  return kb / 1024
}

/** User + system CPU ticks the processes named by these pid files have used so far. */
async function cpuTicks(pidFiles: readonly string[]): Promise<number> {
  let ticks = 0
  for (const file of pidFiles) ticks += await processTicks(await pidOf(file))
  return ticks
}

const hex = (n: number) => n.toString(16).padStart(2, '0')
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
