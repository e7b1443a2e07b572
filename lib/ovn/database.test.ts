import t from 'tap'
import { Database } from './database.ts'
import { type NbTables, nbSchema } from './schema/nb.generated.ts'
import type { ColumnType } from './schema-types.ts'
import { decodeValue, encodeValue } from './values.ts'

const U = '0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0'
const str = { type: 'string' } as const
const uuid = { type: 'uuid' } as const
const int = { type: 'integer' } as const

const cases: {
  name: string
  column: ColumnType
  plain: Parameters<typeof encodeValue>[1]
  wire: unknown
}[] = [
  { name: 'string atom', column: { key: str, min: 1, max: 1 }, plain: 'x', wire: 'x' },
  { name: 'integer atom', column: { key: int, min: 1, max: 1 }, plain: 7, wire: 7 },
  { name: 'optional present', column: { key: str, min: 0, max: 1 }, plain: 'x', wire: 'x' },
  { name: 'optional absent', column: { key: str, min: 0, max: 1 }, plain: null, wire: ['set', []] },
  { name: 'uuid', column: { key: uuid, min: 1, max: 1 }, plain: U, wire: ['uuid', U] },
  {
    name: 'set of uuids',
    column: { key: uuid, min: 0, max: -1 },
    plain: [U, U],
    wire: [
      'set',
      [
        ['uuid', U],
        ['uuid', U],
      ],
    ],
  },
  { name: 'empty set', column: { key: str, min: 0, max: -1 }, plain: [], wire: ['set', []] },
  {
    name: 'map',
    column: { key: str, value: str, min: 0, max: -1 },
    plain: { a: '1', b: '2' },
    wire: [
      'map',
      [
        ['a', '1'],
        ['b', '2'],
      ],
    ],
  },
  {
    name: 'integer-keyed map of uuids',
    column: { key: int, value: uuid, min: 0, max: -1 },
    plain: { 1: U },
    wire: ['map', [[1, ['uuid', U]]]],
  },
]

for (const c of cases) {
  t.test(`value encoding: ${c.name}`, async (t) => {
    t.same(encodeValue(c.column, c.plain), c.wire, 'encodes')
    t.same(decodeValue(c.column, c.wire as never), c.plain, 'decodes back')
  })
}

t.test('a set of one element may arrive as a bare atom', async (t) => {
  t.same(decodeValue({ key: uuid, min: 0, max: -1 }, ['uuid', U]), [U])
  t.same(decodeValue({ key: str, min: 0, max: -1 }, 'x'), ['x'])
})

t.test('a uuid column given a non-UUID name is a named-uuid reference', async (t) => {
  t.same(encodeValue({ key: uuid, min: 0, max: -1 }, ['ls1']), ['set', [['named-uuid', 'ls1']]])
})

const nb = new Database<NbTables>(nbSchema)

t.test('builders return wire operations without a database', async (t) => {
  t.same(
    nb.insert(
      'Logical_Switch_Port',
      { name: 'p1', addresses: ['00:00:00:00:00:01 10.0.0.2'], external_ids: { owner: 'x' } },
      'p1',
    ),
    {
      op: 'insert',
      table: 'Logical_Switch_Port',
      row: {
        name: 'p1',
        addresses: ['set', ['00:00:00:00:00:01 10.0.0.2']],
        external_ids: ['map', [['owner', 'x']]],
      },
      'uuid-name': 'p1',
    },
  )
  t.same(nb.mutate('Logical_Switch', [['_uuid', '==', U]], [['ports', 'insert', ['p1']]]), {
    op: 'mutate',
    table: 'Logical_Switch',
    where: [['_uuid', '==', ['uuid', U]]],
    mutations: [['ports', 'insert', ['set', [['named-uuid', 'p1']]]]],
  })
  t.same(nb.select('NAT', [['external_ids', 'includes', { owner: 'g' }]], ['external_ip']), {
    op: 'select',
    table: 'NAT',
    where: [['external_ids', 'includes', ['map', [['owner', 'g']]]]],
    columns: ['external_ip'],
  })
  t.same(nb.mutate('NAT', [], [['external_ids', 'delete', ['owner']]]).op, 'mutate')
  t.same(nb.wait('Logical_Router', [['name', '==', 'r']], ['_version'], [{ _version: U }]), {
    op: 'wait',
    table: 'Logical_Router',
    where: [['name', '==', 'r']],
    columns: ['_version'],
    until: '==',
    rows: [{ _version: ['uuid', U] }],
    timeout: 0,
  })
})

t.test('unknown tables and columns are caught when building', async (t) => {
  t.throws(() => nb.insert('Nope' as 'NAT', {}), TypeError)
  t.throws(() => nb.insert('NAT', { bogus: 1 } as never), TypeError)
})

t.test('decodeRow turns a select result into plain values', async (t) => {
  const row = nb.decodeRow('NAT', {
    _uuid: ['uuid', U],
    external_ip: '1.2.3.4',
    logical_port: ['set', []],
    external_ids: ['map', [['k', 'v']]],
    type: 'snat',
  })
  t.same(row, {
    _uuid: U,
    external_ip: '1.2.3.4',
    logical_port: null,
    external_ids: { k: 'v' },
    type: 'snat',
  })
})
