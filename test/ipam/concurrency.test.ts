/**
 * Four processes allocate from one pool at once: every address is handed out exactly
 * once and the bitmap agrees with the owners.
 */
import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import t from 'tap'
import { PoolExhausted } from '../../lib/ipam/index.ts'
import { ipamFixture } from './fixture.ts'

const run = promisify(execFile)
const worker = fileURLToPath(new URL('./alloc-worker.ts', import.meta.url))
const fx = await ipamFixture(t)

t.test('4 processes × 2,500 allocations from one pool', async (t) => {
  const { ipam, prefix } = fx.ipam()
  // Exactly 10,000 allocatable addresses: 10.128.0.1 … 10.128.39.16.
  await ipam.createNetwork('big', {
    subnets: [
      {
        cidr: '10.128.0.0/18',
        gateway: '10.128.63.254',
        pools: [{ start: '10.128.0.1', end: '10.128.39.16' }],
      },
    ],
  })
  const outputs = await Promise.all(
    ['w0', 'w1', 'w2', 'w3'].map((w) =>
      run(process.execPath, ['--import', 'tsx', worker, fx.url, prefix, 'big', w, '2500'], {
        maxBuffer: 1 << 24,
        timeout: 120_000,
      }),
    ),
  )
  const ips = outputs.flatMap((o) => JSON.parse(o.stdout) as string[])
  t.equal(ips.length, 10_000)
  t.equal(new Set(ips).size, 10_000, 'no address handed out twice')
  t.equal(await ipam.allocatedCount('big'), 10_000)
  t.equal(
    await fx.redis.bitcount(`${prefix}{net:big}:pool:0:busy`),
    10_000,
    'the busy bitmap agrees',
  )
  t.equal(await fx.redis.hlen(`${prefix}{net:big}:holders`), 10_000)
  t.equal((await ipam.map('big')).subnets[0]?.pools[0]?.map, 'X'.repeat(10_000))
  await t.rejects(ipam.allocate('big', 'one-more'), PoolExhausted, 'the pool is exactly full')

  const owners = outputs.flatMap((_, w) => Array.from({ length: 2500 }, (_, i) => `w${w}-${i}`))
  const released = await Promise.all(owners.map((o) => ipam.release('big', o)))
  t.same(new Set(released), new Set(ips), 'every address comes back')
  t.equal(await ipam.allocatedCount('big'), 0)
  t.equal(await fx.redis.bitcount(`${prefix}{net:big}:pool:0:busy`), 0, 'the busy bitmap is clear')
  t.equal((await ipam.map('big')).subnets[0]?.pools[0]?.map, '.'.repeat(10_000))
})
