import t from 'tap'
import { FreshRead } from './fresh-read.ts'

/** A source whose reads the test finishes by hand, each returning the value at its start. */
function source() {
  let value = 0
  const started: { at: number; finish: () => void }[] = []
  const fetch = () =>
    new Promise<number>((resolve) => {
      const at = value
      started.push({ at, finish: () => resolve(at) })
    })
  return {
    set: (v: number) => {
      value = v
    },
    started,
    fetch,
  }
}

const tick = () => new Promise((r) => setImmediate(r))

t.test(
  'one read at a time; callers during a read share the next, which began after they asked',
  async (t) => {
    const s = source()
    const reads = new FreshRead(s.fetch)
    const first = reads.read()
    await tick()
    t.equal(s.started.length, 1)
    // The route is added while the first read runs: those who ask now must not get it.
    s.set(1)
    const second = reads.read()
    const third = reads.read()
    await tick()
    t.equal(s.started.length, 1, 'no second read while the first runs')
    s.started[0]?.finish()
    t.equal(await first, 0)
    await tick()
    t.equal(s.started.length, 2, 'the waiting callers share one read')
    s.started[1]?.finish()
    t.equal(await second, 1, 'a read that began after the caller asked')
    t.equal(await third, 1)
  },
)

t.test('a failed read fails its callers only; the next caller gets a new read', async (t) => {
  let n = 0
  const reads = new FreshRead(async () => {
    n++
    if (n === 1) throw new Error('bgpd restarting')
    return n
  })
  await t.rejects(reads.read(), /bgpd restarting/)
  t.equal(await reads.read(), 2)
})

t.test('callers waiting behind a failed read still get their own read', async (t) => {
  let n = 0
  let fail: (e: Error) => void = () => {}
  const reads = new FreshRead(() => {
    n++
    if (n === 1) return new Promise<number>((_, reject) => (fail = reject))
    return Promise.resolve(n)
  })
  const first = reads.read()
  const second = reads.read()
  fail(new Error('dropped'))
  await t.rejects(first, /dropped/)
  t.equal(await second, 2)
})
