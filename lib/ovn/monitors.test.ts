import t from 'tap'
import { Monitors } from './monitors.ts'

/**
 * A request function whose replies the test gives by hand, as a socket would: the reply
 * and the notifications behind it in the same read are handled in one go, before any
 * awaiter of the reply runs.
 */
function fakeServer() {
  const sent: { method: string; params: readonly unknown[]; reply: (r: unknown) => void }[] = []
  const fail: ((error: Error) => void)[] = []
  const request = (method: string, params: readonly unknown[]) =>
    new Promise<unknown>((resolve, reject) => {
      sent.push({ method, params, reply: resolve })
      fail.push(reject)
    })
  return { sent, fail, request }
}

const cases = [
  { method: 'monitor', notify: 'update', start: 'start' },
  { method: 'monitor_cond', notify: 'update2', start: 'startCond' },
] as const

for (const { method, notify, start } of cases) {
  t.test(
    `${method}: an update read right behind the reply comes after the initial contents`,
    async (t) => {
      const server = fakeServer()
      const monitors = new Monitors(server.request, (e) => t.fail(String(e)))
      const seen: [unknown, boolean][] = []
      const started = monitors[start]('DB', { T: {} }, (u: unknown, reset: boolean) =>
        seen.push([u, reset]),
      )
      const [request] = server.sent
      t.equal(request?.method, method)
      const id = request?.params[1]
      request?.reply({ T: { a: 'initial' } })
      monitors[notify]([id, { T: { b: 'next' } }])
      await started
      monitors[notify]([id, { T: { c: 'later' } }])
      t.same(seen, [
        [{ T: { a: 'initial' } }, true],
        [{ T: { b: 'next' } }, false],
        [{ T: { c: 'later' } }, false],
      ])
    },
  )

  t.test(
    `${method}: after a reconnect, what arrives before the new initial contents comes after them`,
    async (t) => {
      const server = fakeServer()
      const monitors = new Monitors(server.request, (e) => t.fail(String(e)))
      const seen: [unknown, boolean][] = []
      const started = monitors[start]('DB', { T: {} }, (u: unknown, reset: boolean) =>
        seen.push([u, reset]),
      )
      server.sent[0]?.reply({})
      await started
      const id = server.sent[0]?.params[1]
      monitors.resubscribe()
      t.equal(server.sent[1]?.params[1], id, 'the same monitor is asked for again')
      server.sent[1]?.reply({ T: { a: 'again' } })
      monitors[notify]([id, { T: { b: 'next' } }])
      await Promise.resolve()
      t.same(seen, [
        [{}, true],
        [{ T: { a: 'again' } }, true],
        [{ T: { b: 'next' } }, false],
      ])
    },
  )
}

t.test('a monitor the server refused hears nothing', async (t) => {
  const server = fakeServer()
  const monitors = new Monitors(server.request, (e) => t.fail(String(e)))
  let calls = 0
  const started = monitors.start('DB', { T: {} }, () => calls++)
  const id = server.sent[0]?.params[1]
  server.fail[0]?.(new Error('unknown table'))
  await t.rejects(started, /unknown table/)
  monitors.update([id, { T: { b: 'next' } }])
  monitors.resubscribe()
  t.equal(calls, 0)
  t.equal(server.sent.length, 1, 'not asked for again after a reconnect')
})
