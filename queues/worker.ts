/**
 * The controller queue's wiring: each handler in `functions/` bound to its job name on
 * one BullMQ worker, with the child-job plumbing and the group applier they share, and
 * the repeatable `reconcile`. The clients come from the composition root (`infra/`).
 */

import { DelayedError, type Job, Queue, UnrecoverableError, Worker } from 'bullmq'
import type { Logger } from 'pino'
import { createAdminSync } from '../functions/admin-sync.ts'
import { createCentralStop } from '../functions/central-stop.ts'
import { createDpuHealth } from '../functions/dpu-health.ts'
import { createGroupCreate } from '../functions/group-create.ts'
import { createGroupDelete } from '../functions/group-delete.ts'
import { createHostAttach } from '../functions/host-attach.ts'
import { createHostDetach } from '../functions/host-detach.ts'
import type { HandlerDeps } from '../functions/internal/deps.ts'
import { type CommitPace, GroupApplier } from '../functions/internal/group-apply.ts'
import { GroupHostsStatus } from '../functions/internal/group-hosts.ts'
import { createPublicIpAllocate } from '../functions/publicip-allocate.ts'
import { createPublicIpRelease } from '../functions/publicip-release.ts'
import { createReconcile } from '../functions/reconcile.ts'
import { Heartbeats } from '../lib/agent-protocol/heartbeats.ts'
import { isAgentQueueName } from '../lib/agent-protocol/index.ts'
import { measureDpuUsage } from '../lib/agent-protocol/usage.ts'
import { CONTROLLER_QUEUE, type JobName } from '../lib/jobs/index.ts'
import { measureProducerUsage } from '../lib/jobs/producer-usage.ts'
import { isProducerQueueName } from '../lib/jobs/producers.ts'
import { queueJobs } from '../lib/jobs/redrive.ts'
import type { RedisClient } from '../lib/redis/connection.ts'
import type { Leases } from '../lib/state/leases.ts'
import { bullChildJobs, ChildWatcher, waiterKeys } from './children.ts'
import {
  dpuRepairs,
  failureLogLevel,
  reconcileRepairs,
  reporting,
  timed,
  type WorkerObservers,
} from './job-observers.ts'
import { keepLocksOfOverlappingRuns } from './overlapping-runs.ts'

export type { JobOutcome, RepairKind, WorkerObservers } from './job-observers.ts'

/** What the handlers need that the composition root builds (clients and settings). */
export type WorkerDeps = Omit<
  HandlerDeps,
  'groups' | 'children' | 'jobs' | 'checkpoint' | 'onHostReady'
> &
  Partial<Pick<HandlerDeps, 'checkpoint'>>

/**
 * Controller jobs handled at once by one process. Most of them wait, not work: a job
 * parks while it waits for its children (`queues/children.ts`), but an attach waits in its
 * slot for its group's next NB commit, which the pace holds until the central's northd has
 * processed the last one (`COMMIT_PACE`, up to 3 s), unless `parkForCommit` parks it
 * meanwhile (`ParkedWork`; on by default, see `HandlerDeps.parkForCommit`). Waiting in
 * the slot, this number caps the attaches per second one process carries at about itself
 * divided by that wait (Little's law): the scale bench's steady 100/s into 10 groups of
 * 1,000 hosts (each central's commits ~3 s apart) finished at 60.5/s with 256 and 55/s
 * with 1,024. 1,024 is not the default: with it, the chaos test (a controller killed
 * mid-burst) once left a host's attach never run, and its busy event loop lost job locks
 * more often ("could not renew lock"). What costs CPU is bounded where it is spent: central
 * starts (`CENTRAL_STARTS_AT_ONCE`), reconcile (its own concurrency), a group's applies (one
 * at a time, the callers meanwhile sharing the next).
 */
export const WORKER_CONCURRENCY = 256

