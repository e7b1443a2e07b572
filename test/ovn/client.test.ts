import { createServer } from 'node:net'
import { join } from 'node:path'
import t from 'tap'
import { OvsdbClient } from '../../lib/ovn/client.ts'
import { Database } from '../../lib/ovn/database.ts'
import {
  OvsdbCanceled,
  OvsdbConnectionError,
  OvsdbConstraintViolation,
  OvsdbReferentialIntegrityViolation,
  OvsdbRpcError,
  OvsdbTimedOut,
} from '../../lib/ovn/errors.ts'
import type { TableUpdates } from '../../lib/ovn/protocol.ts'
import { type NbTables, nbSchema } from '../../lib/ovn/schema/nb.generated.ts'
import { within } from '../../lib/process/within.ts'
import { tempDir } from '../helpers/stack.ts'
import { startOvsdb } from './ovsdb-fixture.ts'

const nb = new Database<NbTables>(nbSchema)
const NB = nb.name

t.test('transact over unix and tcp, pipelined on one connection', async (t) => {
  const server = await startOvsdb(t)
  for (const remote of [server.unix, server.tcp]) {
    const client = await OvsdbClient.connect(remote)
    t.teardown(() => client.close())
    t.ok((await client.listDbs()).includes(NB), `${remote} lists ${NB}`)
    const prefix = remote.startsWith('unix') ? 'u' : 't'
    const inserts = Array.from({ length: 50 }, (_, i) =>
      client.transact(NB, [
        nb.insert('Logical_Switch', { name: `${prefix}${i}`, external_ids: { n: String(i) } }),
      ]),
    )
    const results = await Promise.all(inserts)
    t.ok(
      results.every((r) => typeof r[0]?.uuid?.[1] === 'string'),
      'each insert returns a uuid',
    )
    const [sel] = await client.transact(NB, [
      nb.select('Logical_Switch', [['name', '==', `${prefix}7`]]),
    ])
    const rows = nb.decodeRows('Logical_Switch', sel?.rows)
    t.equal(rows.length, 1)
    t.same(rows[0]?.external_ids, { n: '7' })
    t.same(rows[0]?.ports, [])
  }
})

t.test('named-uuid references and decoding of sets', async (t) => {
  const server = await startOvsdb(t)
  const client = await OvsdbClient.connect(server.unix)
  t.teardown(() => client.close())
  await client.transact(NB, [
    nb.insert(
      'Logical_Switch_Port',
      { name: 'p1', addresses: ['00:00:00:00:00:01 10.0.0.2'] },
      'p1',
    ),
    nb.insert('Logical_Switch_Port', { name: 'p2' }, 'p2'),
    nb.insert('Logical_Switch', { name: 'ls', ports: ['p1', 'p2'] }),
  ])
  const [ls, ports] = await client.transact(NB, [
    nb.select('Logical_Switch', [['name', '==', 'ls']]),
    nb.select('Logical_Switch_Port', []),
  ])
  const lsRow = nb.decodeRows('Logical_Switch', ls?.rows)[0]
  const portRows = nb.decodeRows('Logical_Switch_Port', ports?.rows)
  t.same(
    new Set(lsRow?.ports),
    new Set(portRows.map((p) => p._uuid)),
    'switch references both ports',
  )
  t.same(portRows.find((p) => p.name === 'p1')?.addresses, ['00:00:00:00:00:01 10.0.0.2'])
})

t.test('RFC errors are typed and name the failing operation', async (t) => {
  const server = await startOvsdb(t)
  const client = await OvsdbClient.connect(server.unix)
  t.teardown(() => client.close())
  await client.transact(NB, [nb.insert('Address_Set', { name: 'dup' })])

  const dup = await client
    .transact(NB, [nb.comment('x'), nb.insert('Address_Set', { name: 'dup' })])
    .catch((e: unknown) => e)
  t.type(dup, OvsdbConstraintViolation, 'duplicate indexed name')
  t.match(dup, { code: 'OVSDB_CONSTRAINT_VIOLATION', op: 'commit', retryable: false })

  const dangling = await client
    .transact(NB, [
      nb.insert('Logical_Switch', {
        name: 'ls',
        ports: ['00000000-0000-0000-0000-000000000001'],
      }),
    ])
    .catch((e: unknown) => e)
  t.type(dangling, OvsdbReferentialIntegrityViolation, 'strong reference to a missing row')

  const waited = await client
    .transact(NB, [
      nb.comment('first'),
      nb.wait('Address_Set', [['name', '==', 'dup']], ['name'], []),
    ])
    .catch((e: unknown) => e)
  t.type(waited, OvsdbTimedOut)
  t.match(waited, { index: 1, op: 'wait', retryable: true })

  const unknownDb = await client.transact('Nope', []).catch((e: unknown) => e)
  t.type(unknownDb, OvsdbRpcError)

  const after = nb.decodeRows(
    'Logical_Switch',
    (await client.transact(NB, [nb.select('Logical_Switch', [])]))[0]?.rows,
  )
  t.same(after, [], 'failed transactions left nothing behind')
})

