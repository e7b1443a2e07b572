/**
 * `npm run bench -- lab`: what a user waits for, on the lab (`infra/lab`): N simulated DPUs,
 * each with userspace OVS, real `ovn-controller` and the real agent, and hosts as network
 * namespaces behind their host ports, attached to one group through the HTTP API at a
 * steady offered rate, then detached the same way.
 *
 * - `lab_ready_p50_ms` / `_p95_ms` / `_p99_ms`: PUT → the host's `Ready` event, which the
 *   controller writes with the status that turns the host Ready (`configsSynced` at its
 *   spec version): the moment of the write, not of a poll that saw it. The host list is
 *   polled (every ~50 ms) only to know when to read the events.
 * - `lab_first_packet_p95_ms`: PUT → the first echo reply from the group's gateway, seen by
 *   `ping -i 0.01` inside the host's namespace, resumed just before the PUT (its ARP
 *   retried every 10 ms, not every second, so a reply follows the data path within ~10 ms).
 *   Each host's ping is started before the rounds and paused between measurements
 *   (`GatewayProbe`): a process started during a round stalled this one.
 * - `lab_ready_before_traffic`: hosts reported Ready more than 50 ms before their first
 *   reply (or Ready and never answered). Target 0: Ready must not lie.
 * - `lab_isolate_p50_ms` / `_p95_ms`: DELETE → the host's last echo reply (pings running
 *   at 10 ms).
 * - `lab_step_<step>_p50_ms` / `_p95_ms`: where an attach's time goes, step by step (API,
 *   NB commit, northd, the agent's port, SB bind, flows installed, ack, Ready), from what
 *   the system records: see `ATTACH_STEPS` in `lab-steps.ts`.
 * - `lab_first_host_ready_p50_ms` / `_p95_ms`: PUT -> Ready of each DPU's first host of a
 *   round (`h<d>-0`), whose configure starts the DPU's ovn-controller; and
 *   `lab_first_host_controller_{wall,run,runqueue}_p50_ms` / `_p95_ms`: from that
 *   ovn-controller's start to the host's `ovn-installed`, how long, how much of it on a CPU,
 *   and how much runnable but waiting for one (`controller-start.ts`: `/proc` schedstat).
 * - `lab_fabric_ready_p50_ms` / `_p95_ms`, `lab_fabric_first_packet_p50_ms` / `_p95_ms`,
 *   `lab_fabric_ready_before_traffic`, `lab_fabric_isolate_p50_ms` / `_p95_ms`: the same, measured the
 *   same way, for a Fabric group (`networkImplementationType: Fabric`, the same network):
 *   once the Overlay rounds are done, the same hosts are attached to it and detached again,
 *   as many rounds at the same rate. Its gateway is the DPU's VRF (the group interface), its
 *   Ready the agent's ack that the host's /32 is in the DPU's FRR as an EVPN type-5 route.
 *   `lab_fabric_step_agent_job_*` (PUT -> the agent takes its `configure`) and
 *   `lab_fabric_step_agent_configure_*` (-> its ack) say where a Fabric attach's time goes.
 *
 * Scale by environment: `HYDRAZINE_BENCH_LAB_DPUS` (default 20, at most 49: the lab's
 * fabric /24 with one relay address per DPU), `_HOSTS_PER_DPU` (default 6, at most 6: the
 * simulated DPU's host ports), `_ROUNDS` (default 2: every host attached and detached that
 * many times, 240 attaches by default), `_RATE` (requests per second, default 4), `_DNS`
 * (`on`, the default, or `off`: the Overlay group's `dns.enabled`). On this
 * 2-core, 24 GiB machine 20 DPUs is what fits with room for the controller: each is an
 * ovsdb-server, a userspace ovs-vswitchd, an ovn-controller and a Node agent.
 * `HYDRAZINE_BENCH_SCALE` scales the defaults of DPUs, hosts per DPU and rounds (0.01: one
 * DPU with one host, attached and detached once); the rate stays, and the variables above,
 * when set, are taken as they are.
 * Needs root and the lab's binaries (skipped without root when it cannot start); the lab
 * is stopped even when a step fails.
 */
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { monitorEventLoopDelay } from 'node:perf_hooks'
import { maxLabDpus } from '../../infra/lab/addresses.ts'
import { labPrefix, SIM_HOST_PORTS } from '../../infra/lab/dpu.ts'
import { agentRunDir } from '../../infra/lab/dpu-agent.ts'
import {
  type Lab,
  type LabHost,
  labUnavailable,
  removeLabLeftovers,
  startLab,
} from '../../infra/lab/lab.ts'
import { netnsExec } from '../../infra/lab/probes.ts'
import { within } from '../../lib/process/within.ts'
import { attachHost, phaseIs } from '../lab/api.ts'
import { type ControllerStart, watchControllerStart } from './controller-start.ts'
import { GatewayProbe, now, offered, pollReady, sleep, until } from './lab-probes.ts'
import {
  type AttachMoments,
  AttachWatch,
  readyEventAt,
  slowestAttaches,
  stepDurations,
} from './lab-steps.ts'
import { LflowRecomputes } from './lflow-recomputes.ts'
import { benchScale, quantile, report, scaled, scaleNote } from './report.ts'

