/**
 * DNS changes held back (`holdDns`): while held, a new host's records wait and a departed
 * or changed host's stay published; the next compile that does not hold publishes both at
 * once. A first compile holds nothing.
 */
import t from 'tap'
import { CompileMemo, compileGroupTopology } from './compile.ts'
import { topologyNames } from './names.ts'
import type { GroupMember, GroupTopologySpec } from './spec.ts'

const member = (host: string, n: number): GroupMember => ({
  hostName: host,
  logicalPort: topologyNames.hostPort('group-a', host),
  mac: `0a:00:00:00:00:${n.toString(16).padStart(2, '0')}`,
  ip: `10.10.10.${n}`,
  dpu: { id: 'dpu-1' },
  access: 'None',
})
const spec = (members: GroupMember[]): GroupTopologySpec => ({
  name: 'group-a',
  cidr: '10.10.10.0/24',
  gateway: '10.10.10.1',
  dummyFabricIp: '172.18.0.254/24',
  members,
  dns: { zone: 'hydrazine.test' },
})

/** The published records: name → address, over every DNS row of the result. */
function records(rows: ReturnType<typeof compileGroupTopology>): Record<string, string> {
  const out: Record<string, string> = {}
  for (const r of rows.rows) {
    if (r.table !== 'DNS') continue
    Object.assign(out, r.row.records)
  }
  return out
}

t.test('held DNS changes wait for the next compile that publishes', async (t) => {
  const memo = new CompileMemo()
  const web = member('web', 11)
  const db = member('db', 12)

  const first = compileGroupTopology(spec([web]), memo, { holdDns: true })
  t.equal(records(first).web, '10.10.10.11', 'a first compile publishes, held or not')
  t.notOk(first.dnsHeld)

  const joined = compileGroupTopology(spec([web, db]), memo, { holdDns: true })
  t.notOk('db' in records(joined), "held: the new host's records wait")
  t.equal(records(joined).web, '10.10.10.11')
  t.ok(
    joined.rows.some((r) => r.table === 'Logical_Switch_Port' && r.key.includes('db')),
    'its port is there all the same',
  )
  t.equal(joined.dnsHeld, true, 'the result says something is held')

  const left = compileGroupTopology(spec([db]), memo, { holdDns: true })
  t.equal(records(left).web, '10.10.10.11', "held: a departed host's records stay")
  t.notOk('db' in records(left))
  t.notOk(
    left.rows.some((r) => r.table === 'Logical_Switch_Port' && r.key.includes('web')),
    'its port is gone at once',
  )

  const moved = compileGroupTopology(spec([{ ...db, ip: '10.10.10.13' }]), memo, {
    holdDns: true,
  })
  t.notOk('db' in records(moved), 'a host changed while held still waits')

  const published = compileGroupTopology(spec([{ ...db, ip: '10.10.10.13' }]), memo)
  t.same(
    records(published),
    {
      'db.group-a.hydrazine.test': '10.10.10.13',
      db: '10.10.10.13',
      '13.10.10.10.in-addr.arpa': 'db.group-a.hydrazine.test',
    },
    'the next compile that does not hold publishes it all: the departed gone, the waiting in',
  )
  t.notOk(published.dnsHeld)

  // The same host leaves and comes back while held: one row, the new one at the publish.
  compileGroupTopology(spec([]), memo, { holdDns: true })
  const back = compileGroupTopology(spec([{ ...db, ip: '10.10.10.14' }]), memo, { holdDns: true })
  t.equal(records(back).db, '10.10.10.13', 'its old record, still published')
  t.equal(back.rows.filter((r) => r.table === 'DNS').length, 1, 'one DNS row')
  const again = compileGroupTopology(spec([{ ...db, ip: '10.10.10.14' }]), memo)
  t.equal(records(again).db, '10.10.10.14')
  t.equal(again.rows.filter((r) => r.table === 'DNS').length, 1)
})

t.test('a compile without a previous one holds nothing', async (t) => {
  const fresh = compileGroupTopology(
    spec([member('web', 11), member('db', 12)]),
    new CompileMemo(),
    {
      holdDns: true,
    },
  )
  t.same(Object.keys(records(fresh)).sort(), [
    '11.10.10.10.in-addr.arpa',
    '12.10.10.10.in-addr.arpa',
    'db',
    'db.group-a.hydrazine.test',
    'web',
    'web.group-a.hydrazine.test',
  ])
  t.notOk(fresh.dnsHeld)
})

