/**
 * A status change and the events it makes are written together (one script): whoever
 * reads the new status, or hears of it in the change log, finds its events already there.
 */
import { Redis } from 'ioredis'
import t from 'tap'
import { StateStore } from '../../lib/state/store.ts'
import { storedGroup } from '../helpers/objects.ts'
import { withStack } from '../helpers/stack.ts'

t.test('every status a reader sees has its events', async (t) => {
  const stack = await withStack(t)
  const url = stack.redis?.url ?? ''
  const writer = new Redis(url)
  const reader = new Redis(url)
  t.teardown(() => {
    writer.disconnect()
    reader.disconnect()
  })
  const store = new StateStore(writer)
  const readerStore = new StateStore(reader)
  await store.groups.put('group-a', storedGroup('group-a').spec)

  // Each write names its step in a condition's reason, so its event is told apart.
  const stepOf = (i: number) => `Step${i}`
  let writing = true
  const missing: string[] = []
  let checked = 0
  // Reads status then events, as a client would, while the writer goes on.
  const readLoop = (async () => {
    while (writing) {
      const group = await readerStore.groups.get('group-a')
      const step = group?.status.conditions.find((c) => c.type === 'Step')?.reason
      if (step === undefined) continue
      const events = await readerStore.events.list('rg', 'group-a')
      checked++
      if (!events.some((e) => e.reason === step)) missing.push(step)
    }
  })()
  for (let i = 1; i <= 300; i++) {
    const at = new Date().toISOString()
    await store.groups.updateStatus('group-a', (g) => ({
      ...g.status,
      conditions: [
        { type: 'Step', status: 'True', reason: stepOf(i), message: '', lastTransitionTime: at },
      ],
    }))
  }
  writing = false
  await readLoop
  t.ok(checked > 50, `the reader looked ${checked} times`)
  t.same(missing.slice(0, 5), [], 'no status was seen before its event')
  const newest = await readerStore.events.list('rg', 'group-a', 2)
  t.same(
    newest.map((e) => e.reason),
    [stepOf(300), stepOf(299)],
    'the last two changes, newest first',
  )
})
