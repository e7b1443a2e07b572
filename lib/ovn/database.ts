import type {
  Condition,
  ConditionFunction,
  Mutation,
  Mutator,
  Operation,
  WireRow,
} from './protocol.ts'
import type { ColumnType, DbSchema, TableSchema } from './schema-types.ts'
import { decodeValue, encodeValue, type PlainAtom, type PlainValue } from './values.ts'

/** Columns a caller may write: every column but `_uuid` and `_version`. */
export type Writable<R> = Omit<R, '_uuid' | '_version'>

/** A value a condition or mutation may take for a column: the whole value or one element. */
export type ColumnArg<V> = V | (V extends readonly (infer E)[] ? E : never) | readonly string[]

export type Where<R> = readonly {
  readonly [C in keyof R & string]: readonly [C, ConditionFunction, ColumnArg<R[C]>]
}[keyof R & string][]

export type Mutations<R> = readonly {
  readonly [C in keyof Writable<R> & string]: readonly [C, Mutator, ColumnArg<R[C]>]
}[keyof Writable<R> & string][]

/**
 * Typed operation builders for one database. Builders only build: pass what they
 * return to `OvsdbClient.transact`, which commits them as one transaction.
 *
 * A uuid column takes a row UUID, or the `uuidName` of a row inserted earlier in the
 * same transaction (encoded as `named-uuid`).
 *
 * @example
 * const nb = new Database<NbTables>(nbSchema)
 * await client.transact(nb.name, [
 *   nb.insert('Logical_Switch_Port', { name: 'p1', addresses: ['00:00:00:00:00:01 10.0.0.2'] }, 'p1'),
 *   nb.mutate('Logical_Switch', [['name', '==', 'ls0']], [['ports', 'insert', ['p1']]]),
 * ])
 */
export class Database<T extends object> {
  constructor(readonly schema: DbSchema) {}

  get name(): string {
    return this.schema.name
  }

  insert<K extends keyof T & string>(
    table: K,
    row: Partial<Writable<T[K]>>,
    uuidName?: string,
  ): Operation {
    return {
      op: 'insert',
      table,
      row: this.encodeRow(table, row),
      ...(uuidName === undefined ? {} : { 'uuid-name': uuidName }),
    }
  }

  update<K extends keyof T & string>(
    table: K,
    where: Where<T[K]>,
    row: Partial<Writable<T[K]>>,
  ): Operation {
    return {
      op: 'update',
      table,
      where: this.encodeWhere(table, where),
      row: this.encodeRow(table, row),
    }
  }

  mutate<K extends keyof T & string>(
    table: K,
    where: Where<T[K]>,
    mutations: Mutations<T[K]>,
  ): Operation {
    const t = this.table(table)
    return {
      op: 'mutate',
      table,
      where: this.encodeWhere(table, where),
      mutations: mutations.map(
        ([column, mutator, value]): Mutation => [
          column,
          mutator,
          encodeValue(columnOf(t, table, column), value as PlainValue),
        ],
      ),
    }
  }

  delete<K extends keyof T & string>(table: K, where: Where<T[K]>): Operation {
    return { op: 'delete', table, where: this.encodeWhere(table, where) }
  }

  select<K extends keyof T & string>(
    table: K,
    where: Where<T[K]> = [],
    columns?: readonly (keyof T[K] & string)[],
  ): Operation {
    return {
      op: 'select',
      table,
      where: this.encodeWhere(table, where),
      ...(columns === undefined ? {} : { columns }),
    }
  }

  /**
   * Holds the transaction unless the rows matching `where` (projected on `columns`)
   * are exactly `rows` (`until: '=='`). With `timeout: 0` it fails at once with
   * `OvsdbTimedOut`, which is how optimistic concurrency is expressed in OVSDB.
   */
  wait<K extends keyof T & string>(
    table: K,
    where: Where<T[K]>,
    columns: readonly (keyof T[K] & string)[],
    rows: readonly Partial<T[K]>[],
    options: { until?: '==' | '!='; timeout?: number } = {},
  ): Operation {
    return {
      op: 'wait',
      table,
      where: this.encodeWhere(table, where),
      columns,
      until: options.until ?? '==',
      rows: rows.map((r) => this.encodeRow(table, r)),
      timeout: options.timeout ?? 0,
    }
  }

  /** A note that ovsdb-server writes to its log with the transaction. */
  comment(comment: string): Operation {
    return { op: 'comment', comment }
  }

  /** Decodes rows from a `select` result or monitor update into plain values. */
  decodeRows<K extends keyof T & string>(table: K, rows: readonly WireRow[] | undefined): T[K][] {
    return (rows ?? []).map((r) => this.decodeRow(table, r))
  }

