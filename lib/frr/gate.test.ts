import t from 'tap'
import { createChangeGate } from './index.ts'

/** A promise the test settles by hand. */
function deferred() {
  let resolve: () => void = () => {}
  const promise = new Promise<void>((r) => {
    resolve = r
  })
  return { promise, resolve }
}

const tick = () => new Promise<void>((r) => setImmediate(r))

t.test('changes run together; a resync waits for them and runs alone', async (t) => {
  const gate = createChangeGate()
  const log: string[] = []
  const first = deferred()
  const second = deferred()
  const a = gate.change(async () => {
    log.push('a start')
    await first.promise
    log.push('a end')
  })
  const b = gate.change(async () => {
    log.push('b start')
    await second.promise
    log.push('b end')
  })
  await tick()
  t.same(log, ['a start', 'b start'], 'two changes in flight at once')

  const resync = gate.alone(async () => {
    log.push('resync')
    return 'result'
  })
  const late = gate.change(async () => {
    log.push('late')
  })
  await tick()
  first.resolve()
  await tick()
  t.same(log, ['a start', 'b start', 'a end'], 'the resync waits for every change in flight')
  second.resolve()
  t.equal(await resync, 'result')
  await Promise.all([a, b, late])
  t.same(
    log,
    ['a start', 'b start', 'a end', 'b end', 'resync', 'late'],
    'a change that came while the resync waited runs after it',
  )
})

t.test('resyncs run one at a time; a failed one frees the gate', async (t) => {
  const gate = createChangeGate()
  const log: string[] = []
  const held = deferred()
  const one = gate.alone(async () => {
    log.push('one start')
    await held.promise
    log.push('one end')
  })
  const two = gate.alone(async () => {
    log.push('two')
    throw new Error('FRR is down')
  })
  await tick()
  t.same(log, ['one start'])
  held.resolve()
  await one
  await t.rejects(two, /FRR is down/)
  t.equal(await gate.change(async () => 'after'), 'after', 'changes run again')
  t.same(log, ['one start', 'one end', 'two'])
})

t.test('a steady stream of changes does not starve a resync', async (t) => {
  const gate = createChangeGate()
  let stop = false
  let changes = 0
  // Two overlapping loops: some change is always in flight.
  const loop = async () => {
    while (!stop)
      await gate.change(async () => {
        changes++
        await tick()
      })
  }
  const loops = [loop(), loop()]
  await tick()
  const timeout = new Promise<string>((r) => setTimeout(() => r('starved'), 2000).unref())
  const ran = await Promise.race([gate.alone(async () => `ran after ${changes} changes`), timeout])
  stop = true
  await Promise.all(loops)
  t.match(ran, /^ran after \d+ changes$/, 'the resync ran while changes kept coming')
})
