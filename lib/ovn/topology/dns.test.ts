import t from 'tap'
import type { Operation } from '../protocol.ts'
import { type ActualRow, type ActualRows, diffTopology } from './apply.ts'
import { CompileMemo, compileGroupTopology, type DesiredRows, TOPOLOGY_TABLES } from './compile.ts'
import { dnsDomain, hostDnsRecords, reverseName } from './dns.ts'
import { topologyNames } from './names.ts'
import type { GroupMember, GroupTopologySpec } from './spec.ts'

const ZONE = 'hydrazine.internal'

const member = (group: string, host: string, ip: string, extra: Partial<GroupMember> = {}) =>
  ({
    hostName: host,
    logicalPort: topologyNames.hostPort(group, host),
    mac: `0a:00:00:00:00:${(ip.match(/\d+$/)?.[0] ?? '0').padStart(2, '0').slice(-2)}`,
    ip,
    dpu: { id: 'dpu-1' },
    access: 'None',
    ...extra,
  }) satisfies GroupMember

const groupSpec = (name: string, members: GroupMember[], dns = true): GroupTopologySpec => ({
  name,
  cidr: '10.10.10.0/24',
  gateway: '10.10.10.1',
  extraSubnets: [{ cidr: 'fd00:10::/64', gateway: 'fd00:10::1' }],
  dummyFabricIp: '172.18.0.254/24',
  members,
  ...(dns ? { dns: { zone: ZONE } } : {}),
})

/** The DNS rows of a compile: row key → records, and the switch each hangs under. */
function dnsRowsOf(desired: DesiredRows) {
  return desired.rows.flatMap((r) =>
    r.table === 'DNS'
      ? [{ key: r.key, records: r.row.records ?? {}, parent: r.parent, ids: r.row.external_ids }]
      : [],
  )
}

t.test('names: the domain, each record, and reverse names of both families', async (t) => {
  t.equal(dnsDomain('group-a', ZONE), 'group-a.hydrazine.internal')
  t.same(hostDnsRecords('web', 'group-a.hydrazine.internal', '10.10.10.2'), {
    'web.group-a.hydrazine.internal': '10.10.10.2',
    web: '10.10.10.2',
    '2.10.10.10.in-addr.arpa': 'web.group-a.hydrazine.internal',
  })
  const cases: [string, string][] = [
    ['10.10.10.2', '2.10.10.10.in-addr.arpa'],
    ['192.0.2.255', '255.2.0.192.in-addr.arpa'],
    // As Python's ipaddress writes them (`reverse_pointer`).
    ['fd00:10::2', `2.${'0.'.repeat(23)}0.1.0.0.0.0.d.f.ip6.arpa`],
    ['2001:db8::', `${'0.'.repeat(24)}8.b.d.0.1.0.0.2.ip6.arpa`],
    ['::ffff:10.0.0.1', `1.0.0.0.0.0.a.0.f.f.f.f.${'0.'.repeat(20)}ip6.arpa`],
    // However it is written: capitals, leading zeros, no `::`.
    ['FD00:0010:0:0:0:0:0:2', `2.${'0.'.repeat(23)}0.1.0.0.0.0.d.f.ip6.arpa`],
    ['::', `${'0.'.repeat(32)}ip6.arpa`],
  ]
  for (const [ip, name] of cases) t.equal(reverseName(ip), name, ip)
  t.equal(reverseName('fd00:10::2').split('.').length, 34, '32 nibbles, then ip6.arpa')
})

t.test('compile: one DNS row per built host, in its own switch', async (t) => {
  const desired = compileGroupTopology(
    groupSpec('group-a', [
      member('group-a', 'web', '10.10.10.2'),
      member('group-a', 'db', 'fd00:10::5'),
    ]),
  )
  const rows = dnsRowsOf(desired)
  t.same(
    rows.map((r) => r.records),
    [
      {
        'web.group-a.hydrazine.internal': '10.10.10.2',
        web: '10.10.10.2',
        '2.10.10.10.in-addr.arpa': 'web.group-a.hydrazine.internal',
      },
      {
        'db.group-a.hydrazine.internal': 'fd00:10::5',
        db: 'fd00:10::5',
        [reverseName('fd00:10::5')]: 'db.group-a.hydrazine.internal',
      },
    ],
    'an IPv6 host gets its IPv6 address (AAAA)',
  )
  for (const r of rows) {
    t.same(r.parent, { table: 'Logical_Switch', key: 'ls', column: 'dns_records' })
    t.match(r.ids, { 'hydrazine:owner': 'group/group-a', 'hydrazine:group': 'group-a' })
  }
  t.same(
    rows.map((r) => [r.key, r.ids['hydrazine:host']]),
    [
      ['dns/web', 'web'],
      ['dns/db', 'db'],
    ],
    'keyed by host, so a detach deletes just its row',
  )
})

