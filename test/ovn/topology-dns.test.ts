/**
 * A group's DNS rows against a real NB ovsdb-server: applied, they are what the switch's
 * `dns_records` holds (through the monitor-fed cache as through a fresh read); applying
 * the same spec again commits nothing; a host's rename, a detach and DNS turned off are
 * each one small transaction; deleting the group deletes its DNS rows too (a root table:
 * nothing collects them) and leaves another group's alone. DNS changes held
 * (`holdDns`) touch no DNS row; the next compile that publishes writes them in one commit.
 */
import t from 'tap'
import {
  applyDesiredRows,
  applyGroupTopology,
  compileGroupTopology,
  Database,
  deleteGroupTopology,
  type GroupMember,
  type GroupTopologySpec,
  type NbTables,
  NbTopologyCache,
  nbSchema,
  OvsdbClient,
  topologyNames,
} from '../../lib/ovn/index.ts'
import { startOvsdb } from './ovsdb-fixture.ts'

const nb = new Database<NbTables>(nbSchema)
const ZONE = 'hydrazine.test'

const member = (group: string, host: string, n: number, dnsName?: string): GroupMember => ({
  hostName: host,
  logicalPort: topologyNames.hostPort(group, host),
  mac: `0a:00:00:00:00:${n.toString(16).padStart(2, '0')}`,
  ip: `10.10.10.${n}`,
  dpu: { id: 'dpu-1' },
  access: 'None',
  ...(dnsName ? { dnsName } : {}),
})
const spec = (group: string, members: GroupMember[], dns = true): GroupTopologySpec => ({
  name: group,
  cidr: '10.10.10.0/24',
  gateway: '10.10.10.1',
  dummyFabricIp: '172.18.0.254/24',
  members,
  ...(dns ? { dns: { zone: ZONE } } : {}),
})

/** Record names per switch, read back from NB through each switch's `dns_records`. */
async function namesIn(client: OvsdbClient) {
  const [switches, dns] = await client.transact(nb.name, [
    nb.select('Logical_Switch', [], ['name', 'dns_records']),
    nb.select('DNS', [], ['_uuid', 'records']),
  ])
  const records = new Map(
    nb.decodeRows('DNS', dns?.rows).map((r) => [r._uuid, Object.keys(r.records)]),
  )
  const out: Record<string, string[]> = {}
  for (const s of nb.decodeRows('Logical_Switch', switches?.rows)) {
    const names = s.dns_records.flatMap((uuid) => records.get(uuid) ?? [])
    if (names.length > 0) out[s.name] = names.sort()
  }
  return { bySwitch: out, rows: records.size }
}

t.test('DNS rows in a real NB: hung on their own switch, idempotent, removed', async (t) => {
  const server = await startOvsdb(t)
  const client = await OvsdbClient.connect(server.unix)
  t.teardown(() => client.close())
  const cache = await NbTopologyCache.start(client)
  t.teardown(() => cache.close())

  const namesBySwitch = () => namesIn(client)
  const a = (members: GroupMember[], dns = true) => spec('group-a', members, dns)
  const b = spec('group-b', [member('group-b', 'web', 21)])

  const first = await applyGroupTopology(client, a([member('group-a', 'web', 11)]), { cache })
  t.ok(first.touched.includes('DNS/dns/web'), 'the DNS row is inserted')
  await applyGroupTopology(client, b, { cache })
  t.same(await namesBySwitch(), {
    bySwitch: {
      [topologyNames.switch('group-a')]: [
        '11.10.10.10.in-addr.arpa',
        'web',
        'web.group-a.hydrazine.test',
      ],
      [topologyNames.switch('group-b')]: [
        '21.10.10.10.in-addr.arpa',
        'web',
        'web.group-b.hydrazine.test',
      ],
    },
    rows: 2,
  })
  const again = await applyGroupTopology(client, a([member('group-a', 'web', 11)]), { cache })
  t.equal(again.changed, false, 'the same spec again commits nothing (the cache reads DNS rows)')

  const renamed = await applyGroupTopology(
    client,
    a([member('group-a', 'web', 11, 'www'), member('group-a', 'db', 12)]),
    { cache },
  )
  t.same(
    renamed.touched.filter((id) => id.startsWith('DNS/')).sort(),
    ['DNS/dns/db', 'DNS/dns/web'],
    'a new host and a rename: two DNS rows touched',
  )
  t.same((await namesBySwitch()).bySwitch[topologyNames.switch('group-a')], [
    '11.10.10.10.in-addr.arpa',
    '12.10.10.10.in-addr.arpa',
    'db',
    'db.group-a.hydrazine.test',
    'www',
    'www.group-a.hydrazine.test',
  ])

  await applyGroupTopology(client, a([member('group-a', 'db', 12)]), { cache })
  t.equal((await namesBySwitch()).rows, 2, "a detach deletes the host's DNS row")
  await applyGroupTopology(client, a([member('group-a', 'db', 12)], false), { cache })
  const off = await namesBySwitch()
  t.same(Object.keys(off.bySwitch), [topologyNames.switch('group-b')], 'DNS off: group-a has none')
  t.equal(off.rows, 1, "and no group-a DNS row is left; group-b's stays")

  await applyGroupTopology(client, a([member('group-a', 'db', 12)]), { cache })
  await deleteGroupTopology(client, 'group-a', { cache })
  t.same(
    await namesBySwitch(),
    {
      bySwitch: {
        [topologyNames.switch('group-b')]: [
          '21.10.10.10.in-addr.arpa',
          'web',
          'web.group-b.hydrazine.test',
        ],
      },
      rows: 1,
    },
    "deleting group-a deletes its DNS rows; group-b's stay",
  )
})

t.test('DNS changes held, then published in one commit: one row in, one out', async (t) => {
  const server = await startOvsdb(t)
  const client = await OvsdbClient.connect(server.unix)
  t.teardown(() => client.close())
  const cache = await NbTopologyCache.start(client)
  t.teardown(() => cache.close())
  const records = async () => {
    const { bySwitch, rows } = await namesIn(client)
    return { names: bySwitch[topologyNames.switch('group-a')] ?? [], rows }
  }
  const web = member('group-a', 'web', 11)
  const db = member('group-a', 'db', 12)
  const app = member('group-a', 'app', 13)
  const apply = (members: GroupMember[], holdDns = false) =>
    applyDesiredRows(
      client,
      compileGroupTopology(spec('group-a', members), cache.compiled, { holdDns }),
      { cache, group: 'group-a' },
    )
  await apply([web, db])
  const before = await records()
  // Held: the new host's records wait, then the departed host's stay.
  for (const members of [
    [web, db, app],
    [web, app],
  ]) {
    const held = await apply(members, true)
    t.ok(held.changed, "the host's port is written")
    t.same(
      held.touched.filter((id) => id.startsWith('DNS/')),
      [],
      'no DNS row touched',
    )
    t.same(await records(), before, 'the records published stay as they were')
  }
  const swapped = await apply([web, app])
  t.same(
    swapped.touched.filter((id) => id.startsWith('DNS/')).sort(),
    ['DNS/dns/app', 'DNS/dns/db'],
    'one DNS row in, one out, in one commit',
  )
  t.same(
    await records(),
    {
      names: [
        '11.10.10.10.in-addr.arpa',
        '13.10.10.10.in-addr.arpa',
        'app',
        'app.group-a.hydrazine.test',
        'web',
        'web.group-a.hydrazine.test',
      ],
      rows: 2,
    },
    "the switch holds the new host's records and the staying host's, not the departed's",
  )
})
