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

t.test(
  'status writes from two writers at once lose no update, reading each try once',
  async (t) => {
    const stack = await withStack(t)
    const url = stack.redis?.url ?? ''
    const clients = [new Redis(url), new Redis(url)]
    const watcher = new Redis(url)
    t.teardown(() => {
      for (const c of [...clients, watcher]) c.disconnect()
    })
    const stores = clients.map((c) => new StateStore(c))
    const [first] = stores
    if (!first) throw new Error('no store')
    await first.groups.put('group-a', storedGroup('group-a').spec)
    const countOf = (conditions: readonly { type: string; message: string }[]) =>
      Number(conditions.find((c) => c.type === 'Count')?.message ?? '0')

    // What the writers ask the server (not what its scripts do): each try reads the object
    // once, then runs the compare-and-set script.
    const commands: string[] = []
    const monitor = await watcher.monitor()
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      const [name, ...rest] = args
      if (source === 'lua' || !name || !rest.some((a) => a.includes('group-a'))) return
      commands.push(name.toLowerCase())
    })
    const perWriter = 100
    await Promise.all(
      stores.map(async (store) => {
        for (let i = 0; i < perWriter; i++) {
          await store.groups.updateStatus('group-a', (g) => ({
            ...g.status,
            conditions: [
              {
                type: 'Count',
                status: 'True',
                reason: 'Counted',
                message: String(countOf(g.status.conditions) + 1),
                lastTransitionTime: new Date().toISOString(),
              },
            ],
          }))
        }
      }),
    )
    // The monitor hears of commands after they ran: this one tells it has heard them all.
    await clients[0]?.echo('group-a: done')
    while (!commands.includes('echo')) await new Promise((r) => setTimeout(r, 10))
    monitor.disconnect()
    const group = await first.groups.get('group-a')
    t.equal(countOf(group?.status.conditions ?? []), 2 * perWriter, 'every increment is there')
    const reads = commands.filter((c) => c === 'hgetall').length
    const scripts = commands.filter((c) => c === 'evalsha' || c === 'eval').length
    t.equal(commands.filter((c) => c === 'hget').length, 0, 'no separate read of the revision')
    t.ok(reads >= 2 * perWriter, `${reads} tries for ${2 * perWriter} writes`)
    // A script the server does not know yet is sent again: at most one more per writer.
    t.ok(scripts >= reads && scripts <= reads + stores.length, `one script per read (${scripts})`)
  },
)
