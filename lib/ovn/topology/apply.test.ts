import t from 'tap'
import type { Operation } from '../protocol.ts'
import {
  type ActualRow,
  type ActualRows,
  diffTopology,
  driftedRows,
  GENERATION_KEY,
} from './apply.ts'
import { compileGroupTopology, type DesiredRows, TOPOLOGY_TABLES } from './compile.ts'
import { addressSetNames, OWNER_KEY, ROW_KEY, topologyNames } from './names.ts'
import type { GroupMember, GroupTopologySpec } from './spec.ts'

const member = (n: number, dpu: string): GroupMember => ({
  hostName: `h${n}`,
  logicalPort: `hz-alpha-h${n}`,
  mac: `0a:00:00:00:00:0${n}`,
  ip: `10.10.10.${n + 1}`,
  dpu: { id: dpu, natIp: `172.18.0.${100 + n}` },
  access: 'None',
})
const spec: GroupTopologySpec = {
  name: 'alpha',
  cidr: '10.10.10.0/24',
  gateway: '10.10.10.1',
  dummyFabricIp: '172.18.0.254/24',
  members: [member(1, 'dpu-1'), member(2, 'dpu-2')],
}
const both = compileGroupTopology(spec)
const onlyDpu1 = compileGroupTopology({ ...spec, members: [member(1, 'dpu-1')] })
const empty: DesiredRows = { group: 'alpha', owner: both.owner, rows: [] }

const REFS = {
  Logical_Switch: ['ports', 'acls'],
  Logical_Router: ['ports', 'static_routes', 'policies', 'nat'],
} as const

/** NB as it reads after `desired` was committed: every row, parents referencing children. */
function committed(desired: DesiredRows): ActualRows {
  const uuidOf = new Map(desired.rows.map((r, i) => [`${r.table}/${r.key}`, uuid(i + 1)]))
  const out = Object.fromEntries(TOPOLOGY_TABLES.map((table) => [table, [] as ActualRow[]]))
  for (const r of desired.rows) {
    const row: Record<string, unknown> = { ...r.row }
    if (r.table === 'Logical_Switch' || r.table === 'Logical_Router') {
      for (const column of REFS[r.table]) {
        row[column] = desired.rows
          .filter((c) => c.parent?.table === r.table && c.parent.key === r.key)
          .filter((c) => c.parent?.column === column)
          .map((c) => uuidOf.get(`${c.table}/${c.key}`))
      }
    }
    out[r.table]?.push({
      _uuid: uuidOf.get(`${r.table}/${r.key}`) ?? '',
      _version: uuid(0),
      ...row,
    })
  }
  return out as unknown as ActualRows
}

function uuid(n: number): string {
  return `00000000-0000-4000-8000-${n.toString(16).padStart(12, '0')}`
}

/** `actual` with `edit` applied to the row of `table` whose key is `key`. */
function editRow(
  actual: ActualRows,
  table: keyof ActualRows,
  key: string,
  edit: (row: Record<string, unknown>) => Record<string, unknown>,
): ActualRows {
  return {
    ...actual,
    [table]: actual[table].map((r) => (keyOf(r) === key ? (edit({ ...r }) as ActualRow) : r)),
  }
}

function keyOf(row: ActualRow): string | undefined {
  return (row.external_ids as Record<string, string> | undefined)?.[ROW_KEY]
}

/**
 * Operations as short readable lines: rows by `table/key` (existing) or `new` (named in
 * this transaction), columns and referenced rows by name.
 */