const SUITE = 'lab'
const GROUP = 'bench-lab'
const FABRIC_GROUP = 'bench-fabric'
const NETWORK = { cidr: '10.20.0.0/16', gateway: '10.20.0.1' }
/** How long one host may take to become Ready and answer, or to stop answering. */
const HOST_TIMEOUT_MS = 60_000
/** Ready earlier than the first reply by more than this counts as a lie. */
const READY_SLACK_MS = 50
/** With pings every 10 ms, this long without a reply means the host is cut off. */
const QUIET_MS = 1500

function envInt(name: string, fallback: number, max = Number.POSITIVE_INFINITY): number {
  const raw = process.env[name]
  const n = raw === undefined ? fallback : Number(raw)
  if (!Number.isInteger(n) || n < 1 || n > max)
    throw new Error(`${name} must be an integer from 1 to ${max}, not ${raw}`)
  return n
}

/** An `on` / `off` setting of the environment; anything else is refused, naming it. */
function envSwitch(name: string, fallback: boolean): boolean {
  const raw = process.env[name]
  if (raw === undefined) return fallback
  if (raw === 'on' || raw === 'off') return raw === 'on'
  throw new Error(`${name} must be on or off, not ${raw}`)
}

/** Resolves true once the lab's Hydrazine lists no host (polled every 100 ms, up to 60 s). */
async function waitGone(lab: Lab): Promise<boolean> {
  const deadline = now() + HOST_TIMEOUT_MS
  let items: unknown[] | undefined
  while (now() < deadline) {
    const answer = await lab.api('GET', '/v1/managed-resources?limit=1000').catch(() => undefined)
    items = (answer?.body as { items?: unknown[] } | undefined)?.items
    if (items?.length === 0) return true
    await sleep(100)
  }
  process.stderr.write(`bench lab: hosts left after their DELETE:\n${describeLeft(items ?? [])}`)
  return false
}

/** The hosts a round's DELETEs left, each with its phase and its conditions that are not True. */
function describeLeft(items: readonly unknown[]): string {
  return items
    .slice(0, 20)
    .map((item) => {
      const host = item as {
        name?: string
        status?: {
          phase?: string
          conditions?: { type: string; status: string; reason?: string; message?: string }[]
        }
      }
      const open = (host.status?.conditions ?? [])
        .filter((c) => c.status !== 'True')
        .map((c) => `${c.type}=${c.status} ${c.reason ?? ''}: ${c.message ?? ''}`)
      return `  ${host.name} ${host.status?.phase}; ${open.join('; ')}\n`
    })
    .join('')
}

/**
 * Why a host that answered when attached is silent before its DELETE: a new ping from its
 * namespace (the data path) against the paused-and-resumed probe (the bench), its neighbour
 * table, and what its DPU's OVS says of its port.
 */
