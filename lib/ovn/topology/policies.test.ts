import t from 'tap'
import {
  BASELINE_PRIORITY,
  CompileMemo,
  compileGroupTopology,
  type DesiredRow,
  diffTopology,
  emptyRows,
  type GroupMember,
  type GroupPolicyRule,
  type GroupTopologySpec,
  InvalidTopologySpec,
  policyNames,
  RULE_PRIORITY_TOP,
  topologyNames,
} from '../index.ts'

const member = (host: string, ip: string): GroupMember => ({
  hostName: host,
  logicalPort: topologyNames.hostPort('alpha', host),
  mac: `0a:00:00:00:00:${ip.split(/[.:]/).at(-1)?.padStart(2, '0')}`,
  ip,
  dpu: { id: 'dpu-1' },
  access: 'None',
})

const spec = (policies: GroupPolicyRule[], name = 'alpha'): GroupTopologySpec => ({
  name,
  cidr: '10.10.10.0/24',
  gateway: '10.10.10.1',
  extraSubnets: [{ cidr: 'fd00:10::/64', gateway: 'fd00:10::1' }],
  dummyFabricIp: '172.18.0.254/24',
  members: [
    member('a', '10.10.10.2'),
    member('b', '10.10.10.3'),
    member('c', 'fd00:10::4'),
    member('far', '10.99.0.5'), // in none of the group's subnets: left out
  ],
  policies,
})

const rule = (extra: Partial<GroupPolicyRule> = {}): GroupPolicyRule => ({
  name: 'r',
  direction: 'ingress',
  action: 'deny',
  protocol: 'any',
  priority: 100,
  ...extra,
})

type Row = DesiredRow & { links?: { ids: readonly string[] } }
/** The policies' ACLs (not the public switches' fabric guard). */
const isPolicyAcl = (r: DesiredRow) => r.table === 'ACL' && r.parent?.table === 'Port_Group'
const aclsOf = (rows: readonly DesiredRow[]) =>
  rows.flatMap((r) => (r.table === 'ACL' && r.parent?.table === 'Port_Group' ? [r.row] : []))
const all = policyNames.all('alpha')
const port = (h: string) => `Logical_Switch_Port/lsp/${topologyNames.hostPort('alpha', h)}`

t.test('no rules: no port group, no ACL, no policy status', async (t) => {
  const { policies: _none, ...without } = spec([])
  for (const s of [without, spec([])]) {
    const out = compileGroupTopology(s)
    t.notOk(out.rows.some((r) => r.table === 'Port_Group' || isPolicyAcl(r)))
    t.notOk('policies' in out)
  }
})

t.test('one port group of every built host, with the allow-related baseline', async (t) => {
  const out = compileGroupTopology(spec([rule()]))
  const pg = out.rows.find((r) => r.table === 'Port_Group' && r.key === 'pg/all') as Row
  t.equal((pg.row as { name?: string }).name, all)
  t.same(pg.links?.ids, [port('a'), port('b'), port('c')], 'the left-out host is not in it')
  t.same(aclsOf(out.rows)[0], {
    direction: 'to-lport',
    priority: BASELINE_PRIORITY,
    match: `outport == @${all} && ip`,
    action: 'allow-related',
    external_ids: {
      'hydrazine:owner': 'group/alpha',
      'hydrazine:group': 'alpha',
      'hydrazine:key': 'acl/pg/all/baseline',
    },
  })
  t.ok(
    out.rows.every((r) => r.row.external_ids['hydrazine:owner'] === 'group/alpha'),
    'every row carries the owner',
  )
})

