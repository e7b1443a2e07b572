/**
 * What a force-detached Fabric host's silent DPU may still announce, held for that DPU's
 * isolation, on a real Redis: the host's leaked addresses and public IPs are handed over
 * at once (never free in between), no other owner can take them meanwhile, a hold cut
 * between its steps and run again ends the same, and a release gives back exactly that
 * hold's addresses (a later hold of the same host name, or another host's, stays).
 */
import { Redis } from 'ioredis'
import t from 'tap'
import { createIpam } from '../../lib/ipam/index.ts'
import {
  holdUntilIsolated,
  isolationHoldOwner,
  parseIsolationHoldOwner,
  releaseIsolationHold,
  releaseIsolationHolds,
} from '../../lib/state/isolation-holds.ts'
import { StateStore } from '../../lib/state/store.ts'
import { withStack } from '../helpers/stack.ts'

const stack = await withStack(t, { redis: true })
const redis = new Redis(stack.redis?.url ?? '', { maxRetriesPerRequest: 1 })
t.teardown(() => redis.disconnect())

let n = 0
const fresh = async () => {
  n += 1
  const store = new StateStore(redis, `hz:{holds${n}}:`)
  const ipam = createIpam(redis, { prefix: `holds${n}:ipam:` })
  await ipam.registerPublicIp('203.0.113.5')
  await ipam.registerPublicIp('203.0.113.6')
  await ipam.registerPublicIp('2001:db8:ff::5')
  return { store, ipam }
}

t.test('the owner names its DPU, host and spec version', async (t) => {
  const owner = isolationHoldOwner('dpu-1', 'h1', 7)
  t.equal(owner, 'dpu:dpu-1:isolates:h1:7')
  t.same(parseIsolationHoldOwner(owner), { dpuId: 'dpu-1', host: 'h1', specVersion: 7 })
  t.equal(parseIsolationHoldOwner('h1'), undefined, 'a host name is no hold')
})

t.test('held at once, refused to others, given back on release', async (t) => {
  const deps = await fresh()
  const { store, ipam } = deps
  t.same(await store.fabricLeaks.claim('h1', ['10.0.0.5', '203.0.113.5']), { ok: true })
  t.equal(await ipam.allocatePublicIp('h1'), '203.0.113.5')
  t.equal(await ipam.allocatePublicIp('h1', 6), '2001:db8:ff::5')

  const hold = await holdUntilIsolated(deps, 'dpu-1', 'h1', 3)
  const owner = 'dpu:dpu-1:isolates:h1:3'
  t.same(hold, {
    owner,
    host: 'h1',
    addresses: ['10.0.0.5', '203.0.113.5'],
    publicIps: ['203.0.113.5', '2001:db8:ff::5'],
  })
  t.same(await store.fabricLeaks.heldBy('h1'), [], 'the host holds nothing itself')
  t.equal(await store.fabricLeaks.holderOf('10.0.0.5'), owner)
  t.equal(await ipam.publicIpOf('h1'), undefined)
  t.equal(await ipam.publicIpOf(owner), '203.0.113.5')
  t.equal(await ipam.publicIpOf(owner, 6), '2001:db8:ff::5')
  t.match(await store.fabricLeaks.claim('h2', ['10.0.0.5']), { ok: false, holder: owner })
  t.equal(await ipam.allocatePublicIp('h2'), '203.0.113.6', 'the held public IP is not lent')
  await t.rejects(
    ipam.allocatePublicIp('h3', 6),
    /public IPv6 addresses .* are allocated/,
    'nor the IPv6 one',
  )
  t.same(await holdUntilIsolated(deps, 'dpu-1', 'h1', 3), hold, 'again: the same')

  t.match(await releaseIsolationHold(deps, 'dpu-1', owner), {
    addresses: ['10.0.0.5', '203.0.113.5'],
    publicIps: ['203.0.113.5', '2001:db8:ff::5'],
  })
  t.equal(await store.fabricLeaks.holderOf('10.0.0.5'), undefined)
  t.equal(await ipam.publicIpOf(owner), undefined)
  t.equal(await ipam.allocatePublicIp('h3', 6), '2001:db8:ff::5', 'back in the pool')
  t.same(await store.dpus.isolationHolds('dpu-1'), [], 'no record left')
  t.match(
    await releaseIsolationHold(deps, 'dpu-1', owner),
    { addresses: [], publicIps: [] },
    'released twice: nothing more',
  )
})

t.test('a hold cut between its steps and run again ends the same', async (t) => {
  const deps = await fresh()
  const { store, ipam } = deps
  await store.fabricLeaks.claim('h1', ['10.0.0.5', '203.0.113.5'])
  await ipam.allocatePublicIp('h1')
  const owner = isolationHoldOwner('dpu-1', 'h1', 3)
  // Cut after the record and the leaks' move, before the public IP's.
  await store.dpus.recordIsolationHold('dpu-1', owner, 'h1')
  await store.fabricLeaks.transfer('h1', owner)
  const hold = await holdUntilIsolated(deps, 'dpu-1', 'h1', 3)
  t.same(hold.addresses, ['10.0.0.5', '203.0.113.5'])
  t.same(hold.publicIps, ['203.0.113.5'])
  t.equal(await ipam.publicIpOf(owner), '203.0.113.5')
  // A release cut after the leaks went back, before the public IP: run again.
  await store.fabricLeaks.release(owner)
  await releaseIsolationHold(deps, 'dpu-1', owner)
  t.equal(await ipam.publicIpOf(owner), undefined)
  t.same(await store.dpus.isolationHolds('dpu-1'), [])
})

t.test('each hold is its own: a release gives back only its addresses', async (t) => {
  const deps = await fresh()
  const { store, ipam } = deps
  await store.fabricLeaks.claim('h1', ['10.0.0.5'])
  await ipam.allocatePublicIp('h1')
  await holdUntilIsolated(deps, 'dpu-1', 'h1', 3)
  // The same name again on the same DPU, detached again before the first was confirmed.
  await store.fabricLeaks.claim('h1', ['10.0.0.9'])
  await ipam.allocatePublicIp('h1')
  await holdUntilIsolated(deps, 'dpu-1', 'h1', 5)
  await store.fabricLeaks.claim('h4', ['10.0.0.7'])
  await holdUntilIsolated(deps, 'dpu-2', 'h4', 1)

  await releaseIsolationHold(deps, 'dpu-1', isolationHoldOwner('dpu-1', 'h1', 3))
  t.equal(await store.fabricLeaks.holderOf('10.0.0.5'), undefined, "version 3's given back")
  t.equal(await store.fabricLeaks.holderOf('10.0.0.9'), 'dpu:dpu-1:isolates:h1:5', '5 stays')
  t.equal(await ipam.publicIpOf('dpu:dpu-1:isolates:h1:5'), '203.0.113.6')

  const gone = await releaseIsolationHolds(deps, 'dpu-1')
  t.same(
    gone.map((h) => h.owner),
    ['dpu:dpu-1:isolates:h1:5'],
    'the DPU leaving the inventory gives back the rest of its holds',
  )
  t.equal(await store.fabricLeaks.holderOf('10.0.0.9'), undefined)
  t.equal(await store.fabricLeaks.holderOf('10.0.0.7'), 'dpu:dpu-2:isolates:h4:1', "dpu-2's stay")
})
