/**
 * A connection closed while it is still trying to connect: its retries end at once, and
 * the server it was trying to reach never sees it (it neither connects later nor keeps a
 * socket and a keepalive timer open for a client that is gone, as a central stopped on
 * demand would otherwise see from every pool that had it).
 */
import { createServer, type Socket } from 'node:net'
import { join } from 'node:path'
import t from 'tap'
import { Connection } from '../../lib/ovn/connection.ts'
import { tempDir } from '../helpers/stack.ts'

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))

t.test('close() during the connect retries ends them, and nothing connects after', async (t) => {
  const path = join(await tempDir(t), 'nb.sock')
  const connection = new Connection(
    `unix:${path}`,
    { connectTimeoutMs: 10_000, backoff: { initialMs: 50, maxMs: 100 } },
    {
      message: () => {},
      lost: () => {},
      restored: () => {},
      keepalive: async () => undefined,
    },
  )
  const began = performance.now()
  const opened = connection.open().then(
    () => 'open',
    (error: unknown) => String(error),
  )
  await sleep(200)
  await connection.close()
  const outcome = await opened
  const took = performance.now() - began
  t.match(outcome, /client closed/, 'open() rejects: the client was closed')
  t.ok(took < 2000, `within ${Math.round(took)} ms, not at its 10 s connect deadline`)

  // The server it was trying to reach comes up: the closed client never connects to it.
  const accepted: Socket[] = []
  const server = createServer((socket) => {
    accepted.push(socket)
  })
  await new Promise<void>((resolve) => server.listen(path, resolve))
  t.teardown(
    () =>
      new Promise<void>((resolve) => {
        for (const socket of accepted) socket.destroy()
        server.close(() => resolve())
      }),
  )
  await sleep(500)
  t.equal(accepted.length, 0, 'no connection from the closed client')
  t.equal(connection.connected, false)
})