t.test('whatever was held, a compile that publishes equals a fresh compile', async (t) => {
  // A host renamed, another taking the freed name, a third leaving: each step held or not.
  const web = member('web', 11)
  const db = member('db', 12)
  const www = { ...web, dnsName: 'www' }
  const web2 = { ...member('web2', 14), dnsName: 'web' }
  const steps = [
    [web, db],
    [www, db],
    [www, db, web2],
    [www, web2],
  ]
  const byId = (rows: ReturnType<typeof compileGroupTopology>) =>
    Object.fromEntries(rows.rows.map((r) => [`${r.table}/${r.key}`, r]))
  for (let holds = 0; holds < 1 << (steps.length - 1); holds++) {
    const memo = new CompileMemo()
    compileGroupTopology(spec(steps[0] ?? []), memo)
    for (const [i, members] of steps.slice(1).entries()) {
      const held = (holds & (1 << i)) !== 0
      const out = compileGroupTopology(spec(members), memo, { holdDns: held })
      if (!held) t.same(byId(out), byId(compileGroupTopology(spec(members))), `${holds}/${i}`)
    }
    const last = steps.at(-1) ?? []
    const published = compileGroupTopology(spec(last), memo)
    t.notOk(published.dnsHeld)
    t.same(byId(published), byId(compileGroupTopology(spec(last))), `holds ${holds}: published`)
    t.same(
      records(published),
      {
        'www.group-a.hydrazine.test': '10.10.10.11',
        www: '10.10.10.11',
        '11.10.10.10.in-addr.arpa': 'www.group-a.hydrazine.test',
        'web.group-a.hydrazine.test': '10.10.10.14',
        web: '10.10.10.14',
        '14.10.10.10.in-addr.arpa': 'web.group-a.hydrazine.test',
      },
      `holds ${holds}: the renamed host, the one on its old name, not the one gone`,
    )
  }
})

t.test('random steps, held or not: every compile that publishes equals a fresh one', async (t) => {
  // A small seeded generator: the same steps on every run.
  let seed = 0x2f6e2b1
  const next = (n: number) => {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0
    return (seed >>> 8) % n
  }
  const hosts = ['h0', 'h1', 'h2', 'h3']
  const names = ['a', 'b', 'c']
  const byId = (rows: ReturnType<typeof compileGroupTopology>) =>
    Object.fromEntries(rows.rows.map((r) => [`${r.table}/${r.key}`, r]))
  let mismatches = 0
  for (let run = 0; run < 150; run++) {
    const memo = new CompileMemo()
    let members = new Map<string, GroupMember>()
    for (let step = 0; step < 10; step++) {
      const host = hosts[next(hosts.length)] as string
      const n = 20 + hosts.indexOf(host)
      const known = members.get(host)
      members = new Map(members)
      switch (next(4)) {
        case 0: // join, or leave
          if (known) members.delete(host)
          else members.set(host, member(host, n))
          break
        case 1: // a new DNS name (two hosts may clash: neither gets records)
          members.set(host, { ...(known ?? member(host, n)), dnsName: names[next(3)] as string })
          break
        case 2: // a new address
          members.set(host, { ...(known ?? member(host, n)), ip: `10.10.10.${n + 10 * next(3)}` })
          break
        default: // nothing of this host changes
      }
      const current = spec([...members.values()])
      const held = next(3) !== 0
      const out = compileGroupTopology(current, memo, { holdDns: held })
      if (held) continue
      const same = JSON.stringify(byId(out)) === JSON.stringify(byId(compileGroupTopology(current)))
      if (!same) mismatches++
    }
    const last = spec([...members.values()])
    const published = compileGroupTopology(last, memo)
    if (JSON.stringify(byId(published)) !== JSON.stringify(byId(compileGroupTopology(last))))
      mismatches++
    if (published.dnsHeld) mismatches++
  }
  t.equal(mismatches, 0, 'no compile that publishes differs from a fresh compile of its spec')
})
