/**
 * Worker wiring: the one place that builds the controller's clients — Redis, OVSDB, the
 * agent and FRR queues — and hands each handler only what it needs.
 */
import { type Job, Queue, UnrecoverableError, Worker } from 'bullmq'
import { Redis } from 'ioredis'
import type { Logger } from 'pino'
import * as v from 'valibot'
import type {
  AgentDirectory,
  ChildJobs,
  FabricSettings,
  HandlerDeps,
  NbClients,
  NbConnection,
} from '../functions/deps.ts'
import { createGroupCreate } from '../functions/group-create.ts'
import { createGroupDelete } from '../functions/group-delete.ts'
import { createHostAttach } from '../functions/host-attach.ts'
import { createHostDetach } from '../functions/host-detach.ts'
import { createPublicIpAllocate } from '../functions/publicip-allocate.ts'
import { createPublicIpRelease } from '../functions/publicip-release.ts'
import { createReconcile } from '../functions/reconcile.ts'
import {
  Heartbeat,
  heartbeatKey,
  PROTOCOL_VERSIONS,
  pickProtocolVersion,
} from '../lib/agent-protocol/index.ts'
import { Ipam } from '../lib/ipam/index.ts'
import { CONTROLLER_QUEUE, type JobName } from '../lib/jobs/index.ts'
import { NbTopologyCache, OvsdbClient } from '../lib/ovn/index.ts'
import { StateStore } from '../lib/state/store.ts'
import type { OvnCentralProvider } from './ovn-provider.ts'

export interface WorkerOptions {
  readonly redisUrl: string
  readonly ovn: OvnCentralProvider
  readonly fabric: FabricSettings
  /** Jobs handled at once by this process (default 16). */
  readonly concurrency?: number
  /** How often `reconcile` runs, in ms (default 30 s; 0 = never). */
  readonly reconcileEveryMs?: number
  /** BullMQ key prefix (default `bull`); tests use their own. */
  readonly prefix?: string
  readonly logger?: Logger
  /**
   * How long a job stays locked to a worker that stopped renewing it (it crashed) before
   * another worker takes it over (default 30 s).
   */
  readonly lockDurationMs?: number
  /** See `HandlerDeps.checkpoint`; tests only. */
  readonly checkpoint?: (point: string) => void
}

export interface Workers {
  readonly worker: Worker
  readonly queue: Queue
  readonly store: StateStore
  readonly ipam: Ipam
  readonly redis: Redis
  close(): Promise<void>
}

/** Connection options every BullMQ worker and queue here uses. */
export function bullConnection(redisUrl: string) {
  return new Redis(redisUrl, { maxRetriesPerRequest: null })
}

export async function startWorkers(options: WorkerOptions): Promise<Workers> {
  const redis = new Redis(options.redisUrl, { maxRetriesPerRequest: 3 })
  const connection = bullConnection(options.redisUrl)
  const prefix = options.prefix ? { prefix: options.prefix } : {}
  const store = new StateStore(redis)
  const ipam = new Ipam(redis)
  const queue = new Queue(CONTROLLER_QUEUE, { connection, ...prefix })

  const nbClients = new Map<string, Promise<NbConnection>>()
  const nb: NbClients = {
    get(remote) {
      let connection = nbClients.get(remote)
      if (!connection) {
        connection = OvsdbClient.connect(remote).then(async (client) => ({
          client,
          cache: await NbTopologyCache.start(client),
        }))
        connection.catch(() => nbClients.delete(remote))
        nbClients.set(remote, connection)
      }
      return connection
    },
  }

  const queues = new Map<string, Queue>()
  const queueFor = (queueName: string) => {
    let target = queues.get(queueName)
    if (!target) {
      target = new Queue(queueName, { connection, ...prefix })
      queues.set(queueName, target)
    }
    return target
  }
  const children: ChildJobs = {
    async result(queueName, id) {
      const job = await queueFor(queueName).getJob(id)
      return job?.returnvalue ?? undefined
    },
    async add(queueName, name, data, opts) {
      const target = queueFor(queueName)
      await target
        .add(name, data, {
          jobId: opts.jobId,
          parent: opts.parent,
          attempts: 8,
          backoff: { type: 'exponential', delay: 500 },
          removeOnComplete: { age: 24 * 3600 },
          removeOnFail: { age: 7 * 24 * 3600 },
        })
        .catch((error: unknown) => {
          // The same child (same id) already belongs to an earlier run of this work: the
          // handler reads its result instead of waiting on it.
          if (!(error instanceof Error && /cannot be replaced/.test(error.message))) throw error
        })
    },
  }

  const agents: AgentDirectory = {
    async protocolFor(dpuId) {
      const raw = await redis.get(heartbeatKey(dpuId))
      const beat = raw ? v.safeParse(Heartbeat, JSON.parse(raw)) : undefined
      // Unknown agent: speak the oldest version every shipped agent understands.
      if (!beat?.success) return PROTOCOL_VERSIONS[0]
      return pickProtocolVersion(beat.output.protocolVersions)
    },
  }

  const deps: HandlerDeps = {
    checkpoint: options.checkpoint ?? (() => {}),
    store,
    ipam,
    ovn: options.ovn,
    nb,
    children,
    agents,
    fabric: options.fabric,
  }
  const handlers: Record<JobName, (job: Job, token?: string) => Promise<unknown>> = {
    'group.create': createGroupCreate(deps),
    'group.delete': createGroupDelete(deps),
    'host.attach': createHostAttach(deps),
    'host.detach': createHostDetach(deps),
    'publicip.allocate': createPublicIpAllocate(deps),
    'publicip.release': createPublicIpRelease(deps),
    reconcile: createReconcile(deps),
  }

  const worker = new Worker(
    CONTROLLER_QUEUE,
    async (job, token) => {
      const handler = handlers[job.name as JobName]
      if (!handler) throw new UnrecoverableError(`unknown job ${job.name}`)
      return handler(job, token)
    },
    {
      connection,
      concurrency: options.concurrency ?? 16,
      lockDuration: options.lockDurationMs ?? 30_000,
      stalledInterval: Math.min(30_000, options.lockDurationMs ?? 30_000),
      // A job whose worker died is resumed, not failed, even after several crashes.
      maxStalledCount: 5,
      ...prefix,
    },
  )
  worker.on('failed', (job, error) =>
    options.logger?.warn({ job: job?.id, err: error.message }, 'job failed'),
  )
  await worker.waitUntilReady()

  if ((options.reconcileEveryMs ?? 30_000) > 0) {
    await queue.upsertJobScheduler(
      'reconcile',
      { every: options.reconcileEveryMs ?? 30_000 },
      { name: 'reconcile', data: {} },
    )
  }

  return {
    worker,
    queue,
    store,
    ipam,
    redis,
    async close() {
      await worker.close()
      await Promise.all([...queues.values()].map((q) => q.close()))
      await queue.close()
      for (const connection of nbClients.values()) {
        await connection.then((c) => c.client.close()).catch(() => {})
      }
      redis.disconnect()
      connection.disconnect()
    },
  }
}
