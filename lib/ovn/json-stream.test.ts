import t from 'tap'
import { JsonStreamError } from './errors.ts'
import { JsonStreamSplitter } from './json-stream.ts'

const messages = [
  { id: 1, method: 'echo', params: [] },
  { id: 2, result: [{ rows: [{ name: 'a "quoted" } brace {' }] }], error: null },
  { id: null, method: 'update', params: ['m1', { T: { u: { new: { s: 'back\\slash\\"' } } } }] },
  { id: 3, result: ['ünïcødé ☃ 😀', [1, [2, [3]]]], error: null },
]
const stream = Buffer.from(messages.map((m) => JSON.stringify(m)).join(' \n'))

t.test('every split point of the stream yields the same messages', async (t) => {
  for (let cut = 0; cut <= stream.length; cut++) {
    const split = new JsonStreamSplitter()
    const got = [...split.push(stream.subarray(0, cut)), ...split.push(stream.subarray(cut))]
    if (JSON.stringify(got) !== JSON.stringify(messages)) {
      t.fail(`cut at byte ${cut} gave ${JSON.stringify(got)}`)
      return
    }
  }
  t.pass('all split points agree')
})

t.test('one byte at a time', async (t) => {
  const split = new JsonStreamSplitter()
  const got: unknown[] = []
  for (let i = 0; i < stream.length; i++) got.push(...split.push(stream.subarray(i, i + 1)))
  t.same(got, messages)
})

t.test('several messages in one chunk, nothing left over', async (t) => {
  const split = new JsonStreamSplitter()
  t.same(split.push(stream), messages)
  t.same(split.push(Buffer.from('  ')), [])
})

t.test('garbage between messages is a protocol error', async (t) => {
  const split = new JsonStreamSplitter()
  t.throws(() => split.push(Buffer.from('{"a":1}x')), JsonStreamError)
})

t.test('a message over the size limit is refused', async (t) => {
  const split = new JsonStreamSplitter(16)
  t.throws(() => split.push(Buffer.from('{"a":"0123456789012345678901234"')), JsonStreamError)
})