export interface WorkerOptions {
  /** A new connection for BullMQ (`maxRetriesPerRequest: null`); called once per use. */
  readonly connection: () => RedisClient
  /**
   * A new connection, likewise, to the agents' Redis: the DPUs' queues (`isAgentQueueName`)
   * and heartbeats, and the queue producers' queues (`isProducerQueueName`). Absent: they
   * share `connection`'s Redis (tests' shortcut; a DPU can then fill the store).
   */
  readonly agentConnection?: () => RedisClient
  readonly deps: WorkerDeps
  /** Jobs handled at once by this process (default `WORKER_CONCURRENCY`). */
  readonly concurrency?: number
  /** How a group's NB commits are paced by its ovn-northd (default `COMMIT_PACE`). */
  readonly commitPace?: CommitPace
  /** How often `reconcile` runs, in ms (default 30 s; 0 = never). */
  readonly reconcileEveryMs?: number
  /**
   * How often `dpu.health` compares the DPUs' heartbeats with their hosts, in ms (default
   * 0 = never; `infra/service.ts` runs it). At most one heartbeat interval, for a dead
   * agent's hosts to show it within 3 intervals.
   */
  readonly dpuHealthEveryMs?: number
  /**
   * How often `admin.sync` puts free host ports on the admin network and takes them off
   * it, in ms (default 1000; 0 = never). Only with an admin network (`deps.admin`).
   */
  readonly adminSyncEveryMs?: number
  /** BullMQ key prefix (default `bull`); tests use their own. */
  readonly prefix?: string
  readonly logger?: Logger
  /**
   * How long a job stays locked to a worker that stopped renewing it (it crashed) before
   * another worker takes it over (default 30 s).
   */
  readonly lockDurationMs?: number
  /**
   * Each DPU's bytes in the agents' Redis, measured by `dpu.health` at most every `everyMs`:
   * over `limitBytes`, `revoke` takes its credentials (default: not measured).
   */
  readonly dpuUsage?: {
    readonly limitBytes: number
    readonly everyMs: number
    revoke(dpuId: string): Promise<void>
  }
  /**
   * Each queue producer's bytes in the agents' Redis, measured by `dpu.health` at most every
   * `everyMs`: over `limitBytes`, `revoke` deletes its Redis user (default: not measured).
   */
  readonly producerUsage?: {
    readonly limitBytes: number
    readonly everyMs: number
    revoke(producer: string): Promise<boolean>
  }
  /** Told of each handler run, repair and host turning Ready (the metrics; default none). */
  readonly observers?: WorkerObservers
}

export interface Workers {
  readonly worker: Worker
  /** The controller queue, for producers. */
  readonly queue: Queue
  /** The queue named `name` (the controller's, an agent's, FRR's) on this wiring's connection. */
  queueNamed(name: string): Queue
  close(): Promise<void>
}