t.test('two groups with the same host names: each row names its own group', async (t) => {
  const a = compileGroupTopology(groupSpec('group-a', [member('group-a', 'web', '10.10.10.2')]))
  const b = compileGroupTopology(groupSpec('group-b', [member('group-b', 'web', '10.10.10.7')]))
  const [ra] = dnsRowsOf(a)
  const [rb] = dnsRowsOf(b)
  t.same(Object.keys(ra?.records ?? {}).sort(), [
    '2.10.10.10.in-addr.arpa',
    'web',
    'web.group-a.hydrazine.internal',
  ])
  t.equal(rb?.records['web.group-b.hydrazine.internal'], '10.10.10.7')
  t.equal(rb?.records.web, '10.10.10.7', "group-b's web is group-b's host")
  t.notOk('web.group-a.hydrazine.internal' in (rb?.records ?? {}), "no name of group-a's")
  t.equal(ra?.ids['hydrazine:owner'], 'group/group-a')
  t.equal(rb?.ids['hydrazine:owner'], 'group/group-b', "each owned by its group's switch")
})

t.test('what gets no record', async (t) => {
  const cases: { name: string; spec: GroupTopologySpec; records: string[]; problems?: RegExp }[] = [
    {
      name: 'a group without DNS',
      spec: groupSpec('g', [member('g', 'web', '10.10.10.2')], false),
      records: [],
    },
    {
      name: 'a host left out (its address is in no subnet)',
      spec: groupSpec('g', [member('g', 'web', '10.10.10.2'), member('g', 'x', '10.99.0.2')]),
      records: ['web'],
    },
    {
      name: 'a DNS name of its own, not the host name',
      spec: groupSpec('g', [member('g', 'host-1', '10.10.10.2', { dnsName: 'www' })]),
      records: ['www'],
    },
    {
      name: 'hosts that share a DNS name (none is the answer)',
      spec: groupSpec('g', [
        member('g', 'web', '10.10.10.2'),
        member('g', 'h2', '10.10.10.3', { dnsName: 'web' }),
        member('g', 'db', '10.10.10.4'),
      ]),
      records: ['db'],
      problems: /host web has the DNS name web, as h2 has; none of them gets a DNS record/,
    },
  ]
  for (const c of cases) {
    const desired = compileGroupTopology(c.spec)
    const short = dnsRowsOf(desired).flatMap((r) =>
      Object.keys(r.records).filter((k) => !k.includes('.')),
    )
    t.same(short, c.records, c.name)
    const dnsProblems = (desired.problems ?? []).filter((p) => p.code === 'DNS_NAME_CONFLICT')
    if (c.problems) {
      t.match(dnsProblems.map((p) => p.message).join('\n'), c.problems, `${c.name}: said`)
      t.same(dnsProblems.map((p) => p.host).sort(), ['h2', 'web'], 'both hosts are named')
    } else t.same(dnsProblems, [], `${c.name}: no DNS problem`)
  }
})

t.test('an invalid zone or DNS name is refused by the compiler', async (t) => {
  t.throws(() => compileGroupTopology({ ...groupSpec('g', []), dns: { zone: 'Bad_Zone.' } }), {
    code: 'TOPOLOGY_SPEC_INVALID',
  })
  t.throws(
    () =>
      compileGroupTopology(
        groupSpec('g', [member('g', 'web', '10.10.10.2', { dnsName: 'not a label' })]),
      ),
    { code: 'TOPOLOGY_SPEC_INVALID' },
  )
})

t.test('a memo reuses a host DNS row until the host or the zone changes', async (t) => {
  const memo = new CompileMemo()
  const web = member('g', 'web', '10.10.10.2')
  const rowOf = (d: DesiredRows) => d.rows.find((r) => r.table === 'DNS' && r.key === 'dns/web')
  const first = rowOf(compileGroupTopology(groupSpec('g', [web]), memo))
  const grown = compileGroupTopology(groupSpec('g', [web, member('g', 'db', '10.10.10.3')]), memo)
  t.equal(dnsRowsOf(grown).length, 2, 'a host joins: its row is added')
  t.equal(rowOf(grown), first, "and web's is the same row object (not rebuilt)")
  const moved = compileGroupTopology(groupSpec('g', [{ ...web, ip: '10.10.10.9' }]), memo)
  t.equal(dnsRowsOf(moved)[0]?.records.web, '10.10.10.9', 'a new address, a new record')
  const rezoned = compileGroupTopology(
    { ...groupSpec('g', [web]), dns: { zone: 'example.test' } },
    memo,
  )
  t.same(Object.keys(dnsRowsOf(rezoned)[0]?.records ?? {}).sort(), [
    '2.10.10.10.in-addr.arpa',
    'web',
    'web.g.example.test',
  ])
})