  decodeRow<K extends keyof T & string>(table: K, row: WireRow): T[K] {
    const t = this.table(table)
    const out: Record<string, PlainValue> = {}
    for (const [column, value] of Object.entries(row)) {
      out[column] = decodeValue(columnOf(t, table, column), value)
    }
    return out as T[K]
  }

  /**
   * Decodes a whole row from a `monitor_cond` update (`initial`, `insert`), which leaves out
   * the columns that hold their default value: they are filled in, so the row reads as a
   * `select` would return it.
   */
  decodeWholeRow<K extends keyof T & string>(table: K, row: WireRow): T[K] {
    let defaults = this.#defaults.get(table)
    if (!defaults) {
      defaults = Object.entries(this.table(table).columns).map(
        ([column, type]) => [column, defaultOf(type)] as const,
      )
      this.#defaults.set(table, defaults)
    }
    const out = this.decodeRow(table, row) as Record<string, PlainValue>
    for (const [column, value] of defaults) {
      if (!(column in out)) out[column] = Array.isArray(value) ? [] : isMap(value) ? {} : value
    }
    return out as T[K]
  }

  readonly #defaults = new Map<string, readonly (readonly [string, PlainValue])[]>()

  /**
   * A decoded row with a `monitor_cond` `modify` applied: a set column's listed elements
   * are toggled (present: removed, absent: added), a map's pairs are added, replaced or
   * removed (same key and value), a scalar or optional column takes the new value (as
   * ovsdb-server sends it: only sets of more than one element travel as differences). Returns a new row;
   * `old` is not changed.
   */
  patchRow<K extends keyof T & string>(table: K, old: T[K], diff: WireRow): T[K] {
    const t = this.table(table)
    const out: Record<string, PlainValue> = { ...(old as Record<string, PlainValue>) }
    for (const [column, value] of Object.entries(diff)) {
      const type = columnOf(t, table, column)
      if (type.value) {
        const map = { ...((out[column] ?? {}) as Record<string, PlainAtom>) }
        for (const [k, v] of Object.entries(
          decodeValue(type, value) as Record<string, PlainAtom>,
        )) {
          if (k in map && map[k] === v) delete map[k]
          else map[k] = v
        }
        out[column] = map
      } else if (type.max === 1) {
        // A scalar or optional column: the new value (`["set", []]` when cleared).
        out[column] = decodeValue(type, value)
      } else {
        const set = new Set<PlainAtom>((out[column] ?? []) as PlainAtom[])
        for (const e of decodeValue(type, value) as PlainAtom[]) {
          if (set.has(e)) set.delete(e)
          else set.add(e)
        }
        out[column] = [...set]
      }
    }
    return out as T[K]
  }

  encodeRow(table: string, row: object): WireRow {
    const t = this.table(table)
    const out: Record<string, WireRow[string]> = {}
    for (const [column, value] of Object.entries(row)) {
      if (value === undefined) continue
      out[column] = encodeValue(columnOf(t, table, column), value as PlainValue)
    }
    return out
  }

  private encodeWhere(
    table: string,
    where: readonly (readonly [string, ConditionFunction, unknown])[],
  ): Condition[] {
    const t = this.table(table)
    return where.map(([column, fn, value]) => {
      const col = columnOf(t, table, column)
      // A scalar compared with a set/optional column must be wrapped as a set.
      return [column, fn, encodeValue(col, value as PlainValue)]
    })
  }

  private table(name: string): TableSchema {
    const t = this.schema.tables[name]
    if (!t) throw new TypeError(`${this.schema.name} has no table ${name}`)
    return t
  }
}

/** A column's default value, as decoded (RFC 7047: empty set/map, or the atom's zero). */
function defaultOf(type: ColumnType): PlainValue {
  if (type.value) return {}
  if (type.min === 1 && type.max === 1) {
    const zero = { integer: 0, real: 0, boolean: false, string: '', uuid: ZERO_UUID } as const
    return zero[type.key.type]
  }
  return type.max === 1 ? null : []
}
const ZERO_UUID = '00000000-0000-0000-0000-000000000000'

function isMap(value: PlainValue): value is Record<string, PlainAtom> {
  return value !== null && typeof value === 'object' && !Array.isArray(value)
}

const UUID_COLUMN: ColumnType = { key: { type: 'uuid' }, min: 1, max: 1 }

function columnOf(t: TableSchema, table: string, column: string): ColumnType {
  if (column === '_uuid' || column === '_version') return UUID_COLUMN
  const c = t.columns[column]
  if (!c) throw new TypeError(`table ${table} has no column ${column}`)
  return c
}