async function describeSilent(l: Lab, { host, probe }: Watched, resumed: number): Promise<string> {
  const quietly = (p: Promise<string>) =>
    p.catch((e: unknown) => `(${(e as Error).message.split('\n')[0]})`)
  const fresh = await quietly(
    host.exec('ping', '-n', '-c', '3', '-i', '0.2', '-W', '1', NETWORK.gateway),
  )
  const neigh = await quietly(host.exec('ip', 'neigh', 'show', 'dev', 'eth0'))
  const dpu = l.dpus.find((d) => d.id === host.dpu)
  const port = dpu
    ? await quietly(
        dpu.sim.vsctl('--columns=name,ofport,external_ids', 'list', 'Interface', host.hostPort),
      )
    : '(no such DPU)'
  const lines = [
    `bench lab: ${host.name} silent 10 s after its probe resumed (${probe.describe(resumed)})`,
    `  a new ping: ${fresh
      .split('\n')
      .filter((x) => /transmitted|bytes from/.test(x))
      .join(' | ')}`,
    `  neighbours: ${neigh.trim().replaceAll('\n', ' | ')}`,
    `  ${host.dpu} port ${host.hostPort}: ${port.trim().replaceAll('\n', ' | ')}`,
  ]
  return `${lines.join('\n')}\n`
}

/** A host of the bench, its address and the ping that watches it. */
interface Watched {
  readonly host: LabHost
  readonly ip: string
  readonly probe: GatewayProbe
}

interface AttachSample {
  readonly host: string
  readonly round: number
  readonly put: number
  readonly ready?: number
  readonly firstReply?: number
}

/**
 * Attaches every host to `group` at `rate` per second and detaches them again, `rounds`
 * times: per attach when it went Ready (`readyOf`: the controller's write) and answered,
 * per detach how long it kept answering.
 */
async function attachRounds(
  l: Lab,
  hosts: readonly Watched[],
  group: string,
  rounds: number,
  rate: number,
  readyOf: (host: LabHost, put: number, accepted: number) => Promise<number | undefined>,
  /** Called just before each host's PUT. */
  putting?: (host: LabHost) => void,
): Promise<{ samples: AttachSample[]; isolate: (number | undefined)[] }> {
  const samples: AttachSample[] = []
  const isolate: (number | undefined)[] = []
  for (let round = 1; round <= rounds; round++) {
    const readyAt = new Map<string, number>()
    const poller = pollReady(l, readyAt, 50)
    try {
      const attached = await offered(hosts.length, rate, async (i) => {
        const { host, ip, probe } = hosts[i] as Watched
        putting?.(host)
        const t0 = probe.resume()
        try {
          const answer = await attachHost(l, host, group, ip)
          const accepted = now()
          if (answer.status >= 300)
            throw new Error(`PUT ${host.name} → ${answer.status} ${JSON.stringify(answer.body)}`)
          await until(
            () => readyAt.has(host.name) && probe.firstAfter(t0) !== undefined,
            HOST_TIMEOUT_MS,
          )
          // When the controller wrote Ready (its event), not when the poll saw it.
          const ready = await readyOf(host, t0, accepted)
          const firstReply = probe.firstAfter(t0)
          return {
            host: host.name,
            round,
            put: t0,
            ...(ready === undefined ? {} : { ready }),
            ...(firstReply === undefined ? {} : { firstReply }),
          }
        } finally {
          probe.pause()
        }
      })
      samples.push(...attached)
    } finally {
      await poller.stop()
    }

    const isolated = await offered(hosts.length, rate, async (i) => {
      const { host, probe } = hosts[i] as Watched
      const resumed = probe.resume()
      const last = () => probe.lastAfter(resumed)
      try {
        // A host silent before its DELETE has no isolate time, and is deleted all the same.
        const answering = await until(() => last() !== undefined, 10_000)
        if (!answering) process.stderr.write(await describeSilent(l, hosts[i] as Watched, resumed))
        const t0 = now()
        const answer = await l.api('DELETE', `/v1/managed-resources/${host.name}`)
        if (answer.status >= 300) throw new Error(`DELETE ${host.name} → ${answer.status}`)
        if (!answering) return undefined
        const quiet = await until(() => now() - (last() ?? 0) > QUIET_MS, HOST_TIMEOUT_MS)
        if (!quiet) return undefined
        return Math.max(0, (last() ?? t0) - t0)
      } finally {
        probe.pause()
      }
    })
    isolate.push(...isolated)
    // The next round attaches the same hosts again once every one is gone.
    const gone = await waitGone(l)
    if (!gone) throw new Error(`round ${round}: hosts still exist 60 s after their DELETE`)
  }
  return { samples, isolate }
}