function describe(ops: readonly Operation[], actual: ActualRows): string[] {
  const labels = new Map<string, string>()
  for (const table of TOPOLOGY_TABLES) {
    for (const row of actual[table]) {
      const name = `${table}/${keyOf(row) ?? '(no key)'}`
      labels.set(row._uuid, [...labels.values()].includes(name) ? `${name} (copy)` : name)
    }
  }
  const label = (wire: unknown): string => {
    const [kind, id] = wire as [string, string]
    return kind === 'named-uuid' ? 'new' : (labels.get(id) ?? id)
  }
  const target = (op: { where: readonly (readonly [string, string, unknown])[] }) =>
    label(op.where[0]?.[2])
  return ops.flatMap((op) => {
    switch (op.op) {
      case 'insert':
        return `insert ${op.table}`
      case 'update':
        return `update ${target(op)} ${Object.keys(op.row).sort().join(',')}`
      case 'mutate':
        return op.mutations.map(([column, mutator, value]) => {
          const [, members] = value as [string, unknown[]]
          const names = (members as unknown[]).map((m) =>
            Array.isArray(m) && (m[0] === 'uuid' || m[0] === 'named-uuid')
              ? label(m)
              : JSON.stringify(m),
          )
          return `mutate ${target(op)} ${column} ${mutator} ${names.sort().join(' ')}`
        })
      case 'delete':
        return `delete ${target(op)}`
      default:
        return op.op
    }
  })
}

const inSync = committed(both)
/** `both` with a host port that has two addresses (a set whose order NB does not keep). */
const twoAddresses: DesiredRows = {
  ...both,
  rows: both.rows.map((r) =>
    r.table === 'Logical_Switch_Port' && r.key === 'lsp/hz-alpha-h1'
      ? { ...r, row: { ...r.row, addresses: ['0a:00:00:00:00:01 10.10.10.2', 'unknown'] } }
      : r,
  ),
}

