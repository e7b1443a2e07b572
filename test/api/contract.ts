/**
 * The API's contract without the network behind it: Hydrazine's client on a private, real
 * Redis (store, queue, address pool, heartbeats, change feed) and the HTTP app on top of it,
 * with no OVN central, no worker and no agent. What a request is answered and what it
 * stores or enqueues is decided here, before any handler runs, so the contract tests
 * (validation, refusals, tenancy, quotas, paging) run in a fraction of a pipeline's time.
 * Jobs the accepted requests enqueue stay in the queue: nothing consumes them.
 */
import { Queue } from 'bullmq'
import { Redis } from 'ioredis'
import { createApp } from '../../api/http/app.ts'
import type { Tokens } from '../../api/http/tokens.ts'
import { HydrazineClient } from '../../app/index.ts'
import type { ClientPolicy } from '../../app/policy.ts'
import { Heartbeats } from '../../lib/agent-protocol/heartbeats.ts'
import { createIpam, type Ipam } from '../../lib/ipam/index.ts'
import type { Planner } from '../../lib/model/plans.ts'
import { ChangeFeed } from '../../lib/state/changes.ts'
import { StateStore } from '../../lib/state/store.ts'
import { type Teardown, withStack } from '../helpers/stack.ts'

export interface Contract {
  readonly store: StateStore
  readonly queue: Queue
  readonly ipam: Ipam
  readonly heartbeats: Heartbeats
  readonly redis: Redis
  /** The private Redis's URL, with the admin's credentials. */
  readonly redisUrl: string
  readonly client: HydrazineClient
  /** The HTTP app over `client`; `internal` collects the errors it answered 500 for. */
  app(tokens: Tokens): { readonly app: ReturnType<typeof createApp>; readonly internal: string[] }
  /** Everything a refused request must leave alone: objects, public IPs, job counts. */
  snapshot(): Promise<unknown>
}

/** A client and its app on a private Redis, closed when the test ends. */
export async function startContract(
  t: Teardown,
  options: { policy?: ClientPolicy; planner?: Planner } = {},
): Promise<Contract> {
  const stack = await withStack(t)
  const url = stack.redis?.url
  if (!url) throw new Error('stack without redis')
  const redis = new Redis(url)
  const queueRedis = new Redis(url, { maxRetriesPerRequest: null })
  const store = new StateStore(redis)
  const queue = new Queue('controller', { connection: queueRedis, prefix: 'hzt' })
  const changes = new ChangeFeed(() => redis.duplicate(), store.changeLog)
  const ipam = createIpam(redis)
  const heartbeats = new Heartbeats(redis)
  t.teardown(async () => {
    await changes.close()
    await queue.close()
    redis.disconnect()
    queueRedis.disconnect()
  })
  const client = new HydrazineClient({
    store,
    queue,
    ipam,
    heartbeats,
    changes,
    ...(options.policy ? { policy: options.policy } : {}),
    ...(options.planner ? { planner: options.planner } : {}),
  })
  return {
    store,
    queue,
    ipam,
    heartbeats,
    redis,
    redisUrl: url,
    client,
    app: (tokens) => {
      const internal: string[] = []
      const app = createApp({
        readiness: {},
        logError: (error) => internal.push(String(error)),
        v1: { client, tokens },
      })
      return { app, internal }
    },
    snapshot: async () => ({
      groups: await store.groups.list(),
      hosts: await store.hosts.list(),
      dpus: await store.dpus.list(),
      publicIps: await ipam.listPublicIps(),
      jobs: await queue.getJobCounts(),
    }),
  }
}
