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
 * Of the steady round, also: where the time went, step by step (`step_<name>_p50_ms` /
 * `_p95_ms`, `attach-steps.ts`: API, queue, converge, apply, northd, signal, agent job, SB
 * bind, wake, Ready),
 * and what an attach cost — `attach_redis_commands_per_attach` (every command Redis ran
 * over the round, those of Lua scripts included, per attach; the note names the largest)
 * and `attach_node_cpu_ms_per_attach` (this process's CPU per attach: the controller, the
 * in-process agents, FakeChassis; the note adds Redis', the ovsdb-servers' and northd's).
 * Stderr has the same in one line.
 *
 * Then the same on a private 3-master Redis Cluster (`redis+cluster://`), each figure as
 * `cluster_<metric>` with the single-Redis figure of this run as its baseline: ratio =
 * cluster rate / single rate, and single latency / cluster latency (target ≥ 0.8).
 *
 * `HYDRAZINE_BENCH_SCALE` scales the groups (and with them the DPUs) and the hosts per
 * group (0.01: one group of 2 hosts per round); the offered rate stays.
 */

import type { OvnInstall } from '../../lib/ovn/install.ts'
import { type AttachMoments, CentralWatch, describeSteps, stepDurations } from './attach-steps.ts'
import {
  attachRound,
  type CommitStats,
  describeCommits,
  newerOvn,
  startBenchPipeline,
} from './fixtures.ts'
import { describeCpu, measureProcessCpu } from './process-cpu.ts'
import { countCommands, describeCommands } from './redis-commands.ts'
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
  /** The steady round's moments per host (`attach-steps.ts`). */
  readonly moments: readonly AttachMoments[]
  /** The steady round's Redis commands (every command the server ran, in scripts too). */
  readonly commands: { readonly total: number; readonly byCommand: [string, number][] }
  /** The steady round's CPU seconds by process command name (`node`: this process). */
  readonly cpu: Map<string, number>
  readonly steadySeconds: number
  /** The group NB commits of both rounds (`BenchPipeline.commits`). */
  readonly commits: CommitStats
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
  centrals: AttachCentrals,
): Promise<AttachFigures> {
  const p = await startBenchPipeline({
    centrals: centrals.layout,
    ...(centrals.install ? { install: centrals.install } : {}),
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
    // With a central per group, each of the steady round's starts with its first attach:
    // followed from then on (what it committed before the watch reached it goes unseen).
    const running = async () =>
      ((await p.centrals?.list()) ?? []).map((c) => ({ nb: c.nb, sb: c.sbController }))
    const watch = await CentralWatch.start(p.central ? [p.central] : await running())
    let following = Promise.resolve()
    const newCentrals = setInterval(() => {
      following = following.then(async () => watch.follow(await running())).catch(() => {})
    }, 50)
    try {
      // One Redis only: a cluster's INFO would answer for one of its nodes.
      const commands = redisCluster ? undefined : await countCommands(p.redisUrl)
      const cpu = await measureProcessCpu(process.pid)
      const began = performance.now()
      const steady = await round('steady', OFFERED_RATE, groups)
      clearInterval(newCentrals)
      await following
      const steadySeconds = (performance.now() - began) / 1000
      const used = await cpu.stop()
      const counted = (await commands?.stop()) ?? { total: 0, byCommand: [] }
      const { latencies } = steady
      return {
        rate: burst.rate,
        p50: quantile(latencies, 0.5),
        p95: quantile(latencies, 0.95),
        p99: quantile(latencies, 0.99),
        moments: steady.moments.map((m) => watch.moments(m, p)),
        commands: counted,
        cpu: used,
        steadySeconds,
        commits: await p.commits(),
      }
    } finally {
      clearInterval(newCentrals)
      await following
      await watch.stop()
    }
  } finally {
    await p.close()
  }
}

/**
 * Where the groups' centrals are: one shared by all (the default, whose NB and SB the step
 * watch follows), or `HYDRAZINE_BENCH_ATTACH_CENTRALS=per-group`, a central per group as
 * Hydrazine runs by default (each started by its group's first attach, in the burst round;
 * the watch follows each of them for the steady round's steps), or `per-group-newer`: the
 * same on the newer OVN (`newerOvn`: `HYDRAZINE_BENCH_NEWER_OVN`, else Debian 13's root the
 * tests made), refused when there is none. Read once per run (`attachCentrals`).
 */
interface AttachCentrals {
  readonly layout: 'shared' | 'per-group'
  readonly install?: OvnInstall
  /** What the figures' notes add about it. */
  readonly note: string
}

/** The centrals `HYDRAZINE_BENCH_ATTACH_CENTRALS` asks for (`AttachCentrals`). */
function attachCentrals(): AttachCentrals {
  const asked = process.env.HYDRAZINE_BENCH_ATTACH_CENTRALS
  if (asked === undefined || asked === 'shared') return { layout: 'shared', note: '' }
  const note = '; a central per group (HYDRAZINE_BENCH_ATTACH_CENTRALS)'
  if (asked === 'per-group') return { layout: 'per-group', note }
  if (asked === 'per-group-newer') {
    const install = newerOvn()
    if (!install) {
      throw new Error(
        'HYDRAZINE_BENCH_ATTACH_CENTRALS=per-group-newer: no newer OVN (HYDRAZINE_BENCH_NEWER_OVN, or the Debian 13 root `npm test` makes)',
      )
    }
    return { layout: 'per-group', install, note: `${note} on the newer OVN at ${install.root}` }
  }
  throw new Error(
    `HYDRAZINE_BENCH_ATTACH_CENTRALS must be shared, per-group or per-group-newer, not ${asked}`,
  )
}

export default async function attachBench(): Promise<void> {
  const scale = benchScale()
  const groups = scaled(GROUPS, scale)
  const hosts = scaled(HOSTS, scale, 2)
  const centrals = attachCentrals()
  const single = await measure(false, groups, hosts, centrals)
  const layout = centrals.note
  const burstNote = `${groups * hosts} attaches requested at once${layout}${scaleNote(scale)}`
  const steadyNote = `${groups * hosts} attaches offered at ${OFFERED_RATE}/s${layout}${scaleNote(scale)}`
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
  const attaches = groups * hosts
  const steps = stepDurations(single.moments)
  process.stderr.write(
    `attach: ${describeCommits(single.commits)} (both rounds); steady round: steps ${describeSteps(steps)}; Redis ${(single.commands.total / attaches).toFixed(0)} commands per attach (${describeCommands(single.commands.byCommand, attaches)}); CPU over the round's ${single.steadySeconds.toFixed(0)} s: ${describeCpu(single.cpu, single.steadySeconds)}\n`,
  )
  for (const step of steps) {
    for (const [q, value] of [
      ['p50', step.p50],
      ['p95', step.p95],
    ] as const)
      report({
        suite: 'attach',
        metric: `step_${step.name}_${q}_ms`,
        value,
        unit: 'ms',
        note: `${step.what}; ${steadyNote}${step.durations.length < attaches ? `; ${attaches - step.durations.length} attaches did not show this step` : ''}`,
      })
  }
  report({
    suite: 'attach',
    metric: 'attach_redis_commands_per_attach',
    value: single.commands.total / attaches,
    unit: '1',
    note: `every command Redis ran over the steady round (INFO commandstats; commands run by Lua scripts included; the controller's, its queues' and the ${2 * groups} in-process agents' workers'), per attach: ${describeCommands(single.commands.byCommand, attaches, 12)}; ${steadyNote}`,
  })
  report({
    suite: 'attach',
    metric: 'attach_node_cpu_ms_per_attach',
    value: ((single.cpu.get('node') ?? 0) * 1000) / attaches,
    unit: 'ms',
    note: `user + system CPU (/proc) of this node process over the steady round (controller, in-process agents, FakeChassis, the bench), per attach; redis-server ${(((single.cpu.get('redis-server') ?? 0) * 1000) / attaches).toFixed(2)} ms, ovsdb-server ${(((single.cpu.get('ovsdb-server') ?? 0) * 1000) / attaches).toFixed(2)} ms, ovn-northd ${(((single.cpu.get('ovn-northd') ?? 0) * 1000) / attaches).toFixed(2)} ms; ${steadyNote}`,
  })

  const cluster = await measure(true, groups, hosts, centrals)
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
