import t from 'tap'
import {
  applyGroupTopology,
  compileGroupTopology,
  type GroupMember,
  type GroupTopologySpec,
  NbTopologyCache,
  OvsdbClient,
  readOwnedRows,
} from '../../lib/ovn/index.ts'
import { startOvsdb } from './ovsdb-fixture.ts'

const member = (h: number): GroupMember => ({
  hostName: `h${h}`,
  logicalPort: `hz-race-h${h}`,
  mac: `0a:00:00:00:00:${(h + 2).toString(16).padStart(2, '0')}`,
  ip: `10.10.10.${h + 2}`,
  dpu: { id: `dpu-${h}`, natIp: `172.18.0.${h + 100}` },
  access: 'FabricAccess',
})
const spec = (hosts: number[]): GroupTopologySpec => ({
  name: 'race',
  cidr: '10.10.10.0/24',
  gateway: '10.10.10.1',
  dummyFabricIp: '172.18.0.254/24',
  members: hosts.map(member),
})

t.test(
  'concurrent applies of one group from many clients converge without duplicates',
  async (t) => {
    const server = await startOvsdb(t)
    const clients = await Promise.all(
      Array.from({ length: 6 }, () => OvsdbClient.connect(server.unix)),
    )
    t.teardown(() => Promise.all(clients.map((c) => c.close())))
    const caches = await Promise.all(clients.slice(0, 3).map((c) => NbTopologyCache.start(c)))
    // Each worker attached "its" host after reading the full group: all pass the full state.
    const full = spec([0, 1, 2, 3, 4, 5])
    const results = await Promise.all(
      clients.map((c, i) => {
        const cache = caches[i]
        return applyGroupTopology(c, full, cache ? { cache } : {})
      }),
    )
    t.ok(
      results.some((r) => r.changed),
      'someone committed',
    )
    const actual = await readOwnedRows(clients[0] as OvsdbClient, 'group/race')
    const desired = compileGroupTopology(full)
    const count = Object.values(actual).reduce((n, rows) => n + rows.length, 0)
    t.equal(count, desired.rows.length, 'exactly the compiled rows, no duplicates')
    t.match(await applyGroupTopology(clients[1] as OvsdbClient, full), { changed: false })
    for (const c of caches) await c.close()
  },
)

t.test('interleaved attaches with the cache keep every host', async (t) => {
  const server = await startOvsdb(t)
  const a = await OvsdbClient.connect(server.unix)
  const b = await OvsdbClient.connect(server.tcp)
  t.teardown(() => Promise.all([a.close(), b.close()]))
  const cacheA = await NbTopologyCache.start(a)
  const hosts: number[] = []
  for (let h = 0; h < 10; h++) {
    hosts.push(h)
    await applyGroupTopology(
      h % 2 === 0 ? a : b,
      spec([...hosts]),
      h % 2 === 0 ? { cache: cacheA } : {},
    )
  }
  const actual = await readOwnedRows(b, 'group/race')
  t.equal(
    actual.Logical_Switch_Port.filter((r) => String(r.name).startsWith('hz-race-h')).length,
    10,
  )
  t.match(await applyGroupTopology(a, spec(hosts), { cache: cacheA }), { changed: false })
  await cacheA.close()
})
