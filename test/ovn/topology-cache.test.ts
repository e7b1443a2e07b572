import t, { type Test } from 'tap'
import {
  applyDesiredRows,
  applyGroupTopology,
  compileGroupTopology,
  Database,
  type GroupMember,
  type GroupTopologySpec,
  type NbTables,
  NbTopologyCache,
  nbSchema,
  OvsdbClient,
  readOwnedRows,
} from '../../lib/ovn/index.ts'
import { startOvsdb } from './ovsdb-fixture.ts'

const nb = new Database<NbTables>(nbSchema)
const member = (h: number, dpu = h % 3): GroupMember => ({
  hostName: `h${h}`,
  logicalPort: `hz-cache-h${h}`,
  mac: `0a:00:00:00:00:${(h + 2).toString(16).padStart(2, '0')}`,
  ip: `10.10.10.${h + 2}`,
  dpu: { id: `dpu-${dpu}` },
  access: 'None',
})
const spec = (members: GroupMember[]): GroupTopologySpec => ({
  name: 'cache',
  cidr: '10.10.10.0/24',
  gateway: '10.10.10.1',
  dummyFabricIp: '172.18.0.254/24',
  members,
})
/** Rows in a comparable form: sorted by UUID, set elements sorted, `_version` left out. */
const sorted = (rows: Record<string, readonly { _uuid: string }[]>) =>
  Object.fromEntries(
    Object.entries(rows).map(([table, list]) => [
      table,
      [...list]
        .map(({ _version: _v, ...row }: { _uuid: string; _version?: string }) =>
          Object.fromEntries(
            Object.entries(row).map(([k, v]) => [k, Array.isArray(v) ? [...v].sort() : v]),
          ),
        )
        .sort((a, b) => (String(a._uuid) < String(b._uuid) ? -1 : 1)),
    ]),
  )

t.test(
  'the monitor_cond cache holds what a fresh select reads, after every kind of change',
  async (t) => {
    const server = await startOvsdb(t)
    const client = await OvsdbClient.connect(server.unix)
    t.teardown(() => client.close())
    const cache = await NbTopologyCache.start(client)
    t.teardown(() => cache.close())
    const same = async (what: string) => {
      await client.echo()
      t.same(
        sorted(await cache.ownedRows('group/cache')),
        sorted(await readOwnedRows(client, 'group/cache')),
        what,
      )
    }

    await applyGroupTopology(client, spec([0, 1, 2, 3].map((h) => member(h))), { cache })
    await same('after the group is created')
    await applyGroupTopology(client, spec([0, 1, 2, 3, 4].map((h) => member(h))), { cache })
    await same('a port added to a switch (set insert)')
    await applyGroupTopology(client, spec([0, 2, 3, 4].map((h) => member(h))), { cache })
    await same('a port removed (set delete)')
    await applyGroupTopology(client, spec([0, 2, 3, 4].map((h) => member(h, 1))), { cache })
    await same('hosts moved between DPUs (maps changed, DPUs gone)')

    // By hand, as an operator might: a map key changed and removed, an optional scalar
    // set and cleared, a scalar changed.
    const [lsp] = (await readOwnedRows(client, 'group/cache')).Logical_Switch_Port.filter(
      (r) => r.name === 'hz-cache-h0',
    )
    const where = [['_uuid', '==', lsp?._uuid ?? '']] as const
    await client.transact(nb.name, [
      nb.mutate('Logical_Switch_Port', where, [
        ['external_ids', 'insert', { extra: 'a' }],
        ['options', 'insert', { 'requested-chassis': 'dpu-9' }],
      ]),
      nb.update('Logical_Switch_Port', where, { enabled: true, type: 'virtual' }),
    ])
    await same('map keys added, an optional scalar set, a scalar changed')
    await client.transact(nb.name, [
      nb.mutate('Logical_Switch_Port', where, [
        ['external_ids', 'delete', ['extra']],
        ['options', 'insert', { other: 'b' }],
      ]),
      nb.update('Logical_Switch_Port', where, { enabled: [] as never, type: '' }),
    ])
    await same('a map key removed, another added, the optional cleared')
    await client.transact(nb.name, [
      nb.update('Logical_Switch_Port', where, {
        options: { 'requested-chassis': 'dpu-8' },
        addresses: ['0a:00:00:00:00:99 10.10.10.99'],
      }),
    ])
    await same('a map value replaced, a set replaced')

    const result = await applyGroupTopology(client, spec([0, 2, 3, 4].map((h) => member(h, 1))), {
      cache,
    })
    t.ok(result.changed, 'the apply puts back the addresses changed by hand')
    await same('after the repair')
    const again = await applyGroupTopology(client, spec([0, 2, 3, 4].map((h) => member(h, 1))), {
      cache,
    })
    t.equal(again.changed, false, 'and then has nothing left to do')
  },
)

