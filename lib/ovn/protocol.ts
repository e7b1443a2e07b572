/**
 * RFC 7047 wire types: what goes over the socket, before any schema-aware decoding.
 * Callers normally build these with `Database` (./database.ts) and never by hand.
 */

/** An atom on the wire: string, integer, real, boolean, or a (named) UUID reference. */
export type WireAtom = string | number | boolean | WireUuid | WireNamedUuid
export type WireUuid = readonly ['uuid', string]
export type WireNamedUuid = readonly ['named-uuid', string]
export type WireSet = readonly ['set', readonly WireAtom[]]
export type WireMap = readonly ['map', readonly (readonly [WireAtom, WireAtom])[]]
/** A column value on the wire: a bare atom is a set of one. */
export type WireValue = WireAtom | WireSet | WireMap

export type WireRow = Readonly<Record<string, WireValue>>

export type ConditionFunction = '==' | '!=' | '<' | '<=' | '>' | '>=' | 'includes' | 'excludes'
export type Condition = readonly [column: string, fn: ConditionFunction, value: WireValue]

export type Mutator = '+=' | '-=' | '*=' | '/=' | '%=' | 'insert' | 'delete'
export type Mutation = readonly [column: string, mutator: Mutator, value: WireValue]

export type Operation =
  | {
      readonly op: 'insert'
      readonly table: string
      readonly row: WireRow
      readonly 'uuid-name'?: string
    }
  | {
      readonly op: 'select'
      readonly table: string
      readonly where: readonly Condition[]
      readonly columns?: readonly string[]
    }
  | {
      readonly op: 'update'
      readonly table: string
      readonly where: readonly Condition[]
      readonly row: WireRow
    }
  | {
      readonly op: 'mutate'
      readonly table: string
      readonly where: readonly Condition[]
      readonly mutations: readonly Mutation[]
    }
  | { readonly op: 'delete'; readonly table: string; readonly where: readonly Condition[] }
  | {
      readonly op: 'wait'
      readonly table: string
      readonly where: readonly Condition[]
      readonly columns: readonly string[]
      readonly until: '==' | '!='
      readonly rows: readonly WireRow[]
      readonly timeout?: number
    }
  | { readonly op: 'commit'; readonly durable: boolean }
  | { readonly op: 'abort' }
  | { readonly op: 'comment'; readonly comment: string }
  | { readonly op: 'assert'; readonly lock: string }

/** One element of a successful `transact` reply, in the order of the operations. */
export interface OperationResult {
  readonly uuid?: WireUuid
  readonly rows?: readonly WireRow[]
  readonly count?: number
}

/** `monitor` request for one table (RFC 7047 §4.1.5). */
export interface MonitorRequest {
  readonly columns?: readonly string[]
  readonly select?: {
    readonly initial?: boolean
    readonly insert?: boolean
    readonly delete?: boolean
    readonly modify?: boolean
  }
}

/** `update` notification payload: table → row UUID → old/new columns. */
export type TableUpdates = Readonly<
  Record<string, Readonly<Record<string, { readonly old?: WireRow; readonly new?: WireRow }>>>
>

/**
 * `update2` notification payload (`monitor_cond`, ovsdb-server(5)): table → row UUID →
 * one of `initial`/`insert` (the row, without the columns that hold their default),
 * `modify` (only the changed columns: for a map or a set of more than one element, the
 * elements to toggle; for a scalar or optional column, its new value) or `delete`.
 */
export type TableUpdates2 = Readonly<
  Record<
    string,
    Readonly<
      Record<
        string,
        {
          readonly initial?: WireRow
          readonly insert?: WireRow
          readonly modify?: WireRow
          readonly delete?: null
        }
      >
    >
  >
>
