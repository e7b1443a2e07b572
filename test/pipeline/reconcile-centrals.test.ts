/**
 * Reconcile with one OVN central per group: a central that is down, or hangs, costs only
 * its own group — the other groups' drift is repaired in the same run, the result says
 * which group and which central failed and why, and the job completes.
 */
import { execFile } from 'node:child_process'
import { readFile, writeFile } from 'node:fs/promises'
import { promisify } from 'node:util'
import t from 'tap'
import type { ReconcileReport } from '../../functions/reconcile.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import type { Teardown } from '../helpers/stack.ts'
import { groupSpec, hostSpec, type Pipeline, startPipeline, until } from './fixtures.ts'

const run = promisify(execFile)

async function nbctl(nb: string, ...args: string[]) {
  return (await run('ovn-nbctl', [`--db=${nb}`, '--timeout=5', ...args])).stdout
}

/** Two Ready groups, each with a Ready host and so its own central; their NB remotes. */
async function twoGroups(p: Pipeline): Promise<{ nbA: string; nbB: string }> {
  const nbs: string[] = []
  for (const [n, name, cidr, gateway] of [
    [1, 'group-a', '10.10.10.0/24', '10.10.10.1'],
    [2, 'group-b', '10.20.20.0/24', '10.20.20.1'],
  ] as const) {
    await p.agent(`dpu-${n}`)
    await p.client.applyGroup(name, groupSpec('tenant-a', cidr, gateway))
    await p.client.applyHost(`host-${n}`, hostSpec(name, `dpu-${n}`, n))
    await until(
      () => p.client.getHost(`host-${n}`),
      (h) => h?.status.phase === 'Ready',
    )
    const ready = await p.client.getGroup(name)
    nbs.push(ready?.status.ovnCentral?.nb ?? '')
  }
  const [nbA = '', nbB = ''] = nbs
  return { nbA, nbB }
}

/** Drift: someone deletes the group's switch port to its router by hand. */
async function cutSwitchFromRouter(nb: string, group: string) {
  await nbctl(nb, 'lsp-del', topologyNames.switchRouterPort(group))
}

async function switchPorts(nb: string, group: string) {
  return nbctl(nb, 'lsp-list', topologyNames.switch(group))
}

/** The pid of the NB ovsdb-server serving `nb` (a central's `unix:<dir>/nb.sock`). */
async function nbPid(nb: string): Promise<number> {
  const file = nb.replace(/^unix:/, '').replace(/nb\.sock$/, 'nb.pid')
  return Number.parseInt(await readFile(file, 'utf8'), 10)
}

/** Runs reconcile now: its final state, its result, and how long it took. */
async function reconcile(p: Pipeline, id: string) {
  const began = Date.now()
  const job = await p.controller.queue.add('reconcile', {}, { jobId: id })
  const state = await until(
    () => job.getState(),
    (s) => s === 'completed' || s === 'failed',
    60_000,
  )
  const done = await p.controller.queue.getJob(id)
  return {
    state,
    failedReason: done?.failedReason,
    report: done?.returnvalue as ReconcileReport,
    ms: Date.now() - began,
  }
}

/** Resumes a stopped process at the end of the test, whatever happened. */
function resumeOnTeardown(t: Teardown, pid: number) {
  t.teardown(() => {
    try {
      process.kill(pid, 'SIGCONT')
    } catch {
      // Gone already.
    }
  })
}

t.test(
  "a central that stays down fails its group alone; the other group's drift is repaired",
  async (t) => {
    const p = await startPipeline(t, { perGroup: true })
    const { nbA, nbB } = await twoGroups(p)

    // group-a's NB database is garbage and its server dies: the central served before, so
    // its damaged database is never replaced behind the operator's back and it stays down.
    const nbFile = nbA.replace(/^unix:/, '').replace(/nb\.sock$/, 'nb.db')
    await writeFile(nbFile, 'not an OVSDB database\n')
    process.kill(await nbPid(nbA), 'SIGKILL')
    await until(
      async () => (await p.centrals?.list())?.map((c) => c.group),
      (groups) => groups?.includes('group-a') === false,
    )
    await t.rejects(nbctl(nbA, 'ls-list'), "group-a's NB does not answer")

    await cutSwitchFromRouter(nbB, 'group-b')
    t.notMatch(await switchPorts(nbB, 'group-b'), topologyNames.switchRouterPort('group-b'))

    const { state, failedReason, report } = await reconcile(p, 'reconcile-one-down')
    t.equal(state, 'completed', `the job completed${failedReason ? ` (${failedReason})` : ''}`)
    t.match(report, {
      repaired: ['group-b'],
      failed: [
        {
          group: 'group-a',
          code: 'OVN_CENTRAL_UNAVAILABLE',
          message: /group group-a: .*nb\.db cannot be read .*it served before: it is not replaced/,
          retryable: false,
        },
      ],
      checkedGroups: 2,
    })
    t.match(
      await switchPorts(nbB, 'group-b'),
      topologyNames.switchRouterPort('group-b'),
      "group-b's switch port to its router is back",
    )
  },
)

t.test('a central that hangs holds the run only for its bound, then is reported', async (t) => {
  const p = await startPipeline(t, { perGroup: true })
  const { nbA, nbB } = await twoGroups(p)

  // Drift in both; then group-a's NB server stops answering (stopped, not dead: the
  // supervisor sees nothing, and connecting to its socket still succeeds).
  await cutSwitchFromRouter(nbA, 'group-a')
  await cutSwitchFromRouter(nbB, 'group-b')
  const pid = await nbPid(nbA)
  resumeOnTeardown(t, pid)
  process.kill(pid, 'SIGSTOP')

  const hung = await reconcile(p, 'reconcile-one-hung')
  t.equal(
    hung.state,
    'completed',
    `the job completed${hung.failedReason ? ` (${hung.failedReason})` : ''}`,
  )
  t.ok(hung.ms < 40_000, `the run ended within its bounds (${hung.ms} ms)`)
  // No answer within the bound, or the client's keepalive gave up on the silent server
  // first: either way a retryable reason.
  const noAnswer = /^(RECONCILE_TIMEOUT|OVSDB_CONNECTION)$/
  t.match(hung.report, {
    repaired: ['group-b'],
    failed: [{ group: 'group-a', code: noAnswer, message: String, retryable: true }],
    unreachableCentrals: [{ nb: nbA, group: 'group-a', code: noAnswer, retryable: true }],
  })
  t.match(
    await switchPorts(nbB, 'group-b'),
    topologyNames.switchRouterPort('group-b'),
    "group-b's drift is repaired",
  )

  // group-a's NB answers again: a later run repairs it too.
  process.kill(pid, 'SIGCONT')
  let last: Awaited<ReturnType<typeof reconcile>> | undefined
  const ports = await until(
    async () => {
      last = await reconcile(p, `reconcile-${Date.now()}`)
      return switchPorts(nbA, 'group-a').catch(() => '')
    },
    (out) => out.includes(topologyNames.switchRouterPort('group-a')),
    60_000,
  )
  t.match(ports, topologyNames.switchRouterPort('group-a'), "group-a's drift is repaired")
  const recovered = await reconcile(p, 'reconcile-recovered')
  t.match(
    recovered.report,
    { failed: [], unreachableCentrals: [], inSync: ['group-a', 'group-b'] },
    `nothing failed once it answers (the run before: ${JSON.stringify(last?.report.failed)})`,
  )
})
