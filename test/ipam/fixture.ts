/**
 * One private Redis per test file (from the local stack) and a fresh key prefix per
 * Ipam, so subtests never see each other's state.
 */
import { Redis } from 'ioredis'
import { createIpam, type Ipam } from '../../lib/ipam/index.ts'
import { type Teardown, withStack } from '../helpers/stack.ts'

export interface IpamFixture {
  readonly redis: Redis
  readonly url: string
  /** A new Ipam under a prefix no other caller in this file uses. */
  ipam(): { ipam: Ipam; prefix: string }
}

export async function ipamFixture(t: Teardown): Promise<IpamFixture> {
  const stack = await withStack(t, { redis: true })
  if (stack.redis === undefined) throw new Error('local stack started without Redis')
  const url = stack.redis.url
  const redis = new Redis(url, { maxRetriesPerRequest: 1 })
  t.teardown(() => redis.disconnect())
  let n = 0
  return {
    redis,
    url,
    ipam() {
      const prefix = `test${++n}:ipam:`
      return { ipam: createIpam(redis, { prefix }), prefix }
    },
  }
}