/** NB as it reads after `desired` was committed: parents refer to their children. */
function committed(desired: DesiredRows): ActualRows {
  const uuidOf = new Map(desired.rows.map((r, i) => [`${r.table}/${r.key}`, uuid(i + 1)]))
  const out = Object.fromEntries(TOPOLOGY_TABLES.map((table) => [table, [] as ActualRow[]]))
  for (const r of desired.rows) {
    const row: Record<string, unknown> = { ...r.row }
    for (const c of desired.rows) {
      if (c.parent?.table !== r.table || c.parent.key !== r.key) continue
      const refs = (row[c.parent.column] as string[] | undefined) ?? []
      row[c.parent.column] = [...refs, uuidOf.get(`${c.table}/${c.key}`)]
    }
    out[r.table]?.push({ _uuid: uuidOf.get(`${r.table}/${r.key}`) ?? '', _version: '0', ...row })
  }
  return out as unknown as ActualRows
}

function uuid(n: number): string {
  return `00000000-0000-4000-8000-${n.toString(16).padStart(12, '0')}`
}

/** The writes as `op table` lines, with the columns an update or mutate touches. */
function summary(ops: readonly Operation[]): string[] {
  return ops.map((op) => {
    const o = op as { op: string; table: string; row?: object; mutations?: [string, string][] }
    const what = o.row
      ? Object.keys(o.row).sort()
      : (o.mutations ?? []).map(([column, mutator]) => `${column} ${mutator}`)
    return `${o.op} ${o.table} ${what.join(',')}`
  })
}

t.test('diff: records follow the hosts; a detached host DNS row is deleted', async (t) => {
  const two = compileGroupTopology(
    groupSpec('g', [member('g', 'web', '10.10.10.2'), member('g', 'db', '10.10.10.3')]),
  )
  const nb = committed(two)
  t.same(diffTopology(two, nb).writes, [], 'in sync: nothing to write')

  const moved = compileGroupTopology(
    groupSpec('g', [member('g', 'web', '10.10.10.20'), member('g', 'db', '10.10.10.3')]),
  )
  const { writes: update, touched } = diffTopology(moved, nb)
  t.ok(touched.includes('DNS/dns/web'), 'an address change updates the record')
  t.ok(summary(update).includes('update DNS records'))

  const detached = compileGroupTopology(groupSpec('g', [member('g', 'db', '10.10.10.3')]))
  const { writes } = diffTopology(detached, nb)
  const ops = summary(writes)
  t.ok(ops.includes('delete DNS '), 'the DNS row (a root table) is deleted')
  t.ok(
    ops.some((o) => o.startsWith('mutate Logical_Switch') && o.includes('dns_records delete')),
    'and unhooked from the switch',
  )

  const off = compileGroupTopology(groupSpec('g', [member('g', 'db', '10.10.10.3')], false))
  const deletes = diffTopology(off, nb).writes.filter(
    (w) => (w as { op: string }).op === 'delete' && (w as { table: string }).table === 'DNS',
  )
  t.equal(deletes.length, 2, 'DNS turned off: every DNS row goes')

  const added = diffTopology(two, committed(detached))
  t.ok(summary(added.writes).includes('insert DNS external_ids,records'), 'a host joins: inserted')
  t.ok(
    summary(added.writes).some(
      (o) => o.startsWith('mutate Logical_Switch') && o.includes('dns_records insert'),
    ),
    'and hooked to the switch',
  )
})

t.test('with DNS on, queries from outside the group never meet its records', async (t) => {
  const guard = (spec: GroupTopologySpec) =>
    compileGroupTopology(spec).rows.find((r) => r.key === 'acl/ls/dns-from-outside')
  const on = guard(groupSpec('alpha', [member('alpha', 'web', '10.10.10.5')]))
  t.same(
    on?.parent,
    { table: 'Logical_Switch', key: 'ls', column: 'acls' },
    "on the group's switch",
  )
  t.match(on?.row, {
    direction: 'from-lport',
    action: 'drop',
    match: `inport == ${JSON.stringify(topologyNames.switchRouterPort('alpha'))} && udp.dst == 53 && ((ip4 && ip4.src != {10.10.10.0/24}) || (ip6 && ip6.src != {fd00:10::/64}))`,
  })
  t.notOk(guard(groupSpec('alpha', [], false)), 'with DNS off, hosts may serve DNS outside')
})