/**
 * The attach figures of one group's rounds as `<prefix>_ready_p50_ms` …: Ready and first
 * reply after the PUT, Ready reported before traffic, the last reply after the DELETE.
 */
function reportAttaches(
  prefix: 'lab' | 'lab_fabric',
  samples: readonly AttachSample[],
  isolate: readonly (number | undefined)[],
  sized: string,
  scale: number,
): void {
  const ready = samples.flatMap((s) => (s.ready === undefined ? [] : [s.ready - s.put]))
  const firstPacket = samples.flatMap((s) =>
    s.firstReply === undefined ? [] : [s.firstReply - s.put],
  )
  const lies = samples.filter(
    (s) =>
      s.ready !== undefined &&
      (s.firstReply === undefined || s.ready + READY_SLACK_MS < s.firstReply),
  )
  const isolated = isolate.flatMap((v) => (v === undefined ? [] : [v]))
  const missing = (what: string, n: number) =>
    n < samples.length ? `; ${samples.length - n} attaches never ${what} within 60 s` : ''
  for (const [metric, q] of [
    [`${prefix}_ready_p50_ms`, 0.5],
    [`${prefix}_ready_p95_ms`, 0.95],
    [`${prefix}_ready_p99_ms`, 0.99],
  ] as const)
    report({
      suite: SUITE,
      metric,
      value: quantile(ready, q),
      unit: 'ms',
      note: `PUT -> the host's Ready event (Ready+configsSynced, when the controller wrote it); ${sized}${missing('became Ready', ready.length)}`,
    })
  report({
    suite: SUITE,
    metric: `${prefix}_first_packet_p50_ms`,
    value: quantile(firstPacket, 0.5),
    unit: 'ms',
    note: `PUT -> first echo reply from the gateway (ping every 10 ms); ${sized}`,
  })
  report({
    suite: SUITE,
    metric: `${prefix}_first_packet_p95_ms`,
    value: quantile(firstPacket, 0.95),
    unit: 'ms',
    note: `PUT -> first echo reply from the gateway (ping every 10 ms); ${sized}${missing('answered', firstPacket.length)}`,
  })
  report({
    suite: SUITE,
    metric: `${prefix}_ready_before_traffic`,
    value: lies.length,
    unit: 'hosts',
    note:
      `Ready > ${READY_SLACK_MS} ms before the first reply (or never answered); target 0${scaleNote(scale)}` +
      (lies.length > 0
        ? `; ${lies
            .slice(0, 5)
            .map(
              (s) =>
                `${s.host} (round ${s.round}) by ${s.firstReply === undefined ? 'inf' : Math.round(s.firstReply - (s.ready ?? 0))} ms`,
            )
            .join(', ')}`
        : ''),
  })
  for (const [q, value] of [
    ['p50', 0.5],
    ['p95', 0.95],
  ] as const)
    report({
      suite: SUITE,
      metric: `${prefix}_isolate_${q}_ms`,
      value: quantile(isolated, value),
      unit: 'ms',
      note: `DELETE -> last echo reply (ping every 10 ms); ${sized}${missing('went quiet', isolated.length)}`,
    })
}