/**
 * An NB server, this process's client with its cache, and another process's client (an
 * operator, another controller) writing beside it; closed at teardown.
 */
async function twoWriters(t: Test) {
  const server = await startOvsdb(t)
  const client = await OvsdbClient.connect(server.unix)
  const other = await OvsdbClient.connect(server.unix)
  t.teardown(async () => {
    await client.close()
    await other.close()
  })
  const cache = await NbTopologyCache.start(client)
  t.teardown(() => cache.close())
  return { client, other, cache }
}

t.test(
  'a member another process added while this one read its desired rows is not undone',
  async (t) => {
    const { client, other, cache } = await twoWriters(t)
    await applyGroupTopology(client, spec([0, 1].map((h) => member(h))), { cache })
    await client.echo()

    // This process reads the group's members (0 and 1) from its store; meanwhile another
    // process stores member 2 and writes it to NB before this one commits.
    let reads = 0
    const desired = async () => {
      reads++
      const members = reads === 1 ? [0, 1] : [0, 1, 2]
      if (reads === 1) {
        await applyGroupTopology(other, spec([0, 1, 2].map((h) => member(h))))
        // This process's cache sees that write before it diffs.
        await client.echo()
      }
      return compileGroupTopology(spec(members.map((h) => member(h))))
    }
    const result = await applyDesiredRows(client, desired, { cache, group: 'cache' })
    t.equal(reads, 2, 'the desired rows were read again after NB changed under the read')
    t.equal(result.changed, false, 'and then matched NB: nothing to write')
    const ports = (await readOwnedRows(client, 'group/cache')).Logical_Switch_Port.map(
      (r) => r.name,
    )
    t.ok(ports.includes('hz-cache-h2'), "the other process's member is still in NB")
  },
)

t.test(
  'an apply that syncs first compares every row with NB as of the call, not as far as the cache got',
  async (t) => {
    const { client, other, cache } = await twoWriters(t)
    const desired = compileGroupTopology(spec([0, 1, 2].map((h) => member(h))))
    await applyDesiredRows(client, desired, { cache, group: 'cache' })
    await client.echo()

    // Ten times: a port deleted by another client (an operator by hand), then at once an
    // apply comparing every row, as reconcile's does.
    let restored = 0
    for (let round = 0; round < 10; round++) {
      const [port] = (await readOwnedRows(other, 'group/cache')).Logical_Switch_Port.filter(
        (r) => r.name === 'hz-cache-h1',
      )
      await other.transact(nb.name, [
        nb.mutate('Logical_Switch', [], [['ports', 'delete', ['uuid', port?._uuid ?? '']]]),
      ])
      cache.applied.delete('group/cache')
      const result = await applyDesiredRows(client, desired, { cache, group: 'cache', sync: true })
      if (result.ports.added.includes('hz-cache-h1')) restored++
    }
    t.equal(restored, 10, 'every apply saw the port gone and put it back')
  },
)