const t1 = policyNames.targets('alpha', 'r')
const p1 = policyNames.peers('alpha', 'r')
const matches: { name: string; rule: Partial<GroupPolicyRule>; match: string }[] = [
  { name: 'ingress from anyone', rule: {}, match: `outport == @${all} && ip` },
  { name: 'egress to anyone', rule: { direction: 'egress' }, match: `inport == @${all} && ip` },
  {
    name: 'icmp, both families',
    rule: { protocol: 'icmp' },
    match: `outport == @${all} && ip && icmp`,
  },
  { name: 'any tcp', rule: { protocol: 'tcp' }, match: `outport == @${all} && ip && tcp` },
  {
    name: 'one udp port',
    rule: { protocol: 'udp', ports: { from: 53, to: 53 } },
    match: `outport == @${all} && ip && udp.dst == 53`,
  },
  {
    name: 'a tcp range',
    rule: { protocol: 'tcp', ports: { from: 8000, to: 8099 } },
    match: `outport == @${all} && ip && tcp.dst >= 8000 && tcp.dst <= 8099`,
  },
  {
    name: 'ingress from an IPv4 CIDR: its source',
    rule: { peer: { cidr: '10.1.0.0/16' } },
    match: `outport == @${all} && ip4.src == 10.1.0.0/16`,
  },
  {
    name: 'egress to an IPv6 CIDR: its destination',
    rule: { direction: 'egress', peer: { cidr: 'fd00:99::/64' } },
    match: `inport == @${all} && ip6.dst == fd00:99::/64`,
  },
  {
    name: 'target and peer hosts (IPv4 peers)',
    rule: { hosts: ['b'], peer: { hosts: ['a'] }, protocol: 'tcp' },
    match: `outport == @${t1} && ip4.src == $${p1}_ip4 && tcp`,
  },
  {
    name: 'peers of both families',
    rule: { direction: 'egress', peer: { hosts: ['a', 'c'] } },
    match: `inport == @${all} && (ip4.dst == $${p1}_ip4 || ip6.dst == $${p1}_ip6)`,
  },
]
t.test('a rule becomes one ACL on its targets', async (t) => {
  for (const c of matches) {
    const acl = aclsOf(compileGroupTopology(spec([rule(c.rule)])).rows)[1]
    t.equal(acl?.match, c.match, c.name)
    t.equal(acl?.direction, c.rule.direction === 'egress' ? 'from-lport' : 'to-lport', c.name)
  }
  const [, allow] = aclsOf(compileGroupTopology(spec([rule({ action: 'allow' })])).rows)
  t.equal(allow?.action, 'allow-related', 'allow is stateful')
  const [, deny] = aclsOf(compileGroupTopology(spec([rule()])).rows)
  t.equal(deny?.action, 'drop')
  t.equal(deny?.name, 'r', 'the ACL is named after its rule')
})

t.test('port groups of a rule hold the hosts it names', async (t) => {
  const out = compileGroupTopology(spec([rule({ hosts: ['b', 'c'], peer: { hosts: ['a'] } })]))
  const links = (key: string) =>
    (out.rows.find((r) => r.table === 'Port_Group' && r.key === key) as Row | undefined)?.links?.ids
  t.same(links('pg/t/r'), [port('b'), port('c')])
  t.same(links('pg/p/r'), [port('a')])
  const acl = out.rows.find((r) => r.table === 'ACL' && r.key === 'acl/pg/t/r/r')
  t.same(acl?.parent, { table: 'Port_Group', key: 'pg/t/r', column: 'acls' })
})

t.test('precedence: smaller priority first, then list order', async (t) => {
  const rules = [
    rule({ name: 'late', priority: 500 }),
    rule({ name: 'first', priority: 1 }),
    rule({ name: 'tie-a' }),
    rule({ name: 'tie-b' }),
  ]
  const priorities = Object.fromEntries(
    aclsOf(compileGroupTopology(spec(rules)).rows).map((a) => [a.name ?? 'baseline', a.priority]),
  )
  t.same(priorities, {
    baseline: BASELINE_PRIORITY,
    first: RULE_PRIORITY_TOP,
    'tie-a': RULE_PRIORITY_TOP - 1,
    'tie-b': RULE_PRIORITY_TOP - 2,
    late: RULE_PRIORITY_TOP - 3,
  })
})

