/**
 * Child process of concurrency.test.ts: allocates `count` addresses for owners
 * `<worker>-<i>` from one network, many in flight at once, and prints them as JSON.
 *
 *   node --import tsx alloc-worker.ts <redisUrl> <prefix> <network> <worker> <count>
 */
import { Redis } from 'ioredis'
import { createIpam } from '../../lib/ipam/index.ts'

const [url = '', prefix = '', network = '', worker = '', countText = '0'] = process.argv.slice(2)
const count = Number(countText)
const redis = new Redis(url)
const ipam = createIpam(redis, { prefix })
const ips: string[] = new Array(count)
let next = 0
async function lane(): Promise<void> {
  while (next < count) {
    const i = next++
    ips[i] = (await ipam.allocate(network, `${worker}-${i}`)).ip
  }
}
await Promise.all(Array.from({ length: 32 }, lane))
redis.disconnect()
process.stdout.write(JSON.stringify(ips))
