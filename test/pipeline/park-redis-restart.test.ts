/**
 * An attach that parks for its group's commit while Redis restarts: the group's apply
 * gives up on the store (`MaxRetriesPerRequestError`, the store's connection retries a
 * command 3 times) while the attach still waits to record its step on BullMQ's connection
 * (which retries until Redis is back). The apply's failure is the job's, which is retried:
 * no unhandled rejection, and the host is Ready once Redis is back.
 */
import { Redis } from 'ioredis'
import t from 'tap'
import { groupSpec, hostSpec, type Pipeline, startPipeline, until } from './fixtures.ts'

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

async function redisPid(url: string): Promise<number> {
  const redis = new Redis(url)
  try {
    return Number(/process_id:(\d+)/.exec(await redis.info('server'))?.[1])
  } finally {
    redis.disconnect()
  }
}

/** Redis answers again (the embedded one is restarted 0.5 s after it died). */
async function redisBack(url: string): Promise<void> {
  const redis = new Redis(url, { maxRetriesPerRequest: null })
  redis.on('error', () => {})
  try {
    await redis.ping()
  } finally {
    redis.disconnect()
  }
}

t.test(
  "an attach parked while Redis restarts is Ready; its apply's failure is handled",
  { timeout: 90_000 },
  async (t) => {
    let redisUrl = ''
    let killRedis = false
    const p: Pipeline = await startPipeline(t, {
      // Right before the attach asks for its group's apply: Redis dies, and both of the
      // controller's connections have seen it (new commands wait for a reconnect).
      checkpoint: async (point) => {
        if (point !== 'attach:allocated' || !killRedis) return
        killRedis = false
        process.kill(await redisPid(redisUrl), 'SIGKILL')
        await sleep(100)
      },
    })
    redisUrl = p.redisUrl
    await p.agent('dpu-1')
    await p.client.applyGroup('group-a', groupSpec())
    await p.client.applyHost('host-1', hostSpec('group-a', 'dpu-1', 1))
    const phaseOf = async (host: string) => (await p.controller.store.hosts.get(host))?.status.phase
    await until(
      () => phaseOf('host-1'),
      (phase) => phase === 'Ready',
      30_000,
    )

    // host-1's commit paces the group's next one: host-2's attach parks for it.
    killRedis = true
    await p.client.applyHost('host-2', hostSpec('group-a', 'dpu-1', 2))
    t.equal(
      await until(
        async () => killRedis,
        (armed) => !armed,
      ),
      false,
      "Redis died as host-2's attach asked for its group's apply",
    )
    await redisBack(redisUrl)
    t.equal(
      await until(
        () => phaseOf('host-2'),
        (phase) => phase === 'Ready',
        30_000,
      ),
      'Ready',
      'host-2 is Ready once Redis is back',
    )
  },
)
