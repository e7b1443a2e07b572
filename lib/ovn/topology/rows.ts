/**
 * The rows a group topology is made of, as every part of the compiler builds them:
 * their tables, where a child row hangs, and what the topology could not build.
 */
import type { Writable } from '../database.ts'
import type { NbTables } from '../schema/nb.generated.ts'
import type { PolicyStatus } from './policy-rules.ts'

/** The NB tables a group topology is made of. */
export type TopologyTable =
  | 'Logical_Switch'
  | 'Logical_Switch_Port'
  | 'Logical_Router'
  | 'Logical_Router_Port'
  | 'Logical_Router_Static_Route'
  | 'Logical_Router_Policy'
  | 'NAT'
  | 'DNS'
  | 'Port_Group'
  | 'ACL'
  | 'Address_Set'

export const TOPOLOGY_TABLES: readonly TopologyTable[] = [
  'Logical_Switch',
  'Logical_Router',
  'Logical_Switch_Port',
  'Logical_Router_Port',
  'Logical_Router_Static_Route',
  'Logical_Router_Policy',
  'NAT',
  'DNS',
  'Port_Group',
  'ACL',
  'Address_Set',
]

/** Where a child row hangs: its parent (by key) and the parent's reference column. */
export interface ParentRef {
  readonly table: 'Logical_Switch' | 'Logical_Router' | 'Port_Group'
  readonly key: string
  readonly column: 'ports' | 'static_routes' | 'policies' | 'nat' | 'dns_records' | 'acls'
}

/** Each parent table's reference columns: the rows it holds (strong references). */
export const CHILD_COLUMNS = {
  Logical_Switch: ['ports', 'dns_records', 'acls'],
  Logical_Router: ['ports', 'static_routes', 'policies', 'nat'],
  Port_Group: ['acls'],
} as const satisfies Record<ParentRef['table'], readonly ParentRef['column'][]>

/** Whether rows of `table` hold children (their reference columns are `CHILD_COLUMNS`'). */
export function isParentTable(table: string): table is keyof typeof CHILD_COLUMNS {
  return table in CHILD_COLUMNS
}

/**
 * Rows a row refers to without owning them (a port group's `ports`, weak references to
 * the group's host ports), by row id (`<table>/<key>`): the diff keeps the column equal
 * to exactly those rows.
 */
export interface RowLinks {
  readonly column: 'ports'
  readonly ids: readonly string[]
}

/** One NB row the group needs, without its reference columns (those come from `parent`). */
export type DesiredRow = {
  [K in TopologyTable]: {
    readonly table: K
    /** Identity of the row within the group, stored as `external_ids:hydrazine:key`. */
    readonly key: string
    readonly row: Partial<Writable<NbTables[K]>> & { external_ids: Record<string, string> }
    readonly parent?: ParentRef
    readonly links?: RowLinks
  }
}[TopologyTable]

/**
 * A host (or relay port) the topology cannot build as asked: left out, or built without
 * what it cannot have (a host without an IPv4 address gets no NAT). One such host
 * never keeps the rest of its group from being built.
 */
export interface TopologyProblem {
  readonly code: string
  readonly message: string
  /** The host it concerns; absent for a relay port. */
  readonly host?: string
}

export interface DesiredRows {
  readonly group: string
  /** Value of `external_ids:hydrazine:owner` on every row of the group. */
  readonly owner: string
  readonly rows: readonly DesiredRow[]
  /** What the topology leaves out of what was asked; the rest of the group is built. */
  readonly problems?: readonly TopologyProblem[]
  /** What the group's security policies came to (`policies.ts`); absent without rules. */
  readonly policies?: PolicyStatus
  /**
   * The compile held DNS changes back (`CompileOptions.holdDns`): records of hosts gone or
   * changed are still published, or new hosts' are not yet. A compile that does not hold
   * publishes them.
   */
  readonly dnsHeld?: true
}

/**
 * What one compile through a `CompileMemo` changed since the group's previous compile
 * through it (`after`; absent when there was none, or the group's network changed): the
 * diff (`diff.ts`) compares only these rows when NB matched that previous compile.
 * `CompileMemo.changes` hands it out for the compile's result.
 */
export interface CompileChanges {
  /** This compile's number in the memo (unique per memo). */
  readonly serial: number
  /** The `serial` of the group's previous compile this one follows. */
  readonly after?: number
  /** Rows this compile made: its new and rebuilt parts', and every loose row (relays, policies). */
  readonly built: readonly DesiredRow[]
  /** Rows of the previous compile whose id this one no longer has. */
  readonly dropped: readonly DesiredRow[]
  /**
   * This compile's row with `id` (`<table>/<key>`). Answers for this compile only until the
   * group's next compile through the memo.
   */
  readonly rowOf: (id: string) => DesiredRow | undefined
}
