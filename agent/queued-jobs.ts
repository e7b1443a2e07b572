/**
 * What waits in this DPU's queue behind the job under way: a `configure` waiting for its
 * host's flows stops waiting when a job of the same binding sent later is queued (a
 * `configure` the controller sent again with new credentials, after its group's chassis
 * CA was replaced, or the detach's `isolate`): that job redoes or undoes the host anyway,
 * and the DPU runs one job at a time, so waiting out the install timeout would only hold
 * it, and every other host of the DPU, for nothing.
 *
 * Read with the commands the agent's Redis user is allowed (`credentials.ts`): the
 * queue's waiting list and its prioritized and delayed sets, then each job's name and
 * moment, and the payload of those sent later only.
 */
import type { Redis } from 'ioredis'
import { parseAgentJob } from '../lib/agent-protocol/index.ts'
import { bindingOf, type QueuedJobs } from './job-order.ts'

/**
 * How many jobs of each list are looked at: of `wait`, the newest (BullMQ pushes a new job
 * on its head: a later job is among the newest); of the delayed and prioritized sets, the
 * first. A DPU's queue is a few jobs deep.
 */
export const PEEKED_JOBS = 100

/**
 * The queued jobs of the BullMQ queue `queue` (keys under `prefix`), read with `redis`.
 *
 * @example
 * const queued = queuedJobs(redis, agentQueueName('dpu-1'), 'bull', ['2.0'])
 * await queued.sentLaterFor('hz/group-a/host-a', job.timestamp) // 1764580000123
 */
export function queuedJobs(
  redis: Pick<Redis, 'lrange' | 'zrange' | 'hmget'>,
  queue: string,
  prefix: string,
  protocolVersions: readonly string[],
): QueuedJobs {
  const base = `${prefix}:${queue}`
  return {
    async sentLaterFor(binding, sentAt) {
      const [waiting, prioritized, delayed] = await Promise.all([
        redis.lrange(`${base}:wait`, 0, PEEKED_JOBS - 1),
        redis.zrange(`${base}:prioritized`, '0', String(PEEKED_JOBS - 1)),
        redis.zrange(`${base}:delayed`, '0', String(PEEKED_JOBS - 1)),
      ])
      const ids = [...new Set([...waiting, ...prioritized, ...delayed])]
      const moments = await Promise.all(
        ids.map(async (id) => {
          const [name, timestamp] = await redis.hmget(`${base}:${id}`, 'name', 'timestamp')
          return { id, name, at: Number(timestamp) }
        }),
      )
      // The earliest of the later ones first: its payload is read only when it may be one.
      const later = moments
        .filter(({ name, at }) => name && Number.isSafeInteger(at) && at > sentAt)
        .sort((a, b) => a.at - b.at)
      for (const { id, name, at } of later) {
        const [data] = await redis.hmget(`${base}:${id}`, 'data')
        if (bindingOfQueued(name ?? '', data ?? null, protocolVersions) === binding) return at
      }
      return undefined
    },
  }
}

/** The binding of a queued job, or undefined when it is not a job this agent could run. */
function bindingOfQueued(
  name: string,
  data: string | null,
  protocolVersions: readonly string[],
): string | undefined {
  try {
    return bindingOf(parseAgentJob(name, JSON.parse(data ?? 'null'), protocolVersions))
  } catch {
    return undefined
  }
}