t.test('rules naming hosts the group has not built', async (t) => {
  const out = compileGroupTopology(
    spec([
      rule({ name: 'some', hosts: ['a', 'ghost'] }),
      rule({ name: 'none', hosts: ['ghost', 'far'] }),
      rule({ name: 'no-peer', peer: { hosts: ['later'] } }),
      rule({ name: 'fine', peer: { hosts: ['b'] } }),
    ]),
  )
  t.same(out.policies, {
    rules: 4,
    unresolved: [
      { rule: 'some', hosts: ['ghost'], inert: false },
      { rule: 'none', hosts: ['ghost', 'far'], inert: true },
      { rule: 'no-peer', hosts: ['later'], inert: true },
    ],
  })
  const keys = out.rows.filter(isPolicyAcl).map((r) => r.key)
  t.same(
    keys,
    ['acl/pg/all/baseline', 'acl/pg/t/some/some', 'acl/pg/all/fine'],
    'a rule left with no target or no peer has no ACL',
  )
})

t.test('deterministic, and unique names across groups', async (t) => {
  const rules = [rule({ hosts: ['a'], peer: { hosts: ['b'] } })]
  t.same(compileGroupTopology(spec(rules)), compileGroupTopology(spec(rules)))
  const memo = new CompileMemo()
  compileGroupTopology(spec(rules), memo)
  t.same(compileGroupTopology(spec(rules), memo), compileGroupTopology(spec(rules)), 'memo too')
  const names = (g: string) => [
    policyNames.all(g),
    policyNames.targets(g, 'r'),
    policyNames.peers(g, 'r'),
    policyNames.targets(g, 'r-1'),
  ]
  const seen = [...names('alpha'), ...names('beta'), ...names('alpha-r')]
  t.equal(new Set(seen).size, seen.length)
  for (const n of seen) t.match(n, /^[a-zA-Z_.][a-zA-Z_.0-9]*$/, `${n} is an OVN identifier`)
})

t.test('a rule name twice is refused', async (t) => {
  t.throws(
    () => compileGroupTopology(spec([rule(), rule({ direction: 'egress' })])),
    new InvalidTopologySpec('alpha', 'duplicate ACL acl/pg/all/r'),
  )
  t.throws(() => compileGroupTopology(spec([rule({ name: 'Bad_Name' })])), /invalid spec/)
})

t.test('the diff inserts a port group with its ports and ACLs in one transaction', async (t) => {
  const desired = compileGroupTopology(spec([rule()]))
  const { writes } = diffTopology(desired, emptyRows())
  const pg = writes.find((op) => op.op === 'insert' && op.table === 'Port_Group') as
    | { row: { ports: unknown; acls: unknown } }
    | undefined
  const named = (table: string, names?: string[]) =>
    writes
      .filter((op) => op.op === 'insert' && op.table === table)
      .filter((op) => !names || names.includes((op as { row: { name?: string } }).row.name ?? ''))
      .map((op) => ['named-uuid', (op as { 'uuid-name': string })['uuid-name']])
  const policyAcls = writes
    .filter((op) => op.op === 'insert' && op.table === 'ACL')
    .filter((op) => String((op as unknown as { row: { match?: unknown } }).row.match).includes('@'))
    .map((op) => ['named-uuid', (op as { 'uuid-name': string })['uuid-name']])
  t.equal(policyAcls.length, aclsOf(desired.rows).length)
  t.same(pg?.row.acls, ['set', policyAcls], "the policies' ACLs")
  const hostPorts = named(
    'Logical_Switch_Port',
    ['a', 'b', 'c'].map((h) => topologyNames.hostPort('alpha', h)),
  )
  t.equal(hostPorts.length, 3)
  t.same(pg?.row.ports, ['set', hostPorts], "the group's three host ports")
})
