/**
 * The rows a group topology is made of, as every part of the compiler builds them:
 * their tables, where a child row hangs, and what the topology could not build.
 */
import type { Writable } from '../database.ts'
import type { NbTables } from '../schema/nb.generated.ts'

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
