/**
 * What a group's compile keeps for the next one (`CompileMemo`): every part (head, host,
 * DPU, DNS records) by what it was built from, and every row by id, so a compile of a
 * group that gained one host builds that host's rows and its DPU's only.
 */
import { InvalidTopologySpec } from './errors.ts'
import type { CompileChanges, DesiredRow, DesiredRows, TopologyProblem } from './rows.ts'
import type { GroupMember } from './spec.ts'

/** Rows built for one part of a group (its head, one host, one DPU), with their ids. */
export interface Fragment {
  readonly rows: readonly DesiredRow[]
  readonly ids: readonly string[]
  readonly problems: readonly TopologyProblem[]
  /** A host left out of the topology (nothing of it is built). */
  readonly omitted: boolean
}

/** A member as its group's last compile had it. */
export interface HostEntry {
  readonly member: GroupMember
  /** Its part (its port, NAT, reroute, …). */
  readonly own: Fragment
  /** Its place in the spec's members. */
  index: number
  /** The compile that last saw it. */
  stamp: number
}

/** A host's published DNS records, and the member they were built from. */
export interface PublishedDns {
  readonly member: GroupMember
  readonly part: Fragment
}

/** A DPU with placed hosts, and its part. */
export interface DpuEntry {
  readonly hosts: Set<string>
  own: Fragment | undefined
  /** Its link-local slot (-1 until placed). */
  slot: number
}

/**
 * A group's compiled state: every part by what it was built from, and every row by id.
 * A `CompileMemo` keeps it from one compile of the group to the next.
 */
export class GroupCompile {
  headPart: Fragment | undefined
  readonly hosts = new Map<string, HostEntry>()
  readonly dpus = new Map<string, DpuEntry>()
  /** DPU ids in order. */
  dpuOrder: string[] = []
  /** Members by DNS name (placed or not: a left-out host's name still clashes). */
  readonly dnsNames = new Map<string, Set<string>>()
  /** DNS names more than one member has. */
  readonly clashes = new Set<string>()
  /**
   * The DNS records published, per host. A compile that publishes brings them to the
   * members (a placed host whose name no other member has gets its records); one that
   * holds DNS changes (`CompileOptions.holdDns`) leaves them as they are — a departed or
   * changed host's stay, a new one's wait — and notes the hosts in `dnsPending`.
   */
  readonly dns = new Map<string, PublishedDns>()
  /** Hosts whose records were held: the next compile that publishes decides them. */
  readonly dnsPending = new Set<string>()
  /** Every part's rows by id (loose rows aside). */
  readonly byId = new Map<string, DesiredRow>()
  loose: readonly DesiredRow[] = []
  looseById = new Map<string, DesiredRow>()
  stamp = 0
  serial = 0

  constructor(readonly head: string) {}

  readonly rowOf = (id: string): DesiredRow | undefined =>
    this.byId.get(id) ?? this.looseById.get(id)
}

/**
 * Checks this compile's new row ids unique and updates the group's rows by id: the ids of
 * `retired` parts leave, those of `built` parts join and must not be among the rest, and
 * no `loose` row (relays, policies: no part holds them) may have an id another row has.
 * Returns the rows whose id the group no longer has.
 *
 * @throws InvalidTopologySpec naming a duplicate row
 */
export function uniqueIds(
  group: string,
  s: GroupCompile,
  built: readonly Fragment[],
  retired: readonly Fragment[],
  loose: readonly DesiredRow[],
): DesiredRow[] {
  const duplicate = (id: string) =>
    new InvalidTopologySpec(group, `duplicate ${id.replace('/', ' ')}`)
  const gone = new Map<string, DesiredRow>()
  for (const f of retired)
    for (const [i, id] of f.ids.entries()) gone.set(id, f.rows[i] as DesiredRow)
  const kept = (id: string) => s.byId.has(id) && !gone.has(id)
  const added = new Map<string, DesiredRow>()
  for (const f of built) {
    for (const [i, id] of f.ids.entries()) {
      if (kept(id) || added.has(id)) throw duplicate(id)
      added.set(id, f.rows[i] as DesiredRow)
    }
  }
  const looseById = new Map<string, DesiredRow>()
  for (const row of loose) {
    const id = rowId(row)
    if (kept(id) || added.has(id) || looseById.has(id)) throw duplicate(id)
    looseById.set(id, row)
  }
  const dropped: DesiredRow[] = []
  for (const [id, row] of gone) {
    if (added.has(id)) continue
    s.byId.delete(id)
    if (!looseById.has(id)) dropped.push(row)
  }
  for (const [id, row] of added) s.byId.set(id, row)
  for (const row of s.loose) {
    const id = rowId(row)
    if (!s.byId.has(id) && !looseById.has(id)) dropped.push(row)
  }
  s.loose = loose
  s.looseById = looseById
  return dropped
}

/**
 * Each group's last compile through `compileGroupTopology`, kept as state (its hosts',
 * DPUs' and DNS records' parts, every row by id) that the next compile of the group brings
 * up to date; a group whose network changed, or whose compile failed, starts over.
 * `forget` drops a deleted group.
 *
 * @example
 * const memo = new CompileMemo()
 * compileGroupTopology(spec, memo) // every part built
 * compileGroupTopology(specWithOneMoreHost, memo) // that host's and its DPU's rows built
 */
export class CompileMemo {
  readonly #groups = new Map<string, GroupCompile>()
  readonly #changes = new WeakMap<DesiredRows, CompileChanges>()
  #serial = 0

  /** @internal The group's last compile, when its network is unchanged. */
  previous(group: string, head: string): GroupCompile | undefined {
    const entry = this.#groups.get(group)
    return entry?.head === head ? entry : undefined
  }

  /** @internal Keeps the group's compile, numbered anew (`serial`). */
  remember(group: string, state: GroupCompile): void {
    state.serial = ++this.#serial
    this.#groups.set(group, state)
  }

  forget(group: string): void {
    this.#groups.delete(group)
  }

  /** What the compile that returned `desired` changed (for compiles through this memo). */
  changes(desired: DesiredRows): CompileChanges | undefined {
    return this.#changes.get(desired)
  }

  /** @internal */
  noteChanges(desired: DesiredRows, changes: CompileChanges): void {
    this.#changes.set(desired, changes)
  }
}

/** `<table>/<key>`: a desired row's identity in its group. */
export function rowId(row: { readonly table: string; readonly key: string }): string {
  return `${row.table}/${row.key}`
}

/**
 * Whether `m` (not validated yet) has every field of `known` (a member a previous compile
 * validated): then it is valid, and its rows are `known`'s.
 */
export function sameMember(known: GroupMember, m: GroupMember): boolean {
  if (known === m) return true
  return (
    known.hostName === m?.hostName &&
    known.logicalPort === m.logicalPort &&
    known.mac === m.mac &&
    known.ip === m.ip &&
    known.ip6 === m.ip6 &&
    known.dpu.id === m.dpu?.id &&
    known.dpu.natIp === m.dpu.natIp &&
    known.dpu.natIp6 === m.dpu.natIp6 &&
    known.access === m.access &&
    known.publicIp === m.publicIp &&
    known.publicIp6 === m.publicIp6 &&
    known.dnsName === m.dnsName
  )
}