t.test('monitor delivers initial rows and later changes', async (t) => {
  const server = await startOvsdb(t)
  const client = await OvsdbClient.connect(server.unix)
  t.teardown(() => client.close())
  await client.transact(NB, [nb.insert('Logical_Switch', { name: 'before' })])
  const seen: { updates: TableUpdates; reset: boolean }[] = []
  const monitor = await client.monitor(
    NB,
    { Logical_Switch: { columns: ['name'] } },
    (updates, reset) => seen.push({ updates, reset }),
  )
  t.same(
    Object.values(monitor.initial.Logical_Switch ?? {}).map((r) => r.new?.name),
    ['before'],
  )
  const [ins] = await client.transact(NB, [nb.insert('Logical_Switch', { name: 'after' })])
  const uuid = ins?.uuid?.[1] ?? ''
  await waitFor(() => seen.length >= 2)
  t.same(seen[1], {
    updates: { Logical_Switch: { [uuid]: { new: { name: 'after' } } } },
    reset: false,
  })
  await monitor.cancel()
  await client.transact(NB, [nb.delete('Logical_Switch', [])])
  await client.echo()
  t.equal(seen.length, 2, 'no updates after cancel')
})

t.test('a monitor handler that throws is reported, and the client goes on', async (t) => {
  const server = await startOvsdb(t)
  const errors: unknown[] = []
  const client = await OvsdbClient.connect(server.unix, {
    onEvent: (e) => {
      if (e.type === 'monitor-error') errors.push(e.error)
    },
  })
  t.teardown(() => client.close())
  let calls = 0
  await client.monitor(NB, { Logical_Switch: { columns: ['name'] } }, (_u, reset) => {
    calls++
    if (!reset) throw new Error('handler bug')
  })
  await client.transact(NB, [nb.insert('Logical_Switch', { name: 'x' })])
  await waitFor(() => errors.length === 1)
  t.match(errors, [{ message: 'handler bug' }], 'the error reached onEvent')
  t.equal(calls, 2)
  const [row] = await client.transact(NB, [nb.select('Logical_Switch', [], ['name'])])
  t.same(row?.rows, [{ name: 'x' }], 'the client still answers requests')
})

t.test('reconnects after the server restarts, and re-monitors', async (t) => {
  const server = await startOvsdb(t)
  const events: string[] = []
  const client = await OvsdbClient.connect(server.tcp, {
    backoff: { initialMs: 20, maxMs: 200 },
    onEvent: (e) => events.push(e.type),
  })
  t.teardown(() => client.close())
  const resets: number[] = []
  await client.monitor(NB, { Logical_Switch: { columns: ['name'] } }, (u, reset) => {
    if (reset) resets.push(Object.keys(u.Logical_Switch ?? {}).length)
  })
  await client.transact(NB, [nb.insert('Logical_Switch', { name: 'kept' })])
  await server.restart()
  // Requests made while the client reconnects wait for the connection.
  const [sel] = await client.transact(NB, [nb.select('Logical_Switch', [])])
  t.same(
    nb.decodeRows('Logical_Switch', sel?.rows).map((r) => r.name),
    ['kept'],
  )
  await waitFor(() => resets.length >= 2)
  t.same(resets, [0, 1], 'monitor re-established with the current contents')
  t.ok(events.includes('disconnected') && events.lastIndexOf('connected') > 0)
})

t.test('a monitor cancelled while the server is gone ends at once and stays ended', async (t) => {
  const server = await startOvsdb(t)
  // A request to a lost server waits up to this long for it to come back.
  const client = await OvsdbClient.connect(server.tcp, {
    backoff: { initialMs: 20, maxMs: 200 },
    requestTimeoutMs: 60_000,
  })
  t.teardown(() => client.close())
  const resets: number[] = []
  const monitor = await client.monitor(
    NB,
    { Logical_Switch: { columns: ['name'] } },
    (_u, reset) => {
      if (reset) resets.push(1)
    },
  )
  await server.stop()
  await sleep(300) // the client has seen the connection drop and keeps trying
  const cancelled = await within(
    monitor.cancel().then(() => 'cancelled'),
    10_000,
    'still waiting after 10 s',
  )
  t.equal(cancelled, 'cancelled', 'cancel does not wait for the server to come back')
  await server.restart()
  await client.transact(NB, [nb.insert('Logical_Switch', { name: 'after' })])
  await sleep(200)
  t.same(resets, [1], 'the new connection does not start the cancelled monitor again')
})