export default async function labBench(): Promise<void> {
  // As the lab tests: as root the lab must start; without root it is skipped, saying why.
  const why = await labUnavailable()
  if (why && process.getuid?.() !== 0) {
    process.stderr.write(`bench lab: skipped: not root, and ${why}\n`)
    return
  }
  if (why) throw new Error(`the lab cannot run here as root: ${why}`)
  // One group: one relay address per DPU, so the fabric's /24 holds more DPUs.
  const scale = benchScale()
  const dpuCount = envInt('HYDRAZINE_BENCH_LAB_DPUS', scaled(20, scale), maxLabDpus(1))
  const perDpu = envInt(
    'HYDRAZINE_BENCH_LAB_HOSTS_PER_DPU',
    scaled(6, scale),
    SIM_HOST_PORTS.length,
  )
  const rounds = envInt('HYDRAZINE_BENCH_LAB_ROUNDS', scaled(2, scale))
  const rate = envInt('HYDRAZINE_BENCH_LAB_RATE', 4)
  const dns = envSwitch('HYDRAZINE_BENCH_LAB_DNS', true)
  const dataDir = await mkdtemp(join(tmpdir(), 'hz-bench-lab-'))
  const probes = new Set<GatewayProbe>()
  const prefix = labPrefix()
  let lab: Lab | undefined
  let watch: AttachWatch | undefined
  // Each part bounded and on its own: one that hangs is named, and the lab still goes:
  // what it made carries its prefix (a lab still starting is no `lab` yet, and one whose
  // stop hung may have left some of it).
  const cleanUp = () =>
    stopEach([
      [
        'the gateway probes',
        async () => {
          for (const p of probes) await p.stop()
        },
      ],
      ['the step watch', async () => watch?.stop()],
      ['the lab', async () => lab?.stop()],
      ['what is left of the lab, by its prefix', () => removeLabLeftovers(prefix)],
      ['its data directory', () => rm(dataDir, { recursive: true, force: true })],
    ])
  // Handled every time: a second signal (tsx passes on the one its process group got too)
  // must not cut the stop short.
  let stopping = false
  const stopOnSignal = () => {
    if (stopping) return
    stopping = true
    void (async () => {
      await cleanUp()
      process.exit(130)
    })()
  }
  process.on('SIGINT', stopOnSignal)
  process.on('SIGTERM', stopOnSignal)
  try {
    const labStarted = now()
    lab = await startLab({
      dataDir,
      prefix,
      dpus: dpuCount,
      relaysPerDpu: 1,
      log: (line) => process.stderr.write(`bench lab: ${line}\n`),
    })
    const l = lab
    process.stderr.write(
      `bench lab: ${dpuCount} DPUs up in ${Math.round((now() - labStarted) / 1000)} s\n`,
    )
    const put = await l.api('PUT', `/v1/resource-groups/${GROUP}`, {
      tenantId: 'bench',
      network: NETWORK,
      ...(dns ? {} : { dns: { enabled: false } }),
    })
    if (put.status >= 300) throw new Error(`PUT group → ${put.status} ${JSON.stringify(put.body)}`)
    if (!(await phaseIs(l, `/v1/resource-groups/${GROUP}`, 'Ready')))
      throw new Error(`group ${GROUP} never became Ready`)
    watch = await AttachWatch.start(l, GROUP)
    const w = watch

    // Hosts interleaved across DPUs in request order: h<d>-<k> is host k of DPU d.
    // Each host's ping starts now, paused: no process is started while attaches are timed.
    const hosts: Watched[] = []
    for (let k = 0; k < perDpu; k++) {
      for (let d = 1; d <= dpuCount; d++) {
        const name = `h${d}-${k}`
        const ip = `10.20.${d}.${10 + k}`
        const host = await l.addHost({
          dpu: d,
          name,
          mac: `0a:00:20:00:${d.toString(16).padStart(2, '0')}:${k.toString(16).padStart(2, '0')}`,
          ipCidr: `${ip}/16`,
        })
        // Retry ARP every 10 ms (not 1 s), so the first reply follows the data path closely.
        for (const [key, value] of [
          ['retrans_time_ms', '10'],
          ['mcast_solicit', '100'],
        ])
          await netnsExec(host.netns, 'sysctl', '-qw', `net.ipv4.neigh.eth0.${key}=${value}`)
        const probe = new GatewayProbe(host.netns, NETWORK.gateway)
        probes.add(probe)
        hosts.push({ host, ip, probe })
      }
    }
    process.stderr.write(`bench lab: ${hosts.length} hosts, attaching at ${rate}/s\n`)

    // How late this process may hear of what the monitors report.
    const loopDelay = monitorEventLoopDelay({ resolution: 10 })
    loopDelay.enable()
    const moments: AttachMoments[] = []
    // What the attaches cost the DPUs' ovn-controllers: full recomputes, from each itself.
    const recomputes = new LflowRecomputes(
      l.dpus.map((d) => ({ dpu: d.id, runDir: agentRunDir(d.sim) })),
    )
    await recomputes.start()
    // Each DPU's first host of a round starts its ovn-controller (or restarts it with the
    // group's certificate): what that start did until the host's flows were in.
    const starting = new Map<string, ReturnType<typeof watchControllerStart>>()
    const starts: ControllerStart[] = []
    const firstHostReady: number[] = []
    const overlay = await attachRounds(
      l,
      hosts,
      GROUP,
      rounds,
      rate,
      async (h, t0, accepted) => {
        const moment = await w.moments(h, t0, accepted)
        moments.push(moment)
        const start = await starting.get(h.name)?.stop(moment.installed)
        starting.delete(h.name)
        if (start) starts.push(start)
        if (firstHostOf(h) && moment.ready !== undefined) firstHostReady.push(moment.ready - t0)
        return moment.ready
      },
      (h) => {
        const dpu = l.dpus.find((d) => d.id === h.dpu)
        if (!firstHostOf(h) || !dpu) return
        void starting.get(h.name)?.stop(undefined)
        starting.set(h.name, watchControllerStart(agentRunDir(dpu.sim)))
      },
    ).finally(async () => {
      for (const watching of starting.values()) await watching.stop(undefined)
    })
    const { samples, isolate } = overlay
    const recomputed = await recomputes.stop()
    const fabricPut = await l.api('PUT', `/v1/resource-groups/${FABRIC_GROUP}`, {
      tenantId: 'bench',
      network: NETWORK,
      networkImplementationType: 'Fabric',
    })
    if (fabricPut.status >= 300)
      throw new Error(`PUT Fabric group → ${fabricPut.status} ${JSON.stringify(fabricPut.body)}`)
    if (!(await phaseIs(l, `/v1/resource-groups/${FABRIC_GROUP}`, 'Ready')))
      throw new Error(`group ${FABRIC_GROUP} never became Ready`)
    process.stderr.write(`bench lab: the same hosts in Fabric group ${FABRIC_GROUP}\n`)
    // The gateway's MAC is another one there: each host forgets the Overlay one (untimed).
    for (const { host } of hosts) await netnsExec(host.netns, 'ip', 'neigh', 'flush', 'dev', 'eth0')
    // Where a Fabric attach's time goes: until its agent takes the job, the agent's work.
    const agentWait: number[] = []
    const agentWork: number[] = []
    const fabric = await attachRounds(l, hosts, FABRIC_GROUP, rounds, rate, async (h, t0) => {
      const { took, acked } = await w.agentJob(h)
      if (took !== undefined) agentWait.push(took - t0)
      if (took !== undefined && acked !== undefined) agentWork.push(acked - took)
      return readyEventAt(l, h.name, t0)
    })

    const sized = (what: string, n: number) =>
      `${dpuCount} DPUs x ${perDpu} hosts x ${rounds} rounds = ${n} attaches ` +
      `offered at ${rate}/s, ` +
      `one ${what} group${what === 'Overlay' && !dns ? ' with DNS off (HYDRAZINE_BENCH_LAB_DNS)' : ''}; ` +
      `figures are noisy on a shared 2-core machine${scaleNote(scale)}`
    reportAttaches('lab', samples, isolate, sized('Overlay', samples.length), scale)
    report({
      suite: SUITE,
      metric: 'lab_lflow_recomputes_per_attach',
      value: recomputed.recomputes / Math.max(1, samples.length),
      unit: 'recomputes',
      note:
        "full logical-flow recomputes of all the DPUs' ovn-controllers (inc-engine/show-stats, " +
        'logical_flow_output) over the Overlay rounds, per attach or detach pair; a restart for a ' +
        `new chassis certificate counts one; ${recomputed.recomputes} in all, ${recomputed.restarts} restarts seen; ${sized('Overlay', samples.length)}`,
    })
    reportAttaches(
      'lab_fabric',
      fabric.samples,
      fabric.isolate,
      sized('Fabric', fabric.samples.length),
      scale,
    )
    const missing = (what: string, n: number) =>
      n < samples.length ? `; ${samples.length - n} attaches never ${what} within 60 s` : ''
    for (const [metric, values, what] of [
      ['lab_fabric_step_agent_job', agentWait, 'PUT -> the agent takes its configure job'],
      [
        'lab_fabric_step_agent_configure',
        agentWork,
        'the agent takes the job -> its ack (VRF, port, FRR, /32 originated)',
      ],
    ] as const) {
      reportMedianAndTail(metric, values, `${what}; ${sized('Fabric', fabric.samples.length)}`)
    }
    reportControllerStarts(starts, firstHostReady, sized('Overlay', samples.length))
    process.stderr.write(
      `bench lab: the slowest Overlay attaches, step by step (ms):\n${slowestAttaches(moments, 12)
        .map((line) => `  ${line}\n`)
        .join('')}`,
    )
    loopDelay.disable()
    const heard = `monitored moments heard up to ${Math.round(loopDelay.percentile(99) / 1e6)} ms late (this process's event-loop delay p99)`
    for (const step of stepDurations(moments)) {
      for (const [q, value] of [
        ['p50', step.p50],
        ['p95', step.p95],
      ] as const)
        report({
          suite: SUITE,
          metric: `lab_step_${step.name}_${q}_ms`,
          value,
          unit: 'ms',
          note: `${step.what}; ${step.whose}'s; ${sized('Overlay', samples.length)}; ${heard}${missing('showed this step', step.durations.length)}`,
        })
    }
  } finally {
    process.off('SIGINT', stopOnSignal)
    process.off('SIGTERM', stopOnSignal)
    await cleanUp()
  }
}

