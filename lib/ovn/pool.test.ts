import t from 'tap'
import { RemotePool } from './pool.ts'

/** A pool of plain objects standing for connections: each opened one, and whether it is shut. */
function poolOfRecords() {
  const opened: { remote: string; shut: boolean }[] = []
  const pool = new RemotePool(
    async (remote) => {
      const connection = { remote, shut: false }
      opened.push(connection)
      return connection
    },
    async (connection) => {
      connection.shut = true
    },
  )
  return { pool, opened }
}

t.test('one connection per remote, shared, shut by close', async (t) => {
  const { pool, opened } = poolOfRecords()
  const [a, b] = await Promise.all([pool.get('unix:/a'), pool.get('unix:/a')])
  t.equal(a, b, 'callers of one remote share its connection')
  await pool.get('unix:/b')
  await pool.close()
  t.same(
    opened.map((c) => [c.remote, c.shut]),
    [
      ['unix:/a', true],
      ['unix:/b', true],
    ],
  )
})

t.test('once closed, a late caller gets PoolClosed and no connection is left open', async (t) => {
  const { pool, opened } = poolOfRecords()
  await pool.get('unix:/a')
  await pool.close()
  await t.rejects(pool.get('unix:/c'), { name: 'PoolClosed', remote: 'unix:/c' })
  t.ok(
    opened.every((c) => c.shut),
    'every connection the pool ever opened is shut',
  )
})