t.test('diffTopology: what it writes for each difference between desired and NB', async (t) => {
  const dupLsp = {
    ...(inSync.Logical_Switch_Port.find((r) => keyOf(r) === 'lsp/hz-alpha-h1') as ActualRow),
    _uuid: uuid(900),
  }
  const h2Port = inSync.Logical_Switch_Port.find((r) => keyOf(r) === 'lsp/hz-alpha-h2') as ActualRow
  const cases: { name: string; desired: DesiredRows; actual: ActualRows; writes: string[] }[] = [
    { name: 'NB matches: nothing', desired: both, actual: inSync, writes: [] },
    {
      name: 'sets in another order and a generation on the guard are no difference',
      desired: twoAddresses,
      actual: editRow(
        editRow(
          editRow(committed(twoAddresses), 'Logical_Router', 'lr', (r) => ({
            ...r,
            ports: [...(r.ports as string[])].reverse(),
          })),
          'Address_Set',
          'guard',
          (r) => ({
            ...r,
            external_ids: { ...(r.external_ids as object), [GENERATION_KEY]: '7' },
          }),
        ),
        'Logical_Switch_Port',
        'lsp/hz-alpha-h1',
        (r) => ({ ...r, addresses: [...(r.addresses as string[])].reverse() }),
      ),
      writes: [],
    },
    {
      name: 'a missing child is inserted and added to its existing parent',
      desired: both,
      actual: {
        ...editRow(inSync, 'Logical_Switch', 'ls', (r) => ({
          ...r,
          ports: (r.ports as string[]).filter((u) => u !== h2Port._uuid),
        })),
        Logical_Switch_Port: inSync.Logical_Switch_Port.filter((r) => r !== h2Port),
      },
      writes: ['insert Logical_Switch_Port', 'mutate Logical_Switch/ls ports insert new'],
    },
    {
      name: 'a changed column: one update of that column only',
      desired: both,
      actual: editRow(inSync, 'Logical_Switch_Port', 'lsp/hz-alpha-h1', (r) => ({
        ...r,
        addresses: ['0a:00:00:00:00:01 10.10.10.99'],
      })),
      writes: ['update Logical_Switch_Port/lsp/hz-alpha-h1 addresses'],
    },
    {
      name: 'a NAT row pointing elsewhere is updated in place',
      desired: both,
      actual: editRow(inSync, 'NAT', 'nat/gw/dpu-1/snat/172.18.0.101/10.10.10.0/24', (r) => ({
        ...r,
        external_ip: '172.18.0.199',
      })),
      writes: ['update NAT/nat/gw/dpu-1/snat/172.18.0.101/10.10.10.0/24 external_ip'],
    },
    {
      name: 'a host and its DPU gone: children leave live parents, stale roots are deleted',
      desired: onlyDpu1,
      actual: inSync,
      writes: [
        'mutate Logical_Switch/ls ports delete Logical_Switch_Port/lsp/hz-alpha-h2',
        `mutate Logical_Router/lr ports delete Logical_Router_Port/lrp/${topologyNames.routerTransitPort('alpha', 'dpu-2')}`,
        'mutate Logical_Router/lr static_routes delete Logical_Router_Static_Route/route/lr/0.0.0.0/0/dpu-2',
        'mutate Logical_Router/lr policies delete Logical_Router_Policy/policy/dpu-2/ip4',
        'delete Address_Set/as/dpu-2/ip4',
        'delete Logical_Switch/ts/dpu-2',
        'delete Logical_Router/gw/dpu-2',
        'delete Logical_Switch/pub/dpu-2',
      ],
    },
    {
      name: 'a duplicate child by key leaves its parent',
      desired: both,
      actual: {
        ...editRow(inSync, 'Logical_Switch', 'ls', (r) => ({
          ...r,
          ports: [...(r.ports as string[]), dupLsp._uuid],
        })),
        Logical_Switch_Port: [...inSync.Logical_Switch_Port, dupLsp],
      },
      writes: ['mutate Logical_Switch/ls ports delete Logical_Switch_Port/lsp/hz-alpha-h1 (copy)'],
    },
    {
      name: 'a duplicate root by key is deleted',
      desired: both,
      actual: {
        ...inSync,
        Logical_Switch: [
          ...inSync.Logical_Switch,
          {
            ...(inSync.Logical_Switch.find((r) => keyOf(r) === 'ts/dpu-1') as ActualRow),
            _uuid: uuid(901),
            ports: [],
          },
        ],
      },
      writes: ['delete Logical_Switch/ts/dpu-1 (copy)'],
    },
    {
      name: 'an owned row without a key is stale',
      desired: both,
      actual: {
        ...editRow(inSync, 'Logical_Switch', 'ls', (r) => ({
          ...r,
          ports: [...(r.ports as string[]), uuid(902)],
        })),
        Logical_Switch_Port: [
          ...inSync.Logical_Switch_Port,
          { _uuid: uuid(902), _version: uuid(0), name: 'x', external_ids: { [OWNER_KEY]: 'x' } },
        ],
      },
      writes: ['mutate Logical_Switch/ls ports delete Logical_Switch_Port/(no key)'],
    },
    {
      name: 'an empty desired state deletes every root',
      desired: empty,
      actual: inSync,
      writes: [
        'delete Logical_Switch/ls',
        'delete Logical_Switch/ts/dpu-1',
        'delete Logical_Switch/pub/dpu-1',
        'delete Logical_Switch/ts/dpu-2',
        'delete Logical_Switch/pub/dpu-2',
        'delete Logical_Router/lr',
        'delete Logical_Router/gw/dpu-1',
        'delete Logical_Router/gw/dpu-2',
        'delete Address_Set/guard',
        'delete Address_Set/as/dpu-1/ip4',
        'delete Address_Set/as/dpu-2/ip4',
      ],
    },
  ]
  for (const c of cases) {
    const { writes } = diffTopology(c.desired, c.actual)
    t.same(describe(writes, c.actual).sort(), [...c.writes].sort(), c.name)
  }
})