/** Host 0 of its DPU: the first the bench attaches there in a round (`h<d>-0`). */
const firstHostOf = (host: LabHost) => host.name.endsWith('-0')

/**
 * The DPUs' first hosts: their Ready, and what their DPU's ovn-controller did from its
 * start to their flows (`controller-start.ts`): on a CPU, waiting for one, neither.
 */
function reportControllerStarts(
  starts: readonly ControllerStart[],
  firstHostReady: readonly number[],
  sized: string,
): void {
  const figures = [
    ['lab_first_host_ready', firstHostReady, "PUT -> Ready of each DPU's first host of a round"],
    [
      'lab_first_host_controller_wall',
      starts.map((s) => s.wallMs),
      "its DPU's ovn-controller started -> the host's ovn-installed",
    ],
    [
      'lab_first_host_controller_run',
      starts.map((s) => s.runMs),
      'of which that ovn-controller ran on a CPU (its threads, /proc schedstat)',
    ],
    [
      'lab_first_host_controller_runqueue',
      starts.map((s) => s.runqueueMs),
      "of which it was runnable but waited for a CPU (the simulated DPUs' daemons share the machine's cores)",
    ],
  ] as const
  for (const [metric, values, what] of figures) {
    reportMedianAndTail(metric, values, `${what}; ${values.length} first hosts; ${sized}`)
  }
}

