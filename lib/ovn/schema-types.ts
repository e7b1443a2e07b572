/**
 * Runtime description of an OVSDB schema, as much of it as encoding needs. The
 * generated files under ./schema/ export one of these per database next to the
 * TypeScript row types.
 */

export type AtomicType = 'integer' | 'real' | 'boolean' | 'string' | 'uuid'

export interface BaseType {
  readonly type: AtomicType
  readonly refTable?: string
}

export interface ColumnType {
  readonly key: BaseType
  readonly value?: BaseType
  readonly min: number
  /** Largest number of elements; `Infinity` is written as -1 ("unlimited"). */
  readonly max: number
}

export interface TableSchema {
  readonly columns: Readonly<Record<string, ColumnType>>
  readonly indexes?: readonly (readonly string[])[]
  readonly isRoot?: boolean
}

export interface DbSchema {
  readonly name: string
  readonly version: string
  readonly tables: Readonly<Record<string, TableSchema>>
}