t.test('diffTopology: a new group is inserted whole, parents with their children', async (t) => {
  const { writes } = diffTopology(both, committed(empty))
  t.equal(writes.length, both.rows.length, 'one insert per row')
  t.ok(
    writes.every((op) => op.op === 'insert'),
    'inserts only',
  )
  /** The insert of the row with this key, by its `hydrazine:key`. */
  const insertOf = (table: string, key: string) =>
    writes.find(
      (op) =>
        op.op === 'insert' &&
        op.table === table &&
        (op.row.external_ids as [string, [string, string][]])[1].some(
          ([k, v]) => k === ROW_KEY && v === key,
        ),
    )
  const parents = both.rows.filter(
    (r) => r.table === 'Logical_Switch' || r.table === 'Logical_Router',
  )
  for (const parent of parents) {
    const insert = insertOf(parent.table, parent.key)
    for (const column of REFS[parent.table as keyof typeof REFS]) {
      const children = both.rows.filter(
        (c) =>
          c.parent?.table === parent.table &&
          c.parent.key === parent.key &&
          c.parent.column === column,
      )
      const wanted = children.map((c) => {
        const op = insertOf(c.table, c.key)
        return ['named-uuid', op?.op === 'insert' ? op['uuid-name'] : undefined]
      })
      const refs = insert?.op === 'insert' ? insert.row[column] : undefined
      t.same(
        [...((refs as [string, unknown[]] | undefined)?.[1] ?? [])].sort(),
        wanted.sort(),
        `${parent.key}.${column}: the children inserted in the same transaction`,
      )
    }
  }
})

t.test('diffTopology: the generation guard, and a bump exactly when writing', async (t) => {
  const guardOf = (actual: ActualRows) =>
    actual.Address_Set.find((r) => keyOf(r) === 'guard') as ActualRow
  const withGeneration = editRow(inSync, 'Address_Set', 'guard', (r) => ({
    ...r,
    external_ids: { ...(r.external_ids as object), [GENERATION_KEY]: '7' },
  }))
  const changed = editRow(withGeneration, 'Logical_Switch_Port', 'lsp/hz-alpha-h1', (r) => ({
    ...r,
    addresses: [],
  }))

  const idle = diffTopology(both, withGeneration)
  t.same(idle.bump, [], 'nothing written: no bump')
  t.same(
    idle.guards,
    [
      {
        op: 'wait',
        table: 'Address_Set',
        where: [['_uuid', '==', ['uuid', guardOf(withGeneration)._uuid]]],
        columns: ['external_ids'],
        until: '==',
        rows: [
          {
            external_ids: [
              'map',
              Object.entries(guardOf(withGeneration).external_ids as Record<string, string>),
            ],
          },
        ],
        timeout: 0,
      },
    ],
    'guard: the guard row still carries the generation that was read',
  )

  const busy = diffTopology(both, changed)
  t.equal(busy.writes.length, 1)
  t.same(
    busy.bump,
    [
      {
        op: 'mutate',
        table: 'Address_Set',
        where: [['_uuid', '==', ['uuid', guardOf(changed)._uuid]]],
        mutations: [
          ['external_ids', 'delete', ['set', [GENERATION_KEY]]],
          ['external_ids', 'insert', ['map', [[GENERATION_KEY, '8']]]],
        ],
      },
    ],
    'bump: generation 7 becomes 8 on the guard row',
  )
  t.notOk(
    [...busy.guards, ...busy.writes, ...busy.bump].some(
      (op) => 'table' in op && op.table === 'Logical_Router',
    ),
    'and neither the guard nor the bump touches a router (ovn-northd would recompute)',
  )
  t.same(diffTopology(both, changed).guards, idle.guards, 'the same guard whether writing or not')

  const fresh = diffTopology(both, committed(empty))
  t.same(
    fresh.guards,
    [
      {
        op: 'wait',
        table: 'Address_Set',
        where: [
          [
            'external_ids',
            'includes',
            [
              'map',
              [
                [OWNER_KEY, 'group/alpha'],
                [ROW_KEY, 'guard'],
              ],
            ],
          ],
        ],
        columns: ['_uuid'],
        until: '==',
        rows: [],
        timeout: 0,
      },
    ],
    'new group: guard that no guard row of the group exists yet',
  )
  const guardInsert = fresh.writes.find(
    (op) =>
      op.op === 'insert' &&
      op.table === 'Address_Set' &&
      op.row.name === addressSetNames.guard('alpha'),
  )
  const guardName = guardInsert?.op === 'insert' ? guardInsert['uuid-name'] : undefined
  t.ok(guardName, 'the guard row is inserted with the group')
  t.match(
    fresh.bump,
    [
      {
        op: 'mutate',
        where: [['_uuid', '==', ['named-uuid', guardName]]],
        mutations: [
          ['external_ids', 'delete', ['set', [GENERATION_KEY]]],
          ['external_ids', 'insert', ['map', [[GENERATION_KEY, '1']]]],
        ],
      },
    ],
    'new group: generation 1 on the guard inserted in the same transaction',
  )

  t.same(diffTopology(empty, inSync).bump, [], 'group deleted: its guard goes, nothing to bump')
})

