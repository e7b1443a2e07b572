/**
 * The FRR consumer as its own process, so a test can kill it (SIGKILL) and start it
 * again. Env: REDIS_URL, FRR_VTY_DIR, STORE_KEY (hash publicIp → next hop), QUEUE_PREFIX,
 * RESYNC_EVERY_MS (default 0: resync only at start).
 * Prints `READY {resync result}` once it resynced FRR and consumes the queue.
 */
import { Redis } from 'ioredis'
import { createFrrSync } from '../../functions/frr-sync.ts'
import { createFrrController, createVty } from '../../lib/frr/index.ts'
import { startFrrConsumer } from '../../queues/frr.ts'
import { redisAnnouncementSource } from './fixtures.ts'

const env = (name: string): string => {
  const value = process.env[name]
  if (!value) throw new Error(`${name} is not set`)
  return value
}

const redis = new Redis(env('REDIS_URL'), { maxRetriesPerRequest: null })
const frr = createFrrController({ vty: createVty({ vtyDir: env('FRR_VTY_DIR') }) })
const consumer = await startFrrConsumer({
  connection: redis,
  frr,
  source: redisAnnouncementSource(redis, env('STORE_KEY')),
  handler: createFrrSync({ frr }),
  prefix: env('QUEUE_PREFIX'),
  resyncEveryMs: Number(process.env.RESYNC_EVERY_MS ?? 0),
})
process.stdout.write(`READY ${JSON.stringify(consumer.resynced)}\n`)