export async function startWorkers(options: WorkerOptions): Promise<Workers> {
  const connection = options.connection()
  const agentsConnection = options.agentConnection ? options.agentConnection() : connection
  /**
   * The Redis a queue lives on: the agents' for a DPU's or a producer's queue, the store's
   * for the rest.
   */
  const redisFor = (name: string) =>
    isAgentQueueName(name) || isProducerQueueName(name) ? agentsConnection : connection
  const prefix = options.prefix ? { prefix: options.prefix } : {}
  const queue = new Queue(CONTROLLER_QUEUE, { connection, ...prefix })
  const queues = new Map<string, Queue>([[CONTROLLER_QUEUE, queue]])
  const queueFor = (name: string) => {
    let target = queues.get(name)
    if (!target) {
      target = new Queue(name, { connection: redisFor(name), ...prefix })
      queues.set(name, target)
    }
    return target
  }

  const keys = waiterKeys(options.prefix)
  const observers = options.observers ?? {}
  const deps: HandlerDeps = {
    ...options.deps,
    checkpoint: options.deps.checkpoint ?? (() => {}),
    groups: new GroupApplier(options.deps, {
      ...(observers.groupCommitted ? { onCommit: observers.groupCommitted } : {}),
      ...(options.commitPace ? { pace: options.commitPace } : {}),
    }),
    children: bullChildJobs(queueFor, redisFor, keys),
    jobs: queueJobs(queue),
    ...(observers.hostReady ? { onHostReady: observers.hostReady } : {}),
    groupHosts: new GroupHostsStatus(options.deps, {
      onError: (group, error) =>
        options.logger?.warn(
          { group, err: String(error) },
          'group status from its hosts not written',
        ),
    }),
  }
  const reconcile = reporting(
    oneRunAtATime(
      deps.store.leases,
      createReconcile(deps, { log: (line) => options.logger?.warn(line) }),
    ),
    (report) => {
      for (const [kind, n] of reconcileRepairs(report)) observers.reconcileRepaired?.(kind, n)
    },
  )
  const dpuHealth = reporting(
    createDpuHealth({
      ...deps,
      heartbeats: new Heartbeats(agentsConnection),
      records: deps.store.dpuHealth,
      ...(options.dpuUsage
        ? {
            usage: {
              ...options.dpuUsage,
              measure: () => measureDpuUsage(agentsConnection, options.prefix),
            },
          }
        : {}),
      ...(options.producerUsage
        ? {
            producerUsage: {
              ...options.producerUsage,
              measure: () => measureProducerUsage(agentsConnection, options.prefix),
            },
          }
        : {}),
    }),
    (result) => {
      for (const kind of dpuRepairs(result)) observers.dpuRepaired?.(kind)
      for (const { dpu } of result.revoked ?? []) observers.dpuRevoked?.(dpu)
      for (const { producer, bytes } of result.producersRevoked ?? []) {
        observers.producerRevoked?.(producer)
        options.logger?.warn(
          { producer, bytes, limitBytes: options.producerUsage?.limitBytes },
          `queue producer ${producer} holds ${bytes} bytes in the agents' Redis, over its bound: its Redis user is revoked`,
        )
      }
    },
  )
  const handlers: Record<JobName, (job: Job, token?: string) => Promise<unknown>> = {
    'group.create': createGroupCreate(deps),
    'group.delete': createGroupDelete(deps),
    'host.attach': createHostAttach(deps),
    'host.detach': createHostDetach(deps),
    'publicip.allocate': createPublicIpAllocate(deps),
    'publicip.release': createPublicIpRelease(deps),
    reconcile,
    'dpu.health': dpuHealth,
    'admin.sync': deps.admin
      ? createAdminSync({ ...deps, admin: deps.admin })
      : async () => ({ skipped: 'no admin network (HYDRAZINE_ADMIN_NETWORK)' }),
    'central.stop': createCentralStop(deps),
  }
  for (const name of Object.keys(handlers) as JobName[]) {
    handlers[name] = timed(name, handlers[name], observers)
  }

  const workerConnection = options.connection()
  const lockDuration = options.lockDurationMs ?? 30_000
  const worker = new Worker(
    CONTROLLER_QUEUE,
    // A parked job woken while its earlier run was ending keeps its lock (`overlapping-runs.ts`).
    keepLocksOfOverlappingRuns(async (job, token) => {
      const handler = handlers[job.name as JobName]
      if (!handler) throw new UnrecoverableError(`unknown job ${job.name}`)
      return handler(job, token)
    }, lockDuration),
    {
      connection: workerConnection,
      concurrency: options.concurrency ?? WORKER_CONCURRENCY,
      lockDuration,
      stalledInterval: Math.min(30_000, lockDuration),
      // A job whose worker died is resumed, not failed, even after several crashes.
      maxStalledCount: 5,
      ...prefix,
    },
  )
  // Waiting for an agent (or anything else not there yet) is normal: the object's status
  // says so, and a retried wait is logged at debug only.
  worker.on('failed', (job, error) =>
    options.logger?.[failureLogLevel(job, error)](
      { job: job?.id, err: error.message },
      'job failed',
    ),
  )
  worker.on('error', (error) => options.logger?.warn({ err: error.message }, 'worker error'))
  await worker.waitUntilReady()
  // One watcher per Redis children live on: the store's (FRR's queue, the controller's
  // own) and the agents'. Each wakes parents on the store, through `queueFor`.
  const watchers = [options.connection, options.agentConnection]
    .filter((c): c is () => RedisClient => c !== undefined)
    .map(
      (connect) =>
        new ChildWatcher({
          connection: connect,
          keys,
          queueFor,
          onError: (error) => options.logger?.warn({ err: error }, 'child watcher error'),
        }),
    )

  if ((options.reconcileEveryMs ?? 30_000) > 0) {
    await queue.upsertJobScheduler(
      'reconcile',
      { every: options.reconcileEveryMs ?? 30_000 },
      {
        name: 'reconcile',
        data: {},
        // A run every 30 s would otherwise leave ~2,900 jobs a day in Redis: keep the
        // latest results for operators to read, and no more.
        opts: {
          removeOnComplete: { count: 50, age: 24 * 3600 },
          removeOnFail: { count: 50, age: 7 * 24 * 3600 },
        },
      },
    )
  }

  if ((options.dpuHealthEveryMs ?? 0) <= 0) {
    // Off: no scheduler left behind by an earlier start that had it on.
    await queue.removeJobScheduler('dpu.health')
  } else {
    await queue.upsertJobScheduler(
      'dpu.health',
      { every: options.dpuHealthEveryMs ?? 0 },
      {
        name: 'dpu.health',
        data: {},
        // Runs every few seconds: keep a few results to read, no history.
        opts: { removeOnComplete: { count: 10 }, removeOnFail: { count: 10 } },
      },
    )
  }

  const adminSyncEveryMs = deps.admin ? (options.adminSyncEveryMs ?? 1000) : 0
  if (adminSyncEveryMs <= 0) {
    await queue.removeJobScheduler('admin.sync')
  } else {
    await queue.upsertJobScheduler(
      'admin.sync',
      { every: adminSyncEveryMs },
      {
        name: 'admin.sync',
        data: {},
        opts: { removeOnComplete: { count: 10 }, removeOnFail: { count: 10 } },
      },
    )
  }

  return {
    worker,
    queue,
    queueNamed: queueFor,
    async close() {
      await Promise.all(watchers.map((watcher) => watcher.stop()))
      await worker.close()
      await Promise.all([...queues.values()].map((q) => q.close()))
      workerConnection.disconnect()
      connection.disconnect()
      if (agentsConnection !== connection) agentsConnection.disconnect()
    },
  }
}

/** The longest a reconcile run may hold its lease if its worker dies mid-run. */
const RECONCILE_LEASE_MS = 10 * 60_000
/** How long a reconcile run waits when another is still running. */
const RECONCILE_WAIT_MS = 5000

/**
 * A reconcile run that starts while another still runs, in this process or another
 * replica (a run longer than the schedule's interval), waits for it: two runs never
 * apply the same groups at once.
 */
function oneRunAtATime<R>(
  leases: Leases,
  run: (job: Job, token?: string) => Promise<R>,
): (job: Job, token?: string) => Promise<R> {
  return async function exclusiveRun(job, token) {
    const holder = `${job.queueName}/${job.id}`
    if (!(await leases.take('reconcile', holder, RECONCILE_LEASE_MS))) {
      if (!token) throw new Error('reconcile cannot wait without its job lock')
      await job.moveToDelayed(Date.now() + RECONCILE_WAIT_MS, token)
      throw new DelayedError()
    }
    try {
      return await run(job, token)
    } finally {
      await leases.release('reconcile', holder)
    }
  }
}
