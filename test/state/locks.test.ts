/**
 * Object locks on a real Redis: one holder at a time; the same job takes its own lock
 * again; and a run of a job that parked and was woken before the run ended does not
 * release the lock its next run took.
 */
import { Redis } from 'ioredis'
import t from 'tap'
import { ObjectLocks } from '../../lib/state/locks.ts'
import { withStack } from '../helpers/stack.ts'

t.test('object locks', async (t) => {
  const stack = await withStack(t)
  const redis = new Redis(stack.redis?.url ?? '')
  t.teardown(() => redis.disconnect())
  const locks = new ObjectLocks(redis, 'hz:{store}:')

  t.test('one holder at a time; released, the next takes it', async (t) => {
    const release = await locks.acquire('mr', 'h1', 'q/attach-h1', 'w1:1')
    t.ok(release, 'the attach takes the host')
    t.equal(await locks.acquire('mr', 'h1', 'q/detach-h1', 'w1:2'), undefined, 'the detach waits')
    await release?.()
    const detach = await locks.acquire('mr', 'h1', 'q/detach-h1', 'w1:2')
    t.ok(detach, 'then the detach takes it')
    await detach?.()
  })

  t.test('a parked run ending after its next run began leaves the lock held', async (t) => {
    // Run 1 of the attach parks (delayed) and is still ending (its release not sent yet)
    // when the job is woken and run 2 (another worker slot: another token) takes the lock.
    const first = await locks.acquire('mr', 'h2', 'q/attach-h2', 'w1:1')
    const second = await locks.acquire('mr', 'h2', 'q/attach-h2', 'w1:7')
    t.ok(first && second, 'the same job takes its own lock again')
    await first?.()
    t.equal(
      await locks.acquire('mr', 'h2', 'q/detach-h2', 'w1:3'),
      undefined,
      "run 1's release did not free the lock run 2 holds: the detach still waits",
    )
    await second?.()
    const detach = await locks.acquire('mr', 'h2', 'q/detach-h2', 'w1:3')
    t.ok(detach, "run 2's release frees it")
    await detach?.()
  })

  t.test(
    'a lock written without a run (before runs were kept) is still its holder’s',
    async (t) => {
      await redis.set('hz:{store}:lock:mr:h3', 'q/attach-h3', 'PX', 60_000)
      t.equal(await locks.acquire('mr', 'h3', 'q/detach-h3', 'w1:1'), undefined, 'another waits')
      const again = await locks.acquire('mr', 'h3', 'q/attach-h3', 'w2:1')
      t.ok(again, 'its holder takes it again')
      await again?.()
      t.equal(await redis.exists('hz:{store}:lock:mr:h3'), 0, 'and releases it')
    },
  )
})
