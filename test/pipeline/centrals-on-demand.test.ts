/**
 * Centrals on demand, with real per-group centrals (ovsdb-server ×2 + ovn-northd each): an
 * empty group runs no daemon; its first attach starts them and the host turns Ready; its
 * last detach stops them after the grace period; an attach within the grace keeps the
 * same daemons; concurrent first attaches start one central; deleting an empty group
 * starts none; the cap counts running centrals.
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import t from 'tap'
import { centralDir } from '../../infra/centrals/local.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { groupSpec, hostSpec, type Pipeline, startPipeline, until } from './fixtures.ts'
import { runReconcile } from './scenarios.ts'

const run = promisify(execFile)
const GRACE_MS = 1500

/**
 * The pids of the ovsdb-server and ovn-northd processes (not their supervising shells)
 * running on the group's central directory, by `ps`.
 */
async function daemonsOf(p: Pipeline, group: string): Promise<string[]> {
  const dir = centralDir(p.dataDir, group)
  const { stdout } = await run('ps', ['-eo', 'pid=,comm=,args='])
  return stdout
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter(([, comm], _, __) => comm === 'ovsdb-server' || comm === 'ovn-northd')
    .filter((fields) => fields.some((arg) => arg.includes(`${dir}/`)))
    .map(([pid]) => pid ?? '')
    .sort()
}

const centralRunning = async (p: Pipeline, group: string) =>
  (await p.client.getGroup(group))?.status.conditions.find((c) => c.type === 'CentralRunning')

async function readyHost(p: Pipeline, name: string, group: string, dpu: string, n: number) {
  await p.client.applyHost(name, hostSpec(group, dpu, n))
  return until(
    () => p.client.getHost(name),
    (h) => h?.status.phase === 'Ready',
    30_000,
  )
}

async function gone(p: Pipeline, name: string) {
  await p.client.deleteHost(name)
  await until(
    () => p.client.getHost(name),
    (h) => !h,
    30_000,
  )
}

t.test('a central runs while its group has hosts', async (t) => {
  const p = await startPipeline(t, { perGroup: true, onDemand: { idleMs: GRACE_MS } })
  await p.agent('dpu-1')
  await p.agent('dpu-2')
  await p.client.applyGroup('group-a', groupSpec('tenant-a'))
  const empty = await until(
    () => p.client.getGroup('group-a'),
    (g) => g?.status.phase === 'Ready',
  )
  t.equal(empty?.status.phase, 'Ready', 'an empty group is Ready, not Failed')
  t.match(
    empty?.status.conditions.find((c) => c.type === 'CentralRunning'),
    {
      status: 'False',
      reason: 'NoHosts',
    },
  )
  t.notOk(empty?.status.ovnCentral, 'and says no central')
  t.same(await daemonsOf(p, 'group-a'), [], 'no ovsdb-server or ovn-northd for it')
  t.same(await p.controller.store.centrals.list(), [], 'it holds no central slot')

  const host = await readyHost(p, 'host-1', 'group-a', 'dpu-1', 1)
  t.equal(host?.status.phase, 'Ready', 'the first attach: the host turns Ready')
  const first = await daemonsOf(p, 'group-a')
  t.equal(first.length, 3, 'its central runs: NB, SB and northd')
  const running = await p.client.getGroup('group-a')
  t.match(await centralRunning(p, 'group-a'), { status: 'True', reason: 'HasHosts' })
  const nb = running?.status.ovnCentral?.nb ?? ''
  t.match(nb, /^unix:/, 'the group says where its central is')
  const switches = (await run('ovn-nbctl', [`--db=${nb}`, 'ls-list'])).stdout
  t.match(switches, topologyNames.switch('group-a'), "the group's base topology is in its NB")

  await t.test('churn within the grace keeps the same daemons', async (t) => {
    await gone(p, 'host-1')
    await readyHost(p, 'host-1', 'group-a', 'dpu-1', 1)
    await new Promise((r) => setTimeout(r, GRACE_MS + 1000))
    t.same(await daemonsOf(p, 'group-a'), first, 'never stopped, never restarted')
  })

  await t.test('the last detach stops it after the grace', async (t) => {
    await readyHost(p, 'host-2', 'group-a', 'dpu-2', 2)
    await gone(p, 'host-1')
    t.same(await daemonsOf(p, 'group-a'), first, 'one host left: it runs')
    const left = Date.now()
    await gone(p, 'host-2')
    t.same(await daemonsOf(p, 'group-a'), first, 'right after the last detach: still running')
    const stopped = await until(
      () => daemonsOf(p, 'group-a'),
      (pids) => pids.length === 0,
      20_000,
    )
    t.same(stopped, [], 'stopped')
    t.ok(Date.now() - left >= GRACE_MS, 'not before the grace period')
    const status = await until(
      () => centralRunning(p, 'group-a'),
      (c) => c?.status === 'False',
    )
    t.match(status, { status: 'False', reason: 'NoHosts' }, 'the group says so')
    t.notOk((await p.client.getGroup('group-a'))?.status.ovnCentral)
    t.equal((await p.client.getGroup('group-a'))?.status.phase, 'Ready', 'still usable')
    t.same(await p.controller.store.centrals.list(), [], 'its slot is given back')

    const back = await readyHost(p, 'host-3', 'group-a', 'dpu-1', 3)
    t.equal(back?.status.phase, 'Ready', 'a new first host starts it again, Ready')
    t.equal((await daemonsOf(p, 'group-a')).length, 3)
    const nbAgain = (await p.client.getGroup('group-a'))?.status.ovnCentral?.nb ?? ''
    t.match(
      (await run('ovn-nbctl', [`--db=${nbAgain}`, 'lsp-list', topologyNames.switch('group-a')]))
        .stdout,
      topologyNames.hostPort('group-a', 'host-3'),
    )
    await gone(p, 'host-3')
  })

  await t.test('concurrent first attaches start one central', async (t) => {
    await p.client.applyGroup('group-b', groupSpec('tenant-a', '10.20.0.0/24', '10.20.0.1'))
    await until(
      () => p.client.getGroup('group-b'),
      (g) => g?.status.phase === 'Ready',
    )
    t.same(await daemonsOf(p, 'group-b'), [])
    await p.agent('dpu-3')
    await p.agent('dpu-4')
    const hosts = await Promise.all([
      readyHost(p, 'b-1', 'group-b', 'dpu-3', 11),
      readyHost(p, 'b-2', 'group-b', 'dpu-4', 12),
    ])
    t.same(
      hosts.map((h) => h?.status.phase),
      ['Ready', 'Ready'],
    )
    t.equal((await daemonsOf(p, 'group-b')).length, 3, 'one NB, one SB, one northd')
  })

  await t.test('deleting an empty group starts no central', async (t) => {
    await p.client.applyGroup('group-c', groupSpec('tenant-a', '10.30.0.0/24', '10.30.0.1'))
    await until(
      () => p.client.getGroup('group-c'),
      (g) => g?.status.phase === 'Ready',
    )
    let seen = 0
    const watch = setInterval(() => {
      void daemonsOf(p, 'group-c').then((pids) => {
        seen = Math.max(seen, pids.length)
      })
    }, 20)
    await p.client.deleteGroup('group-c')
    await until(
      () => p.client.getGroup('group-c'),
      (g) => !g,
    )
    clearInterval(watch)
    t.equal(seen, 0, 'no daemon of it ever ran')
  })
})

