/**
 * Every benchmark suite, run small, so that none breaks unnoticed between `npm run bench`
 * runs. Each suite runs as `npm run bench -- <suite>` runs it, `tsx test/bench/run.ts
 * <suite>` (without `infra/bootstrap.sh`, which `npm test` has run already), with
 * `HYDRAZINE_BENCH_SCALE=0.01`, one suite after another and each bounded in time (killed
 * when over it). It must exit 0 having reported each figure it reports at full scale,
 * every one with a finite value and a note that says the scale. What the figures are is
 * not judged: at this size they mean nothing.
 *
 * The lab suite needs root: without it, and without what the lab needs, its case is
 * skipped, saying why (as `test/lab/lab-test.ts` does).
 */
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import t from 'tap'
import { labUnavailable } from '../../infra/lab/lab.ts'

const SMOKE_SCALE = '0.01'
const repoRoot = fileURLToPath(new URL('../..', import.meta.url))
/** After SIGTERM, how long a suite that is over its time has to stop what it started. */
const STOP_GRACE_MS = 20_000

/** What the attach suite reports, whichever centrals it runs on. */
function attachFigures(): string[] {
  return [
    'rate_per_s',
    'ready_p50_ms',
    'ready_p95_ms',
    'ready_p99_ms',
    'cluster_rate_per_s',
    'cluster_ready_p50_ms',
    'cluster_ready_p95_ms',
    'cluster_ready_p99_ms',
    ...[
      'api',
      'queue',
      'converge',
      'apply',
      'northd',
      'signal',
      'agent_job',
      'sb_bind',
      'wake',
      'ready',
    ].flatMap((step) => [`step_${step}_p50_ms`, `step_${step}_p95_ms`]),
    'attach_redis_commands_per_attach',
    'attach_node_cpu_ms_per_attach',
  ]
}

/**
 * Each suite, the figures it reports at full scale, and how long its smoke run may take
 * (3 to 16 s each on the 2-core machine; all of them over time still fit tap's 600 s).
 */
const suites: readonly {
  suite: string
  /** Set in its environment besides the scale, and named in the case's title. */
  env?: Readonly<Record<string, string>>
  metrics: readonly string[]
  optional?: readonly string[]
  timeoutMs: number
}[] = [
  {
    suite: 'attach',
    metrics: attachFigures(),
    timeoutMs: 60_000,
  },
  {
    // Each group's own central, started by its first attach: its steps are timed too.
    suite: 'attach',
    env: { HYDRAZINE_BENCH_ATTACH_CENTRALS: 'per-group' },
    metrics: attachFigures(),
    timeoutMs: 60_000,
  },
  {
    suite: 'frr',
    metrics: [
      'announce_one_at_10k_ms',
      'announce_1000_ms',
      'withdraw_1000_ms',
      'bullmq_noop_1000_ms',
    ],
    timeoutMs: 60_000,
  },
  {
    suite: 'ipam',
    metrics: [
      'alloc_per_s',
      'alloc_per_s_pools',
      'durable_write_per_s',
      'alloc_p99_ms',
      'durable_write_p99_ms',
    ],
    timeoutMs: 45_000,
  },
  {
    suite: 'lab',
    metrics: [
      'lab_ready_p50_ms',
      'lab_ready_p95_ms',
      'lab_ready_p99_ms',
      'lab_first_packet_p50_ms',
      'lab_first_packet_p95_ms',
      'lab_ready_before_traffic',
      'lab_isolate_p50_ms',
      'lab_isolate_p95_ms',
      'lab_lflow_recomputes_per_attach',
      'lab_step_api_p50_ms',
      'lab_step_api_p95_ms',
      'lab_step_nb_commit_p50_ms',
      'lab_step_nb_commit_p95_ms',
      'lab_step_northd_p50_ms',
      'lab_step_northd_p95_ms',
      'lab_step_agent_job_p50_ms',
      'lab_step_agent_job_p95_ms',
      'lab_step_agent_port_p50_ms',
      'lab_step_agent_port_p95_ms',
      'lab_step_sb_bind_p50_ms',
      'lab_step_sb_bind_p95_ms',
      'lab_step_flows_installed_p50_ms',
      'lab_step_flows_installed_p95_ms',
      'lab_step_ack_p50_ms',
      'lab_step_ack_p95_ms',
      'lab_step_ready_p50_ms',
      'lab_step_ready_p95_ms',
      'lab_fabric_ready_p50_ms',
      'lab_fabric_ready_p95_ms',
      'lab_fabric_ready_p99_ms',
      'lab_fabric_first_packet_p50_ms',
      'lab_fabric_first_packet_p95_ms',
      'lab_fabric_ready_before_traffic',
      'lab_fabric_isolate_p50_ms',
      'lab_fabric_isolate_p95_ms',
      'lab_fabric_step_agent_job_p50_ms',
      'lab_fabric_step_agent_job_p95_ms',
      'lab_fabric_step_agent_configure_p50_ms',
      'lab_fabric_step_agent_configure_p95_ms',
      'lab_first_host_ready_p50_ms',
      'lab_first_host_ready_p95_ms',
      'lab_first_host_controller_wall_p50_ms',
      'lab_first_host_controller_wall_p95_ms',
      'lab_first_host_controller_run_p50_ms',
      'lab_first_host_controller_run_p95_ms',
      'lab_first_host_controller_runqueue_p50_ms',
      'lab_first_host_controller_runqueue_p95_ms',
    ],
    timeoutMs: 120_000,
  },
  {
    suite: 'ovn',
    metrics: ['build_ms', 'attach_txn_p50_ms', 'attach_txn_p99_ms'],
    timeoutMs: 45_000,
  },
  {
    suite: 'scale',
    metrics: [
      'child_watcher_idle_cpu_pct',
      'central_start_ms',
      'central_rss_mb',
      'central_idle_cpu_pct',
      'group_1000_attach_txn_p50_ms',
      'group_1000_attach_txn_p99_ms',
      'group_1000_commit_p50_ms',
      'northd_cpu_ms_per_attach',
      'northd_recomputes_per_attach',
      'scale_10k_rate_per_s',
      'scale_10k_vs_shared_ratio',
      'scale_10k_commit_ports_mean',
      'central_rss_loaded_mb',
      'scale_10k_ready_p50_ms',
      'scale_10k_ready_p95_ms',
      'scale_10k_ready_p99_ms',
    ],
    // When a newer OVN is there (`newerOvn`), its figures beside.
    optional: [
      'northd_cpu_ms_per_attach_newer_ovn',
      'northd_recomputes_per_attach_newer_ovn',
      'scale_10k_ready_p95_ms_newer_ovn',
    ],
    timeoutMs: 120_000,
  },
]

