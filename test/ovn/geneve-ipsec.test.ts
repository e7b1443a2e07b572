/**
 * `HYDRAZINE_GENEVE_IPSEC` in a central: `NB_Global.ipsec`, written by the controller's
 * NB connections (`NbPool`'s `prepare`) into a real NB ovsdb-server.
 */
import t from 'tap'
import { Database } from '../../lib/ovn/database.ts'
import { setGeneveIpsec } from '../../lib/ovn/geneve-ipsec.ts'
import { NbPool } from '../../lib/ovn/pool.ts'
import { type NbTables, nbSchema } from '../../lib/ovn/schema/nb.generated.ts'
import { startOvsdb } from './ovsdb-fixture.ts'

const nb = new Database<NbTables>(nbSchema)

t.test('NB_Global.ipsec follows the setting, in a new NB and an old one', async (t) => {
  const server = await startOvsdb(t)
  const readGlobal = async (pool: NbPool) => {
    const { client } = await pool.get(server.unix)
    const [selected] = await client.transact(nb.name, [nb.select('NB_Global', [])])
    return nb.decodeRows('NB_Global', selected?.rows)
  }

  const on = new NbPool({}, (client) => setGeneveIpsec(client, true))
  t.teardown(() => on.close())
  const rows = await readGlobal(on)
  t.equal(rows.length, 1, 'an NB without NB_Global (northd not started yet) gets one')
  t.equal(rows[0]?.ipsec, true, 'ipsec on before the connection is handed out')
  const { client } = await on.get(server.unix)
  t.notOk(await setGeneveIpsec(client, true), 'already so: nothing written')
  await on.drop(server.unix)

  const off = new NbPool({}, (client) => setGeneveIpsec(client, false))
  t.teardown(() => off.close())
  const after = await readGlobal(off)
  t.equal(after.length, 1, 'the same row')
  t.equal(after[0]?._uuid, rows[0]?._uuid)
  t.equal(after[0]?.ipsec, false, 'the setting turned off turns it off')
})

t.test('a connection whose preparation failed is closed and not handed out', async (t) => {
  const server = await startOvsdb(t)
  let tries = 0
  const pool = new NbPool({}, async () => {
    tries++
    if (tries === 1) throw new Error('refused once')
  })
  t.teardown(() => pool.close())
  await t.rejects(pool.get(server.unix), /refused once/)
  const connection = await pool.get(server.unix)
  t.ok(connection.client, 'the next get opens another')
  t.equal(tries, 2)
})
