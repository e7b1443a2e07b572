/**
 * A DPU's pending isolations on a real Redis: one entry per binding (host, group, spec
 * version), so a host of the same name marked again adds an entry and overwrites none;
 * clearing one leaves the others; an entry kept under its host's name (as stores before
 * kept them) reads as one entry and clears by that name.
 */
import { Redis } from 'ioredis'
import t from 'tap'
import { isolationMark, type StaleBinding } from '../../lib/state/dpus.ts'
import { StateStore } from '../../lib/state/store.ts'
import { withStack } from '../helpers/stack.ts'

const stack = await withStack(t, { redis: true })
const redis = new Redis(stack.redis?.url ?? '', { maxRetriesPerRequest: 1 })
t.teardown(() => redis.disconnect())

let n = 0
const fresh = () => {
  n += 1
  const prefix = `hz:{marks${n}}:`
  return { store: new StateStore(redis, prefix), key: `${prefix}dpu:dpu-1:needs-isolation` }
}

const binding = (group: string, specVersion: number): StaleBinding => ({
  group,
  host: 'twin',
  logicalPort: `lsp-${group}-twin`,
  specVersion,
})

t.test('an entry names its host, spec version and group', async (t) => {
  t.equal(isolationMark(binding('tenant-a/net', 4)), 'twin:v4:tenant-a/net')
  t.not(isolationMark(binding('g1', 4)), isolationMark(binding('g2', 4)), 'apart by group')
  t.not(isolationMark(binding('g1', 4)), isolationMark(binding('g1', 5)), 'and by version')
})

t.test('a host of the same name marked twice: two entries, each cleared alone', async (t) => {
  const { store } = fresh()
  await store.dpus.markNeedsIsolation('dpu-1', binding('group-a', 3))
  await store.dpus.markNeedsIsolation('dpu-1', binding('group-b', 5))
  await store.dpus.markNeedsIsolation('dpu-1', binding('group-a', 3))
  const pending = await store.dpus.needsIsolation('dpu-1')
  t.match(
    pending,
    [
      { host: 'twin', group: 'group-a', specVersion: 3, mark: 'twin:v3:group-a' },
      { host: 'twin', group: 'group-b', specVersion: 5, mark: 'twin:v5:group-b' },
    ],
    'both kept, oldest first; marking one again adds nothing',
  )
  t.equal(pending.length, 2)
  await store.dpus.clearNeedsIsolation('dpu-1', 'twin:v5:group-b')
  t.match(await store.dpus.needsIsolation('dpu-1'), [{ group: 'group-a', specVersion: 3 }])
  t.equal((await store.dpus.needsIsolation('dpu-1')).length, 1, 'the other stays')
})

t.test('an entry kept under the host name alone is still one to isolate', async (t) => {
  const { store, key } = fresh()
  // As a store before per-binding entries wrote it.
  await redis.hset(key, 'twin', JSON.stringify(binding('group-a', 3)))
  await store.dpus.markNeedsIsolation('dpu-1', binding('group-b', 5))
  t.match(await store.dpus.needsIsolation('dpu-1'), [
    { host: 'twin', group: 'group-a', specVersion: 3, mark: 'twin' },
    { host: 'twin', group: 'group-b', specVersion: 5, mark: 'twin:v5:group-b' },
  ])
  await store.dpus.clearNeedsIsolation('dpu-1', 'twin')
  t.match(await store.dpus.needsIsolation('dpu-1'), [{ group: 'group-b', mark: 'twin:v5:group-b' }])
  t.equal((await store.dpus.needsIsolation('dpu-1')).length, 1, 'the new entry stays')
})