t.test("an attach writes the host's rows and its DPU's address set, not the router", async (t) => {
  const open = (n: number): GroupMember => {
    const m = member(n, 'dpu-1')
    return { ...m, dpu: { ...m.dpu, natIp: '172.18.0.101' }, access: 'FabricAccess' }
  }
  const before = compileGroupTopology({ ...spec, members: [member(1, 'dpu-1')] })
  const after = compileGroupTopology({ ...spec, members: [member(1, 'dpu-1'), open(3)] })
  const actual = committed(before)
  const { writes } = diffTopology(after, actual)
  t.same(
    describe(writes, actual).sort(),
    [
      'insert Logical_Switch_Port',
      'insert NAT',
      'mutate Logical_Switch/ls ports insert new',
      'mutate Logical_Router/gw/dpu-1 nat insert new',
      'update Address_Set/as/dpu-1/ip4 addresses',
    ].sort(),
    "its port, its NAT row and the DPU's hosts: no policy, no write to the distributed router",
  )
  const attached = committed(after)
  t.same(
    describe(diffTopology(before, attached).writes, attached).sort(),
    [
      'mutate Logical_Switch/ls ports delete Logical_Switch_Port/lsp/hz-alpha-h3',
      'mutate Logical_Router/gw/dpu-1 nat delete NAT/nat/gw/dpu-1/dnat_and_snat/172.18.0.101/10.10.10.4',
      'update Address_Set/as/dpu-1/ip4 addresses',
    ].sort(),
    'and a detach neither',
  )
})

t.test('driftedRows: drift is NB differing from what was applied, not a first write', async (t) => {
  const row = (key: string, name: string) =>
    ({ table: 'Logical_Switch_Port', key, row: { name, external_ids: {} } }) as const
  const rows = (...r: ReturnType<typeof row>[]): DesiredRows => ({
    group: 'g',
    owner: 'group/g',
    rows: r,
  })
  const before = rows(row('lsp/a', 'a'), row('lsp/b', 'b'), row('lsp/gone', 'gone'))
  const now = rows(row('lsp/a', 'a'), row('lsp/b', 'b2'), row('lsp/new', 'new'))
  const touched = [
    'Logical_Switch_Port/lsp/a', // wanted alike before and now: NB lost or changed it
    'Logical_Switch_Port/lsp/b', // the desired row changed
    'Logical_Switch_Port/lsp/new', // written for the first time
    'Logical_Switch_Port/lsp/gone', // no longer wanted
    'Logical_Switch_Port/lsp/extra', // NB holds a row nobody wanted
  ]
  t.same(driftedRows(touched, now, before), [
    'Logical_Switch_Port/lsp/a',
    'Logical_Switch_Port/lsp/extra',
  ])
  t.same(driftedRows(touched, now, undefined), touched, 'nothing known applied: all of it')
})
