/**
 * Conditions never outlive what they describe, an empty pool says how to fill it, and
 * reconcile reports drift only where NB differed from what was applied before: a host
 * Failed before its attach wrote it has no rows, and rows written for the first time are
 * no repair.
 */
import t from 'tap'
import type { ChildJobs } from '../../functions/internal/deps.ts'
import { retryDue } from '../../functions/internal/retries.ts'
import { queueJobs } from '../../lib/jobs/redrive.ts'
import type { ManagedResource } from '../../lib/model/objects.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import { groupSpec, hostSpec, type Pipeline, startPipeline, until } from './fixtures.ts'
import { runReconcile } from './scenarios.ts'

const reasonsOf = async (p: Pipeline, kind: 'mr' | 'rg', name: string) =>
  (await p.controller.store.events.list(kind, name)).map((e) => e.reason)

const failed = (h: ManagedResource | undefined) => h?.status.phase === 'Failed'

t.test(
  'a host Failed at its public IP: told how to fill the pool, no rows, no repair, no stale condition once retried',
  async (t) => {
    const p = await startPipeline(t)
    await p.client.applyGroup('group-p', groupSpec())
    await until(
      () => p.controller.store.groups.get('group-p'),
      (g) => g?.status.phase === 'Ready',
    )
    await p.client.applyHost(
      'host-p',
      hostSpec('group-p', 'dpu-1', 1, { hostAccess: 'PublicAccess' }),
    )
    const host = await until(() => p.controller.store.hosts.get('host-p'), failed)
    t.match(
      host?.status.conditions.find((c) => c.type === 'Attached'),
      {
        status: 'False',
        reason: 'POOL_EXHAUSTED',
        message: /no public IPv4 address has been registered yet.*PUT \/v1\/public-ips\//,
      },
      'a pool never filled says so, and names the call that fills it',
    )

    const report = await runReconcile(p, 'reconcile-failed-host')
    const port = topologyNames.hostPort('group-p', 'host-p')
    t.equal(await p.switchPort(port), undefined, 'reconcile wrote no row of the Failed host')
    t.same(report.repaired, [], 'and repaired nothing')
    t.notOk((await reasonsOf(p, 'mr', 'host-p')).includes('Repaired'), 'no drift event')

    await p.client.registerPublicIp('203.0.113.9')
    const deps = {
      store: p.controller.store,
      children: {} as ChildJobs,
      jobs: queueJobs(p.controller.queue),
    }
    t.match(await retryDue(deps, { now: new Date(Date.now() + 60_000) }), [
      { name: 'host-p', action: 'Retrying' },
    ])
    // No agent answers: the retry gets as far as Configuring, waiting for it.
    const configuring = await until(
      () => p.controller.store.hosts.get('host-p'),
      (h) => h?.status.phase === 'Configuring' && h.status.attempt === 2,
    )
    t.same(
      configuring?.status.conditions.map((c) => [c.type, c.status, c.reason]),
      [['AgentConfigured', 'False', 'AwaitingAgent']],
      'Configuring: the retry note (Attached=Unknown Retrying) is gone, the wait is said',
    )
    t.ok(await p.switchPort(port), 'the retry wrote its port')

    // The one public IP is taken: the next host is told the pool is used up, not empty.
    await p.client.applyHost(
      'host-q',
      hostSpec('group-p', 'dpu-2', 2, { hostAccess: 'PublicAccess' }),
    )
    const second = await until(() => p.controller.store.hosts.get('host-q'), failed)
    t.match(
      second?.status.conditions.find((c) => c.type === 'Attached')?.message,
      /all 1 public IPv4 addresses of pool public-ips are allocated: register more/,
    )
  },
)

t.test("reconcile writing a host's rows for the first time is no repair", async (t) => {
  let release: () => void = () => {}
  const held = new Promise<void>((resolve) => {
    release = resolve
  })
  let reached: () => void = () => {}
  const atAllocated = new Promise<void>((resolve) => {
    reached = resolve
  })
  const p = await startPipeline(t, {
    checkpoint: async (point) => {
      if (point !== 'attach:allocated') return
      reached()
      await held
    },
  })
  t.teardown(() => release())
  await p.client.applyGroup('group-n', groupSpec())
  await until(
    () => p.controller.store.groups.get('group-n'),
    (g) => g?.status.phase === 'Ready',
  )
  await p.client.applyHost('host-n', hostSpec('group-n', 'dpu-1', 3))
  await atAllocated
  const port = topologyNames.hostPort('group-n', 'host-n')
  t.equal(await p.switchPort(port), undefined, 'its attach holds before its NB write')

  const report = await runReconcile(p, 'reconcile-first-write')
  t.ok(await p.switchPort(port), 'reconcile wrote the new port (the group as it is now)')
  t.same(report.repaired, [], 'but repaired nothing')
  t.same(report.inSync, ['group-n'])
  t.notOk((await reasonsOf(p, 'mr', 'host-n')).includes('Repaired'), 'no drift event for the host')
  t.notOk((await reasonsOf(p, 'rg', 'group-n')).includes('Repaired'), 'nor for the group')

  // Drift after that first write is drift.
  release()
  await until(
    () => p.controller.store.hosts.get('host-n'),
    (h) => h?.status.phase === 'Configuring',
  )
  await p.nbctl('lsp-del', port)
  const again = await runReconcile(p, 'reconcile-drift')
  t.same(again.repaired, ['group-n'], 'a port deleted behind its back is repaired')
  t.ok((await reasonsOf(p, 'mr', 'host-n')).includes('Repaired'), 'and the host says so')
})