interface SuiteRun {
  readonly code: number | null
  readonly signal: NodeJS.Signals | null
  readonly timedOut: boolean
  readonly ms: number
  readonly stdout: string
  readonly stderr: string
}

/**
 * `test/bench/run.ts <suite>` at the smoke scale, in a process group of its own (one Node
 * process with tsx's loader, as the `tsx` command runs it, without npx's and tsx's own
 * processes in front):
 * past `timeoutMs` the group gets SIGTERM (the lab stops itself on it; daemons stop with
 * the process that started them), then SIGKILL after STOP_GRACE_MS.
 */
function runSuite(
  suite: string,
  timeoutMs: number,
  env: Readonly<Record<string, string>> = {},
): Promise<SuiteRun> {
  const began = performance.now()
  const child = spawn(process.execPath, ['--import', 'tsx', 'test/bench/run.ts', suite], {
    cwd: repoRoot,
    env: { ...process.env, ...env, HYDRAZINE_BENCH_SCALE: SMOKE_SCALE },
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  })
  let stdout = ''
  let stderr = ''
  child.stdout.on('data', (chunk: Buffer) => {
    stdout += chunk.toString()
  })
  child.stderr.on('data', (chunk: Buffer) => {
    stderr += chunk.toString()
  })
  const signalGroup = (signal: NodeJS.Signals) => {
    try {
      if (child.pid !== undefined) process.kill(-child.pid, signal)
    } catch {}
  }
  let timedOut = false
  let killer: NodeJS.Timeout | undefined
  const timer = setTimeout(() => {
    timedOut = true
    signalGroup('SIGTERM')
    killer = setTimeout(() => signalGroup('SIGKILL'), STOP_GRACE_MS)
  }, timeoutMs)
  return new Promise((resolve, reject) => {
    child.once('error', reject)
    child.once('close', (code, signal) => {
      clearTimeout(timer)
      clearTimeout(killer)
      resolve({ code, signal, timedOut, ms: performance.now() - began, stdout, stderr })
    })
  })
}

/** The `BENCH {json}` lines of a suite's output. */
function figuresOf(stdout: string): { metric?: unknown; value?: unknown; note?: unknown }[] {
  return stdout
    .split('\n')
    .filter((line) => line.startsWith('BENCH '))
    .map((line) => JSON.parse(line.slice('BENCH '.length)) as Record<string, unknown>)
}

const labWhy = await labUnavailable()
const labSkip = labWhy && process.getuid?.() !== 0 ? `not root, and ${labWhy}` : false

for (const { suite, env = {}, metrics, optional = [], timeoutMs } of suites) {
  const skip = suite === 'lab' ? labSkip : false
  const settings = Object.entries(env).map(([k, v]) => ` ${k}=${v}`)
  await t.test(
    `${suite} at HYDRAZINE_BENCH_SCALE=${SMOKE_SCALE}${settings.join('')}`,
    { skip, timeout: timeoutMs + STOP_GRACE_MS + 10_000 },
    async (t) => {
      const run = await runSuite(suite, timeoutMs, env)
      t.comment(`${suite}: ${(run.ms / 1000).toFixed(1)} s`)
      const stderrTail = run.stderr.trimEnd().split('\n').slice(-20).join('\n')
      t.notOk(run.timedOut, `finishes within ${timeoutMs / 1000} s`, { stderr: stderrTail })
      t.equal(run.code, 0, 'exits 0', { signal: run.signal, stderr: stderrTail })
      const figures = figuresOf(run.stdout)
      t.same(
        figures
          .map((f) => f.metric)
          .filter((m) => !optional.includes(String(m)))
          .sort(),
        [...metrics].sort(),
        'reports every figure it reports at full scale, once',
      )
      for (const figure of figures) {
        t.ok(
          typeof figure.value === 'number' && Number.isFinite(figure.value),
          `${String(figure.metric)} is a finite number`,
          { value: figure.value },
        )
        t.match(
          figure.note,
          `HYDRAZINE_BENCH_SCALE=${SMOKE_SCALE}`,
          `${String(figure.metric)}'s note says the scale`,
        )
      }
    },
  )
}
