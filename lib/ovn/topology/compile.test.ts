import t from 'tap'
import {
  CompileMemo,
  compileGroupTopology,
  type GroupTopologySpec,
  InvalidTopologySpec,
  topologyNames,
} from '../index.ts'
import { base } from './fixtures/specs.ts'

t.test('same spec, same rows; names and owner derive from the group', async (t) => {
  const a = compileGroupTopology(base)
  t.same(compileGroupTopology(base), a, 'pure and deterministic')
  const names = a.rows
    .filter((r) => r.table !== 'Address_Set')
    .map((r) => (r.row as { name?: string }).name)
    .filter((n) => n !== undefined)
  t.ok(
    names.every((n) => n.startsWith('hz/alpha/')),
    'every named row is prefixed with the group',
  )
  const sets = a.rows.flatMap((r) => (r.table === 'Address_Set' ? [r.row.name ?? ''] : []))
  t.ok(
    sets.length === 2 && sets.every((n) => /^hz_[0-9a-f]{16}_[a-z0-9_]+$/.test(n)),
    "address sets (the guard, the DPU's hosts) are named as OVN matches can name them",
  )
  t.ok(a.rows.every((r) => r.row.external_ids['hydrazine:owner'] === 'group/alpha'))
  const gw = a.rows.find((r) => r.table === 'Logical_Router' && r.key === 'gw/dpu-1')
  t.same(
    (gw?.row as { options?: unknown } | undefined)?.options,
    { chassis: 'dpu-1' },
    'gateway router pinned to the DPU',
  )
  const b = compileGroupTopology({
    ...base,
    name: 'beta',
    members: [
      {
        ...base.members[0],
        logicalPort: topologyNames.hostPort('beta', 'h1'),
      } as GroupTopologySpec['members'][number],
    ],
  })
  const bNames = new Set(b.rows.map((r) => (r.row as { name?: string }).name))
  t.ok(
    names.every((n) => !bNames.has(n)),
    'two groups with identical CIDRs and IPs share no names',
  )
})

const rejects: { name: string; spec: GroupTopologySpec; error: new (...a: never[]) => Error }[] = [
  { name: 'malformed CIDR', spec: { ...base, cidr: '10.10.10.0' }, error: InvalidTopologySpec },
  {
    name: "an extra subnet's gateway outside it",
    spec: { ...base, extraSubnets: [{ cidr: '10.20.0.0/24', gateway: '10.30.0.1' }] },
    error: InvalidTopologySpec,
  },
  {
    name: 'an extra subnet overlapping the primary one',
    spec: { ...base, extraSubnets: [{ cidr: '10.10.10.128/25', gateway: '10.10.10.129' }] },
    error: InvalidTopologySpec,
  },
]
for (const c of rejects) {
  t.test(`rejects ${c.name}`, async (t) => {
    t.throws(() => compileGroupTopology(c.spec), c.error)
  })
}

t.test(
  'with a memo: the same rows, unchanged parts reused, new members still checked',
  async (t) => {
    const memo = new CompileMemo()
    const host = (n: number, dpu = 'dpu-1'): GroupTopologySpec['members'][number] => ({
      hostName: `h${n}`,
      logicalPort: topologyNames.hostPort('alpha', `h${n}`),
      mac: `0a:00:00:00:01:${n.toString(16).padStart(2, '0')}`,
      ip: `10.10.10.${n + 10}`,
      dpu: { id: dpu },
      access: 'None',
    })
    const two = { ...base, members: [host(1), host(2, 'dpu-2')] }
    const first = compileGroupTopology(two, memo)
    t.same(first, compileGroupTopology(two), 'a memo changes nothing in what is compiled')
    const three = { ...base, members: [host(1), host(2, 'dpu-2'), host(3, 'dpu-2')] }
    const second = compileGroupTopology(three, memo)
    t.same(second, compileGroupTopology(three), 'nor after a host joins')
    const port = (rows: typeof first, name: string) =>
      rows.rows.find((r) => r.table === 'Logical_Switch_Port' && r.row.name === name)
    const h1 = topologyNames.hostPort('alpha', 'h1')
    t.equal(port(second, h1), port(first, h1), "an unchanged host's row is the same object")
    const gw = (rows: typeof first, dpu: string) =>
      rows.rows.find((r) => r.table === 'Logical_Router' && r.key === `gw/${dpu}`)
    t.equal(gw(second, 'dpu-1'), gw(first, 'dpu-1'), "an unchanged DPU's rows are reused")
    t.not(gw(second, 'dpu-2'), gw(first, 'dpu-2'), 'the DPU the host joined is rebuilt')

    const bad = { ...three, members: [...three.members, { ...host(4), mac: 'nope' }] }
    const error = (() => {
      try {
        compileGroupTopology(bad, memo)
      } catch (e) {
        return e
      }
    })()
    t.type(error, InvalidTopologySpec, 'a new invalid member is refused with a memo')
    t.match((error as InvalidTopologySpec).issues, [{ path: 'members.3.mac' }], 'naming its field')
    t.throws(
      () => compileGroupTopology({ ...three, members: [host(1), host(1)] }, memo),
      InvalidTopologySpec,
      'a host listed twice is refused with a memo too',
    )
    // Only what changed is checked for duplicate rows after the first compile: a new host
    // whose port is an existing host's is still refused, and the memo is left as it was.
    const clash = { ...host(5), logicalPort: topologyNames.hostPort('alpha', 'h1') }
    t.throws(
      () => compileGroupTopology({ ...three, members: [...three.members, clash] }, memo),
      { name: 'InvalidTopologySpec', message: /duplicate Logical_Switch_Port/ },
      "a new host's row that an unchanged host has is refused with a memo",
    )
    t.same(compileGroupTopology(three, memo), second, 'a refused compile leaves the memo as it was')
    // A host leaves, and another takes its port name: the old row's id is free again.
    const moved = { ...host(6), logicalPort: topologyNames.hostPort('alpha', 'h3') }
    const swapped = { ...base, members: [host(1), host(2, 'dpu-2'), moved] }
    t.same(
      compileGroupTopology(swapped, memo),
      compileGroupTopology(swapped),
      "a row id a removed host had may be another host's",
    )
    t.same(compileGroupTopology(three, memo), second, 'and back')
    memo.forget('alpha')
    t.same(compileGroupTopology(three, memo), second, 'forgetting only costs a rebuild')
  },
)