/** `<metric>_p50_ms` and `<metric>_p95_ms` of `values` (ms). */
function reportMedianAndTail(metric: string, values: readonly number[], note: string): void {
  for (const [q, p] of [
    ['p50', 0.5],
    ['p95', 0.95],
  ] as const)
    report({
      suite: SUITE,
      metric: `${metric}_${q}_ms`,
      value: quantile(values, p),
      unit: 'ms',
      note,
    })
}

/** How long one part of the bench's clean-up may take before it is given up on. */
const STOP_PART_MS = 60_000

/**
 * Runs each part of a clean-up in turn, each bounded by `STOP_PART_MS`: one that fails or
 * hangs is said on stderr, and the parts after it still run. (A part waiting on nothing
 * that could wake it would otherwise end the process with Node's exit code 13, the lab's
 * namespaces and processes left behind.)
 */
async function stopEach(parts: readonly (readonly [string, () => Promise<unknown>])[]) {
  for (const [what, stop] of parts) {
    const outcome = await within(
      stop().then(
        () => 'stopped',
        (error: unknown) => `failed: ${error instanceof Error ? error.message : String(error)}`,
      ),
      STOP_PART_MS,
      `did not stop within ${STOP_PART_MS / 1000} s`,
    )
    if (outcome !== 'stopped') console.error(`lab bench: stopping ${what}: ${outcome}`)
  }
}
