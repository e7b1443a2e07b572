/**
 * Pipeline test helpers built on `fixtures.ts`: a second worker process, the FRR consumer,
 * a controller that runs only on its own schedule, reconcile on demand, and the snapshots
 * and ready-made hosts several tests start from. Re-exported by `fixtures.ts`.
 */

import { type ChildProcess, spawn } from 'node:child_process'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createFrrSync } from '../../functions/frr-sync.ts'
import { storeAnnouncementSource } from '../../functions/internal/announcements.ts'
import { GroupApplier, type GroupCommitted } from '../../functions/internal/group-apply.ts'
import { statusFromHosts } from '../../functions/internal/group-hosts.ts'
import type { ReconcileReport } from '../../functions/reconcile.ts'
import { startPerGroupCentrals } from '../../infra/centrals/local.ts'
import { type Controller, startController } from '../../infra/controller.ts'
import { createFrrController, createVty, type FrrController } from '../../lib/frr/index.ts'
import { NbPool, SbPool, sharedCentralProvider } from '../../lib/ovn/index.ts'
import { createRedis } from '../../lib/redis/connection.ts'
import { startFrrConsumer } from '../../queues/frr.ts'
import { northdAppctl } from '../helpers/northd.ts'
import { type Teardown, withStack } from '../helpers/stack.ts'
import { groupSpec, hostSpec, type Pipeline, until } from './fixtures.ts'

const workerProcess = fileURLToPath(new URL('./worker-process.ts', import.meta.url))

