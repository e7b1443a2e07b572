/**
 * Fabric groups' VNIs and VLAN ids against a real Redis: racing owners never share an
 * id, an owner asking again gets the same pair, a release gives both back, and an
 * exhausted pool refuses naming the setting that widens it.
 */
import { Redis } from 'ioredis'
import t from 'tap'
import {
  createIpam,
  FabricPoolExhausted,
  type FabricRanges,
  InvalidRequest,
} from '../../lib/ipam/index.ts'
import { ipamFixture } from './fixture.ts'

const fx = await ipamFixture(t)

const ranges = (vnis: [number, number], vlans: [number, number]): FabricRanges => ({
  vnis: { first: vnis[0], last: vnis[1], setting: 'HYDRAZINE_FABRIC_VNIS' },
  vlans: { first: vlans[0], last: vlans[1], setting: 'HYDRAZINE_FABRIC_VLANS' },
})

let n = 0
const pools = (r: FabricRanges, redis: Redis = fx.redis) => {
  const prefix = `fabric${++n}:`
  return { ipam: createIpam(redis, { prefix, fabric: r }), prefix }
}

t.test('the lowest free pair, the same one again, both given back', async (t) => {
  const { ipam } = pools(ranges([10000, 19999], [100, 3999]))
  t.same(await ipam.allocateFabricIds('group-a'), { vni: 10000, vlan: 100 })
  t.same(await ipam.allocateFabricIds('group-b'), { vni: 10001, vlan: 101 })
  t.same(await ipam.allocateFabricIds('group-a'), { vni: 10000, vlan: 100 }, 'idempotent')
  t.same(await ipam.fabricIdsOf('group-b'), { vni: 10001, vlan: 101 })
  t.same(await ipam.fabricIdsUsage(), { held: 2, size: 10000 })

  t.same(await ipam.releaseFabricIds('group-a'), { vni: 10000, vlan: 100 })
  t.equal(await ipam.releaseFabricIds('group-a'), undefined, 'releasing twice is a no-op')
  t.equal(await ipam.fabricIdsOf('group-a'), undefined)
  t.same(await ipam.allocateFabricIds('group-c'), { vni: 10000, vlan: 100 }, 'reused')
  t.same(await ipam.allocateFabricIds('group-b'), { vni: 10001, vlan: 101 }, 'kept')
})

t.test('a range moved or widened later keeps what is held', async (t) => {
  const first = pools(ranges([500, 501], [7, 7]))
  t.same(await first.ipam.allocateFabricIds('group-a'), { vni: 500, vlan: 7 })
  const moved = createIpam(fx.redis, {
    prefix: first.prefix,
    fabric: ranges([400, 600], [5, 9]),
  })
  t.same(await moved.allocateFabricIds('group-a'), { vni: 500, vlan: 7 }, 'same owner, same ids')
  t.same(await moved.allocateFabricIds('group-b'), { vni: 400, vlan: 5 }, 'the new range')
  t.same(await moved.allocateFabricIds('group-c'), { vni: 401, vlan: 6 })
  t.same(await moved.allocateFabricIds('group-d'), { vni: 402, vlan: 8 }, 'VLAN 7 is held')
})

t.test('an exhausted pool refuses naming its setting, and takes nothing', async (t) => {
  const { ipam } = pools(ranges([10000, 10002], [100, 101]))
  await ipam.allocateFabricIds('group-a')
  await ipam.allocateFabricIds('group-b')
  const vlans = await ipam.allocateFabricIds('group-c').catch((e: unknown) => e)
  t.ok(vlans instanceof FabricPoolExhausted, 'FabricPoolExhausted')
  t.match((vlans as Error).message, /no VLAN id is free.*HYDRAZINE_FABRIC_VLANS \(100-101\)/)
  t.match((vlans as Error).message, /widen HYDRAZINE_FABRIC_VLANS/)
  t.equal((vlans as FabricPoolExhausted).code, 'POOL_EXHAUSTED')
  t.equal(await ipam.fabricIdsOf('group-c'), undefined, 'no VNI taken either')
  t.same(await ipam.fabricIdsUsage(), { held: 2, size: 3 })

  const small = pools(ranges([10000, 10000], [100, 3999]))
  await small.ipam.allocateFabricIds('group-a')
  await t.rejects(small.ipam.allocateFabricIds('group-b'), {
    message: /no VNI is free.*widen HYDRAZINE_FABRIC_VNIS/,
  })
  await small.ipam.releaseFabricIds('group-a')
  t.same(await small.ipam.allocateFabricIds('group-b'), { vni: 10000, vlan: 100 }, 'freed')
})

t.test('4 connections × 100 groups racing for 300 VNIs', async (t) => {
  const r = ranges([20000, 20299], [1, 4094])
  const { prefix } = pools(r)
  const clients = Array.from({ length: 4 }, () => new Redis(fx.url, { maxRetriesPerRequest: 1 }))
  t.teardown(() => {
    for (const c of clients) c.disconnect()
  })
  const outcomes = await Promise.all(
    clients.flatMap((redis, w) => {
      const ipam = createIpam(redis, { prefix, fabric: r })
      return Array.from({ length: 100 }, (_, i) =>
        ipam.allocateFabricIds(`w${w}-g${i}`).then(
          (ids) => ({ owner: `w${w}-g${i}`, ids }),
          (error: unknown) => ({ owner: `w${w}-g${i}`, error }),
        ),
      )
    }),
  )
  const held = outcomes.flatMap((o) => ('ids' in o ? [o.ids] : []))
  const refused = outcomes.filter((o) => 'error' in o)
  t.equal(held.length, 300, 'the whole range handed out')
  t.equal(new Set(held.map((i) => i.vni)).size, 300, 'no VNI twice')
  t.equal(new Set(held.map((i) => i.vlan)).size, 300, 'no VLAN id twice')
  t.ok(
    held.every((i) => i.vni >= 20000 && i.vni <= 20299),
    'every VNI in the range',
  )
  t.equal(refused.length, 100)
  t.ok(
    refused.every((o) => 'error' in o && o.error instanceof FabricPoolExhausted),
    'the rest refused: exhausted',
  )
  t.equal(await fx.redis.bitcount(`${prefix}{fabric-ids}:vni:busy`), 300, 'the bitmap agrees')

  // Racing the same owners again: each gets back exactly what it holds.
  const ipam = createIpam(fx.redis, { prefix, fabric: r })
  const again = await Promise.all(
    outcomes.flatMap((o) => ('ids' in o ? [ipam.allocateFabricIds(o.owner)] : [])),
  )
  t.same(again, held, 'idempotent under load')
  await Promise.all(outcomes.map((o) => ipam.releaseFabricIds(o.owner)))
  t.equal(await fx.redis.bitcount(`${prefix}{fabric-ids}:vni:busy`), 0, 'all given back')
  t.same(await ipam.fabricIdsUsage(), { held: 0, size: 300 })
})

t.test('a range that is none, or an owner that cannot be a key, is refused', async (t) => {
  t.throws(() => createIpam(fx.redis, { fabric: ranges([5, 4], [1, 2]) }), InvalidRequest)
  const { ipam } = pools(ranges([1, 2], [1, 2]))
  await t.rejects(ipam.allocateFabricIds('a b'), InvalidRequest)
})