t.test('the cap counts running centrals', async (t) => {
  const p = await startPipeline(t, {
    perGroup: true,
    onDemand: { idleMs: 500, maxCentrals: 1 },
  })
  await p.agent('dpu-1')
  await p.agent('dpu-2')
  await p.client.applyGroup('group-a', groupSpec('tenant-a'))
  await p.client.applyGroup('group-b', groupSpec('tenant-a', '10.20.0.0/24', '10.20.0.1'))
  t.ok(
    await until(
      () => p.client.getGroup('group-b'),
      (g) => g?.status.phase === 'Ready',
    ),
    'two empty groups with a cap of one',
  )
  await readyHost(p, 'host-a', 'group-a', 'dpu-1', 1)
  await t.rejects(
    p.client.applyHost('host-b', hostSpec('group-b', 'dpu-2', 2)),
    { code: 'CENTRALS_EXHAUSTED' },
    "group-b's first host: group-a's central takes the only slot",
  )
  t.notOk(await p.client.getHost('host-b'), 'nothing written')
  t.same(await daemonsOf(p, 'group-b'), [])
  await gone(p, 'host-a')
  await until(
    () => daemonsOf(p, 'group-a'),
    (pids) => pids.length === 0,
    20_000,
  )
  const b = await readyHost(p, 'host-b', 'group-b', 'dpu-2', 2)
  t.equal(b?.status.phase, 'Ready', "once group-a's central stopped, group-b's starts")
  t.equal((await daemonsOf(p, 'group-b')).length, 3)
})

t.test(
  'reconcile: starts no central of an empty group, and finishes what a crash left',
  async (t) => {
    const p = await startPipeline(t, { perGroup: true, onDemand: { idleMs: 500 } })
    await p.agent('dpu-1')
    await p.client.applyGroup('empty', groupSpec('tenant-a'))
    await p.client.applyGroup('busy', groupSpec('tenant-a', '10.20.0.0/24', '10.20.0.1'))
    await until(
      () => p.client.getGroup('busy'),
      (g) => g?.status.phase === 'Ready',
    )
    await readyHost(p, 'host-1', 'busy', 'dpu-1', 1)

    // An upgrade from a version whose groups all held a central: no slot recorded.
    await p.controller.store.centrals.forget('busy')
    const first = await runReconcile(p, 'reconcile-1')
    t.ok(first.skipped.includes('empty'), 'the empty group is skipped')
    t.ok(first.inSync.includes('busy') || first.repaired.includes('busy'), 'the busy one compared')
    t.same(await daemonsOf(p, 'empty'), [], 'no central started for the empty group')
    t.same(
      await p.controller.store.centrals.list(),
      ['busy'],
      'the busy group holds its slot again',
    )

    // A crash between the last host's purge and its central's stop being scheduled.
    const dpu = (await p.client.getHost('host-1'))?.spec.dpu.id ?? ''
    t.ok(await p.controller.store.hosts.purge('host-1', 'busy', dpu), 'host-1 purged, no stop')
    await runReconcile(p, 'reconcile-2')
    const stopped = await until(
      () => daemonsOf(p, 'busy'),
      (pids) => pids.length === 0,
      20_000,
    )
    t.same(stopped, [], 'reconcile scheduled the stop: the central stopped after the grace')
    t.same(await p.controller.store.centrals.list(), [], 'and its slot is free')

    // An apply that checked the slot just before central.stop gave it back, and started
    // the central again after the stop: it runs with no host and no slot.
    await p.centrals?.ensure('busy')
    t.equal((await daemonsOf(p, 'busy')).length, 3, 'a central running without a slot')
    const third = await runReconcile(p, 'reconcile-3')
    t.same(third.centralsStopped, ['busy'], 'reconcile reports it stopped')
    t.same(await daemonsOf(p, 'busy'), [], 'its daemons are gone')
    t.match(await centralRunning(p, 'busy'), { status: 'False', reason: 'NoHosts' })
    t.same(await p.controller.store.centrals.list(), [], 'and it took no slot')
  },
)
