import { existsSync } from 'node:fs'
import { join } from 'node:path'
import type { Test } from 'tap'
import { type Teardown, tempDir } from '../helpers/stack.ts'
import { groupSpec, hostSpec, type Pipeline, startPipeline, until } from './fixtures.ts'
import { groupsSettled, startWorkerProcess, stopProcess as stop } from './scenarios.ts'

/**
 * What a user can observe after convergence: NB rows, addresses, statuses. A group's status
 * follows its hosts a moment after they change, so it is read once it tells their story.
 */
async function observe(p: Pipeline) {
  await groupsSettled(p)
  return {
    rows: await p.ownedRows(),
    ports: (await p.nbctl('--bare', '--columns=name', 'list', 'Logical_Switch_Port'))
      .split('\n')
      .filter((l) => l.trim())
      .sort(),
    nat: (await p.nbctl('--bare', '--columns=type,external_ip,logical_ip', 'list', 'NAT'))
      .split('\n\n')
      .map((b) => b.trim().split('\n').join(' '))
      .filter(Boolean)
      .sort(),
    allocations: (await p.controller.ipam.allocations('group-a').catch(() => [])).sort((a, b) =>
      a.owner.localeCompare(b.owner),
    ),
    hosts: (await p.controller.store.hosts.list()).map((h) => [h.name, h.status.phase]),
    groups: (await p.controller.store.groups.list()).map((g) => [g.name, g.status.phase]),
  }
}

async function attachScenario(p: Pipeline) {
  await p.client.applyGroup('group-a', groupSpec())
  // Explicit addresses: the two attaches race, and the end state must not depend on it.
  await p.client.applyHost(
    'host-1',
    hostSpec('group-a', 'dpu-1', 1, { hostAccess: 'FabricAccess', hostIP: '10.10.10.2' }),
  )
  await p.client.applyHost('host-2', hostSpec('group-a', 'dpu-2', 2, { hostIP: '10.10.10.3' }))
  for (const host of ['host-1', 'host-2']) {
    await until(
      () => p.controller.store.hosts.get(host),
      (h) => h?.status.phase === 'Ready',
      30_000,
    )
  }
}

async function deleteScenario(p: Pipeline) {
  await p.client.deleteGroup('group-a')
  await until(
    () => p.controller.store.groups.get('group-a'),
    (g) => g === undefined,
    30_000,
  )
}

/**
 * A pipeline whose in-test worker is stopped, so that worker processes do the work; with
 * `attached`, its worker first runs the attach scenario (the start of a teardown).
 */
async function crashPipeline(t: Teardown, options: { attached?: boolean } = {}) {
  const p = await startPipeline(t)
  await p.agent('dpu-1')
  await p.agent('dpu-2')
  if (options.attached) await attachScenario(p)
  await p.controller.worker.close()
  return p
}

/**
 * SIGKILLs a worker process at each checkpoint of `phase` (host.attach, or group.delete
 * of an attached group), lets a new one finish the work, and asserts the end state is a
 * clean run's. `CRASH_ONLY=<checkpoint>` runs one point.
 */
export async function crashPoints(t: Test, phase: 'attach' | 'delete'): Promise<void> {
  // The clean run: what every crashed run must end up as.
  const clean = await startPipeline(t)
  await clean.agent('dpu-1')
  await clean.agent('dpu-2')
  await attachScenario(clean)
  const attached = await observe(clean)
  await deleteScenario(clean)
  const deleted = await observe(clean)
  t.equal(attached.hosts.length, 2)
  t.same(deleted.rows, [], 'a clean teardown leaves no row')

  const points = [
    ['attach', 'attach:allocated'],
    // Parked while the group's commit waits for its pace: the job's timer wakes it elsewhere.
    ['attach', 'attach:parked'],
    ['attach', 'attach:topology-applied'],
    ['attach', 'attach:status-configuring'],
    ['attach', 'attach:children-added'],
    ['attach', 'attach:acked'],
    ['delete', 'delete:terminating'],
    ['delete', 'delete:children-added'],
    ['delete', 'detach:acked'],
    ['delete', 'detach:released'],
    ['delete', 'delete:topology-deleted'],
    ['delete', 'delete:network-deleted'],
  ] as const
  for (const [pointPhase, point] of points) {
    if (pointPhase !== phase) continue
    if (process.env.CRASH_ONLY && process.env.CRASH_ONLY !== point) continue
    await t.test(`killed at ${point}`, async (t) => {
      const p = await crashPipeline(t, { attached: phase === 'delete' })
      const mark = join(await tempDir(t), 'crashed')
      const doomed = startWorkerProcess(p, {
        CRASH_AT: point,
        CRASH_MARK: mark,
      })
      t.teardown(() => stop(doomed.child))
      await doomed.ready
      const scenario = phase === 'attach' ? attachScenario(p) : deleteScenario(p)
      scenario.catch(() => {})
      t.equal(await doomed.exited, 'SIGKILL', 'the worker died at the checkpoint')
      t.ok(existsSync(mark))

      const revived = startWorkerProcess(p)
      t.teardown(() => stop(revived.child))
      await revived.ready
      await scenario
      const after = await observe(p)
      t.same(after, phase === 'attach' ? attached : deleted, 'same end state as a clean run')
    })
  }
}