t.test('in-flight requests fail with a retryable error when the connection drops', async (t) => {
  const server = await startOvsdb(t)
  const client = await OvsdbClient.connect(server.unix, { reconnect: false })
  t.teardown(() => client.close())
  // A wait with a long timeout is held by the server until the connection drops.
  const held = client
    .transact(NB, [
      nb.wait('Logical_Switch', [['name', '==', 'x']], ['name'], [{ name: 'x' }], {
        timeout: 60_000,
      }),
    ])
    .catch((e: unknown) => e)
  await sleep(100)
  await server.stop()
  const err = await held
  t.type(err, OvsdbConnectionError)
  t.match(err, { retryable: true })
})

t.test('a request made while the server is gone fails retryably within its timeout', async (t) => {
  const server = await startOvsdb(t)
  const client = await OvsdbClient.connect(server.tcp, {
    backoff: { initialMs: 20, maxMs: 200 },
    requestTimeoutMs: 300,
  })
  t.teardown(() => client.close())
  await server.stop()
  await sleep(300) // the client has seen the connection drop and keeps trying
  const started = Date.now()
  const err = await client.transact(NB, [nb.select('Logical_Switch', [])]).catch((e: unknown) => e)
  t.type(err, OvsdbConnectionError, 'it does not wait for the server for ever')
  t.match(err, { retryable: true, message: /not connected again within 300 ms/ })
  t.ok(Date.now() - started < 5_000, 'it gave up at about its timeout')
})

t.test('cancel aborts a held request', async (t) => {
  const server = await startOvsdb(t)
  const client = await OvsdbClient.connect(server.unix)
  t.teardown(() => client.close())
  const ac = new AbortController()
  const held = client
    .transact(
      NB,
      [nb.wait('Logical_Switch', [], ['name'], [{ name: 'never' }], { timeout: 60_000 })],
      { signal: ac.signal },
    )
    .catch((e: unknown) => e)
  await sleep(50)
  ac.abort()
  t.type(await held, OvsdbCanceled)
  t.ok((await client.listDbs()).length > 0, 'connection still usable')
})

t.test('answers server echo, and drops a silent server', async (t) => {
  const dir = await tempDir(t)
  const path = join(dir, 'fake.sock')
  let echoReply: unknown
  let silent = false
  const fake = createServer((sock) => {
    sock.on('data', (d) => {
      for (const line of d.toString().split(/(?<=})(?={)/)) {
        const msg = JSON.parse(line) as { id: unknown; method?: string; params?: unknown }
        if (msg.method === 'list_dbs') {
          sock.write(JSON.stringify({ id: msg.id, result: ['X'], error: null }))
          // Server-initiated echo, split across two writes.
          const echo = JSON.stringify({ id: 'e1', method: 'echo', params: ['ping'] })
          sock.write(echo.slice(0, 7))
          setTimeout(() => sock.write(echo.slice(7)), 10)
        } else if (msg.id === 'e1') {
          echoReply = msg
        } else if (msg.method === 'echo' && !silent) {
          sock.write(JSON.stringify({ id: msg.id, result: msg.params, error: null }))
        }
      }
    })
  })
  await new Promise<void>((r) => fake.listen(path, r))
  t.teardown(() => new Promise<void>((r) => fake.close(() => r())))
  const events: string[] = []
  const client = await OvsdbClient.connect(`unix:${path}`, {
    echoIntervalMs: 100,
    reconnect: false,
    onEvent: (e) => events.push(e.type),
  })
  t.teardown(() => client.close())
  t.same(await client.listDbs(), ['X'])
  await waitFor(() => echoReply !== undefined)
  t.same(echoReply, { id: 'e1', result: ['ping'], error: null })
  await sleep(300)
  t.ok(client.connected, 'echo replies keep an idle connection up')
  silent = true
  await waitFor(() => !client.connected, 2000)
  t.ok(events.includes('disconnected'), 'a server that stops answering echo is dropped')
})

async function waitFor(cond: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time')
    await sleep(10)
  }
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms))
}
