import t from 'tap'
import {
  type ActualRow,
  type ActualRows,
  compileGroupTopology,
  type GroupTopologySpec,
} from '../index.ts'
import { emptyRows, planTopology } from './plan.ts'

const spec: GroupTopologySpec = {
  name: 'g',
  cidr: '10.10.10.0/24',
  gateway: '10.10.10.1',
  dummyFabricIp: '172.18.0.254/24',
  members: [
    {
      hostName: 'h1',
      logicalPort: 'hz/g/h1',
      mac: '0a:00:00:00:00:01',
      ip: '10.10.10.2',
      dpu: { id: 'dpu-1', natIp: '172.18.0.105' },
      access: 'FabricAccess',
    },
  ],
}

/** The rows an apply of `s` would leave in NB, as read back. */
function applied(s: GroupTopologySpec): ActualRows {
  const rows = emptyRows() as unknown as Record<string, ActualRow[]>
  for (const [i, d] of compileGroupTopology(s).rows.entries()) {
    rows[d.table]?.push({ _uuid: `u${i}`, _version: 'v1', ...d.row } as ActualRow)
  }
  return rows as unknown as ActualRows
}

t.test('planTopology: inserts, updates and deletes by row id', async (t) => {
  const fresh = planTopology(compileGroupTopology(spec), emptyRows())
  t.ok(fresh.insert.includes('Logical_Switch/ls'), 'a new group inserts its switch')
  t.ok(fresh.insert.includes('Logical_Switch_Port/lsp/hz/g/h1'), 'and its host port')
  t.same([fresh.update, fresh.delete], [[], []])

  t.same(
    planTopology(compileGroupTopology(spec), applied(spec)),
    { insert: [], update: [], delete: [] },
    'applied already: nothing to do',
  )

  const withoutHost = { ...spec, members: [] }
  const detach = planTopology(compileGroupTopology(withoutHost), applied(spec))
  t.ok(detach.delete.includes('Logical_Switch_Port/lsp/hz/g/h1'), "a removed host's port goes")
  t.same(detach.insert, [])
  t.notOk(
    detach.delete.includes('Logical_Switch/ls') || detach.delete.includes('Logical_Router/lr'),
    "the group's switch and router stay",
  )
  t.ok(
    detach.delete.some((id) => id.includes('dpu-1')),
    'the rows of a DPU that serves no host any more go',
  )

  const moved = { ...spec, members: spec.members.map((m) => ({ ...m, mac: '0a:00:00:00:00:99' })) }
  const changed = planTopology(compileGroupTopology(moved), applied(spec))
  t.ok(changed.update.includes('Logical_Switch_Port/lsp/hz/g/h1'), 'a new MAC updates the port')
  t.same(changed.insert, [])

  const gone = planTopology({ ...compileGroupTopology(spec), rows: [] }, applied(spec))
  t.equal(gone.delete.length, compileGroupTopology(spec).rows.length, 'a deleted group: every row')
})