/** Starts a worker process; resolves once it consumes the queue. */
export function startWorkerProcess(p: Pipeline, env: Record<string, string> = {}) {
  const child = spawn(process.execPath, ['--import', 'tsx', workerProcess], {
    env: {
      ...process.env,
      REDIS_URL: p.redisUrl,
      OVN_NB: p.nb,
      OVN_SB: p.sb,
      QUEUE_PREFIX: p.prefix,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  const exited = new Promise<NodeJS.Signals | null>((r) => child.once('exit', (_c, s) => r(s)))
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout?.on('data', (c: Buffer) => {
      if (c.toString().includes('READY')) resolve()
    })
    child.once('exit', () => reject(new Error('worker process exited before READY')))
  })
  return { child, exited, ready }
}

export function stopProcess(child: ChildProcess) {
  if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL')
}

/**
 * Everything a refused request must leave alone: stored objects, public IPs, and the jobs
 * requests made (those the controller's schedulers make — `dpu.health` every few seconds —
 * come and go on their own, so they are not counted).
 */
export async function refusalSnapshot(p: Pipeline) {
  await groupsSettled(p)
  // No handler of an earlier request still running or about to: one would add its
  // children meanwhile (parked ones wait for children that may never finish: not waited for).
  await until(
    async () =>
      (await p.controller.queue.getJobs(['active', 'waiting', 'prioritized'])).filter(
        (job) => job && !job.repeatJobKey,
      ).length,
    (busy) => busy === 0,
    10_000,
  )
  const jobs = await p.controller.queue.getJobs([
    'active',
    'completed',
    'delayed',
    'failed',
    'prioritized',
    'waiting',
    'waiting-children',
  ])
  return {
    groups: await p.controller.store.groups.list(),
    hosts: await p.controller.store.hosts.list(),
    publicIps: await p.controller.ipam.listPublicIps(),
    // Named, so that a difference says which job a refused request would have added.
    jobs: jobs
      .filter((job) => job && !job.repeatJobKey)
      .map((job) => `${job.name} ${job.id}`)
      .sort(),
  }
}

/**
 * Resolves once every group's status tells its hosts' story: a group's status follows its
 * hosts a moment after they change (group-hosts.ts), so a snapshot taken after this
 * compares only what a request changed.
 */
export async function groupsSettled(p: Pipeline): Promise<void> {
  await until(
    async () => {
      for (const group of await p.controller.store.groups.list()) {
        const hosts = await p.controller.store.hosts.inGroup(group.name)
        if (statusFromHosts(group, hosts) !== undefined) return false
      }
      return true
    },
    (settled) => settled,
  )
}

/** group-a with host-1 (FabricAccess on dpu-1, whose agent answers), once host-1 is Ready. */
export async function readyFabricHost(p: Pipeline): Promise<void> {
  await p.agent('dpu-1')
  await p.client.applyGroup('group-a', groupSpec())
  await p.client.applyHost(
    'host-1',
    hostSpec('group-a', 'dpu-1', 1, { hostAccess: 'FabricAccess' }),
  )
  await until(
    () => p.controller.store.hosts.get('host-1'),
    (h) => h?.status.phase === 'Ready',
  )
}

/**
 * The FRR consumer, in this process, on a pipeline started with `frr: true`: what the
 * store wants announced, through the pipeline's private FRR. Stopped at teardown.
 */
export async function startPipelineFrr(t: Teardown, p: Pipeline): Promise<FrrController> {
  if (!p.frrVtyDir) throw new Error('the pipeline was started without FRR')
  const vty = createVty({ vtyDir: p.frrVtyDir })
  const frr = createFrrController({ vty, saveConfig: true })
  const connection = createRedis({ url: p.redisUrl }, { maxRetriesPerRequest: null })
  const consumer = await startFrrConsumer({
    connection,
    frr,
    source: storeAnnouncementSource(p.controller.store, p.controller.ipam),
    handler: createFrrSync({ frr }),
    prefix: p.prefix,
  })
  t.teardown(async () => {
    await consumer.close()
    vty.close()
    connection.disconnect()
  })
  return frr
}

/**
 * A controller on its own Redis with a central per group (none running yet) and no
 * agents: for what the controller does on its own schedule (reconcile, dpu.health).
 */
export async function startScheduledController(
  t: Teardown,
  schedule: Pick<Parameters<typeof startController>[0], 'reconcileEveryMs' | 'dpuHealthEveryMs'> & {
    readonly prefix: string
  },
): Promise<Controller> {
  const stack = await withStack(t, { redis: true })
  if (!stack.redis) throw new Error('stack without redis')
  const centrals = await startPerGroupCentrals({
    dataDir: stack.dataDir,
    listenAddress: '127.0.0.1',
    pki: stack.pki,
    log: () => {},
  })
  t.teardown(() => centrals.close())
  const controller = await startController({
    redisUrl: stack.redis.url,
    ovn: centrals,
    fabric: { dummyIp: '172.18.0.254/24', gateway: '172.18.0.1', physicalNetwork: 'physnet' },
    reconcileEveryMs: 0,
    ...schedule,
  })
  t.teardown(() => controller.close())
  return controller
}

/** Runs reconcile now (job `id`) and resolves with its report; rejects if the run failed. */
export async function runReconcile(p: Pipeline, id: string): Promise<ReconcileReport> {
  const job = await p.controller.queue.add('reconcile', {}, { jobId: id })
  await until(
    () => job.getState(),
    (s) => s === 'completed' || s === 'failed',
  )
  const done = await p.controller.queue.getJob(id)
  if (done?.failedReason) throw new Error(`reconcile failed: ${done.failedReason}`)
  return done?.returnvalue as ReconcileReport
}

/**
 * Pauses and resumes the ovn-northd of the pipeline's shared central (resumed at teardown
 * whatever happened).
 */
export function northdControl(t: Teardown, p: Pipeline) {
  const ctl = join(dirname(p.nb.replace(/^unix:/, '')), 'northd.ctl')
  const northd = (command: 'pause' | 'resume') => northdAppctl(ctl, command)
  t.teardown(async () => {
    await northd('resume').catch(() => undefined)
  })
  return northd
}

/**
 * A `GroupApplier` of its own on the pipeline's shared central, paced by its northd (ceiling
 * `ceilingMs`), with the NB and SB pools it uses (closed at teardown).
 */
export function pacedApplier(
  t: Teardown,
  p: Pipeline,
  ceilingMs: number,
  onCommit?: (commit: GroupCommitted) => void,
): GroupApplier {
  const nb = new NbPool()
  const southbound = new SbPool()
  t.teardown(async () => {
    await Promise.all([nb.close(), southbound.close()])
  })
  const ovn = sharedCentralProvider({ nb: p.nb, sb: p.sb })
  const fabric = { dummyIp: '172.18.0.254/24', physicalNetwork: 'physnet' }
  const deps = { store: p.controller.store, ipam: p.controller.ipam, ovn, nb, fabric, southbound }
  return new GroupApplier(deps, {
    pace: { floorMs: 20, ceilingMs, northdShare: 0.25 },
    ...(onCommit ? { onCommit } : {}),
  })
}
