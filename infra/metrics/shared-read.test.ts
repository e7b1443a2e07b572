import t from 'tap'
import { sharedRead } from './shared-read.ts'

t.test(
  'calls while a read runs, and shortly after, share it; later calls read again',
  async (t) => {
    let reads = 0
    const read = sharedRead(async () => ++reads, 50)
    t.same(await Promise.all([read(), read(), read()]), [1, 1, 1], 'one read for three callers')
    t.equal(await read(), 1, 'reused just after')
    await new Promise((r) => setTimeout(r, 80))
    t.equal(await read(), 2, 'read again once it is old')

    let attempts = 0
    const failing = sharedRead(async () => {
      attempts++
      throw new Error('redis down')
    }, 0)
    await t.rejects(Promise.all([failing(), failing()]), /redis down/)
    t.equal(attempts, 1, 'a failure is shared too')
    await t.rejects(failing(), /redis down/)
    t.equal(attempts, 2, 'and not kept')
  },
)
