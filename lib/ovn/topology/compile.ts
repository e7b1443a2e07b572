import * as v from 'valibot'
import type { Writable } from '../database.ts'
import type { NbTables } from '../schema/nb.generated.ts'
import { linkLocalSlots } from './addresses.ts'
import { DnsNameConflict, InvalidTopologySpec } from './errors.ts'
import { type Draft, groupParts } from './parts.ts'
import { type PolicyStatus, policyRows } from './policies.ts'
import {
  type GroupMember,
  GroupMemberSchema,
  type GroupTopologySpec,
  GroupTopologySpecSchema,
} from './spec.ts'

export { transitAddresses } from './addresses.ts'
export { HOST_POLICY_PRIORITY } from './parts.ts'

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
]

/** Where a child row hangs: its parent (by key) and the parent's reference column. */
export interface ParentRef {
  readonly table: 'Logical_Switch' | 'Logical_Router' | 'Port_Group'
  readonly key: string
  readonly column: 'ports' | 'static_routes' | 'policies' | 'nat' | 'dns_records' | 'acls'
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

export interface DesiredRows {
  readonly group: string
  /** Value of `external_ids:hydrazine:owner` on every row of the group. */
  readonly owner: string
  readonly rows: readonly DesiredRow[]
  /** What the topology leaves out of what was asked; the rest of the group is built. */
  readonly problems?: readonly TopologyProblem[]
  /** What the group's security policies came to (`policies.ts`); absent without rules. */
  readonly policies?: PolicyStatus
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

/**
 * Compiles a group's desired state into the NB rows it needs (seed 000, "User-defined
 * Network Topology"). Pure: same spec, same rows.
 *
 * - distributed: switch `hz-<g>-ls` (host ports, DHCP relay ports) and router `hz-<g>-lr`
 *   with the gateway IP and each routed extra subnet's gateway, a default route per DPU
 *   (ECMP) and a reroute policy per routed IPv4 host to its own DPU's gateway router
 *   (with two routed IPv4 subnets or more, traffic between them is allowed first);
 * - per DPU `d`: transit switch `hz-<g>-<d>-ts`, gateway router `hz-<g>-<d>-gw` pinned to
 *   chassis `d`, public switch `hz-<g>-<d>-pub` with a localnet port; a route back and an
 *   SNAT to the DPU's NAT IP per routed IPv4 subnet (the SNAT also makes the gateway
 *   router answer ARP for the NAT IP); FabricAccess: `dnat_and_snat` NAT IP ↔ host;
 *   PublicAccess: `dnat_and_snat` public IP ↔ host (the host's egress leaves as its
 *   public IP, which FRR announces with next hop = the NAT IP) and `dnat` NAT IP → host
 *   (still reachable from the fabric; all it has while its public IP is not allocated);
 *   the public switch drops IP from the fabric to the group's subnets and transit links,
 *   so the fabric reaches hosts through those NAT rules only; and the distributed router
 *   drops, below the reroutes, whatever would leave the group without one (a host of a
 *   subnet without a gateway, a host on a DPU without a NAT address of the family);
 * - with `network6` (dual-stack): the distributed router takes its gateway too and sends
 *   router advertisements for SLAAC there; each host's port holds its `ip6` beside its
 *   address. Without `dummyFabricIp6` IPv6 stays in the group; with it, routed IPv6
 *   subnets leave like IPv4 ones: a /126 in `fd00:a9fe::/64` beside each transit /30,
 *   `dummyFabricIp6` on each public port, `::/0` routes, a reroute per host's IPv6
 *   address, and NAT66 to the DPU's `natIp6` (and a PublicAccess host's `publicIp6`),
 *   the same rules as IPv4's;
 * - with `dns`: a `DNS` row per built host in the switch's `dns_records` (`dns.ts`:
 *   `<name>.<group>.<zone>`, `<name>` and the address's PTR name), so names resolve in
 *   the group only; hosts sharing a DNS name get none (named in `problems`);
 * - with `policies`: port groups of the built hosts and an ACL per rule (`policies.ts`);
 *   what they came to, rules naming hosts the group lacks included, is in `policies`.
 *
 * A host is built when its address lies in one of the group's subnets, else left out;
 * FabricAccess and PublicAccess need a routed IPv4 address, else the host gets its port
 * and no NAT. Either way it is named in `problems` and the rest of the group is built.
 *
 * Transit links get a /30 in 169.254.0.0/16 chosen by a hash of the DPU id (probing on
 * collision, in DPU id order), so a DPU joining or leaving does not renumber the others.
 *
 * With a `memo`, the rows of every host and every DPU whose inputs did not change since
 * the group's last compile through that memo are the same row objects as then (not
 * rebuilt, not validated again): compiling a 1,000-host group that gained one host costs
 * that host's rows and its DPU's, and lets the diff skip every row it already verified.
 *
 * @throws InvalidTopologySpec (the group's own settings), NatConflict (two hosts claim one
 *   external address, or one DPU two NAT IPs: the store never lets them)
 */
export function compileGroupTopology(spec: GroupTopologySpec, memo?: CompileMemo): DesiredRows {
  const g = String(spec.name)
  const head = JSON.stringify([
    spec.name,
    spec.cidr,
    spec.gateway,
    spec.extraSubnets ?? [],
    spec.network6 ?? null,
    spec.dummyFabricIp,
    spec.fabricGatewayIp,
    spec.dummyFabricIp6,
    spec.fabricGatewayIp6,
    spec.physicalNetwork,
    spec.dns ?? null,
  ])
  const previous = memo?.previous(g, head)
  validate(spec, previous?.fragments)
  const fragments = new Map<string, Fragment>()
  /** Fragments built by this compile (not the memo's). */
  const built: Fragment[] = []
  const fragment = (
    key: string,
    build: (draft: Draft) => void,
    inputs?: readonly unknown[],
  ): Fragment => {
    let found = fragments.get(key)
    if (!found) {
      const before = previous?.fragments.get(key)
      if (before && sameInputs(before.inputs, inputs)) found = before
    }
    if (!found) {
      const draft: Draft = { rows: [], problems: [], omitted: false }
      build(draft)
      found = { ...draft, ids: draft.rows.map(rowId), ...(inputs ? { inputs } : {}) }
      built.push(found)
    }
    fragments.set(key, found)
    return found
  }

  const c = groupParts(spec)
  const rows: DesiredRow[] = [...fragment('head', ({ rows }) => c.headRows(rows)).rows]
  const placed: { member: GroupMember; built: Fragment }[] = []
  const dnsClashes = spec.dns ? dnsNameClashes(spec.members) : new Map<string, string[]>()
  for (const m of spec.members) {
    const key = `m${m.hostName}`
    if (fragments.has(key)) throw new InvalidTopologySpec(g, `duplicate member ${m.hostName}`)
    // A host's rows are the same while its fields are (compared, not serialised: this
    // runs for every host of the group on every compile).
    let own = previous?.fragments.get(key)
    if (!own?.member || !sameMember(own.member, m)) {
      const draft: Draft = { rows: [], problems: [], omitted: false }
      c.memberRows(draft, m)
      own = { ...draft, ids: draft.rows.map(rowId), member: m }
      built.push(own)
    }
    fragments.set(key, own)
    rows.push(...own.rows)
    if (own.omitted) continue
    placed.push({ member: m, built: own })
    if (spec.dns && !dnsClashes.has(dnsNameOf(m))) {
      rows.push(...fragment(`n${m.hostName}`, (draft) => c.dnsRows(draft, m), [own]).rows)
    }
  }
  const relays: Draft = { rows: [], problems: [], omitted: false }
  for (const r of spec.dhcpRelayPorts ?? []) c.relayRows(relays, r)
  rows.push(...relays.rows)
  const policies = policyRows(
    g,
    spec.policies ?? [],
    placed.map((p) => p.member),
  )
  rows.push(...policies.rows)

  // Per DPU: transit switch, gateway router, public switch, NAT. A DPU's rows are the
  // same while its slot and its hosts' own fragments are (the same objects).
  const byDpu = new Map<string, { members: GroupMember[]; parts: Fragment[] }>()
  for (const { member, built: own } of placed) {
    const entry = byDpu.get(member.dpu.id) ?? { members: [], parts: [] }
    entry.members.push(member)
    entry.parts.push(own)
    byDpu.set(member.dpu.id, entry)
  }
  const slots = linkLocalSlots([...byDpu.keys()])
  for (const [dpu, { members, parts }] of [...byDpu].sort(([a], [b]) =>
    a < b ? -1 : a > b ? 1 : 0,
  )) {
    const slot = slots.get(dpu) ?? 0
    const own = fragment(`d${dpu}`, (draft) => c.dpuRows(draft, dpu, slot, members), [
      slot,
      ...parts,
    ])
    rows.push(...own.rows)
  }
  const loose = [...relays.rows, ...policies.rows]
  const { byId, dropped } = uniqueIds(g, previous, fragments, built, loose)
  const serial = memo?.remember(g, head, fragments, byId, loose)
  const looseById = new Map(loose.map((r) => [rowId(r), r]))
  const changes: CompileChanges | undefined =
    serial === undefined
      ? undefined
      : {
          serial,
          ...(previous ? { after: previous.serial } : {}),
          built: [...built.flatMap((f) => f.rows), ...loose],
          dropped: [
            ...dropped,
            ...(previous?.loose ?? []).filter((r) => {
              const id = rowId(r)
              return !byId.has(id) && !looseById.has(id)
            }),
          ],
          rowOf: (id) => byId.get(id) ?? looseById.get(id),
        }
  const problems: TopologyProblem[] = []
  for (const f of fragments.values()) if (f.problems.length > 0) problems.push(...f.problems)
  problems.push(...relays.problems)
  for (const [name, hosts] of dnsClashes) {
    for (const host of hosts) {
      const others = hosts.filter((h) => h !== host)
      const { code, message } = new DnsNameConflict(g, host, name, others)
      problems.push({ code, message, host })
    }
  }
  const result: DesiredRows = {
    group: g,
    owner: c.owner,
    rows,
    problems,
    ...(policies.status.rules > 0 ? { policies: policies.status } : {}),
  }
  if (changes) memo?.noteChanges(result, changes)
  return result
}

/** A member's name in its group's DNS. */
function dnsNameOf(m: GroupMember): string {
  return m.dnsName ?? m.hostName
}

/** DNS names more than one member has, with those members: none of them gets a record. */
function dnsNameClashes(members: readonly GroupMember[]): Map<string, string[]> {
  const byName = new Map<string, string[]>()
  for (const m of members) {
    const hosts = byName.get(dnsNameOf(m))
    if (hosts) hosts.push(m.hostName)
    else byName.set(dnsNameOf(m), [m.hostName])
  }
  for (const [name, hosts] of byName) if (hosts.length < 2) byName.delete(name)
  return byName
}

/** Rows built for one part of a group (its head, one host, one DPU), with their ids. */
interface Fragment {
  readonly rows: readonly DesiredRow[]
  readonly ids: readonly string[]
  readonly problems: readonly TopologyProblem[]
  /** A host left out of the topology (nothing of it is built). */
  readonly omitted: boolean
  /**
   * What the rows were built from besides the key: a DPU's slot and its hosts' fragments,
   * a host's DNS records' its host fragment (compared by identity); absent for the head.
   */
  readonly inputs?: readonly unknown[]
  /** A host's part: the member it was built from (the same fields, the same rows). */
  readonly member?: GroupMember
}

/** Whether two fragments' `inputs` are the same values (objects: the same objects). */
function sameInputs(a: readonly unknown[] | undefined, b: readonly unknown[] | undefined): boolean {
  if (a === b) return true
  if (a === undefined || b === undefined || a.length !== b.length) return false
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false
  return true
}

/**
 * Every row id of this compile, checked unique: `fragments` (the parts in use, `built`
 * those made by this compile) and the `loose` rows no memo holds. After a compile of the
 * same group, only what changed is checked: the ids of parts no longer used leave the
 * last compile's map, and the new parts' and loose ids must not be in what remains.
 * Returns the parts' rows by id, and the last compile's part rows whose id is gone.
 *
 * @throws InvalidTopologySpec naming a duplicate row
 */
function uniqueIds(
  group: string,
  previous: MemoEntry | undefined,
  fragments: ReadonlyMap<string, Fragment>,
  built: readonly Fragment[],
  loose: readonly DesiredRow[],
): { byId: Map<string, DesiredRow>; dropped: DesiredRow[] } {
  const duplicate = (id: string) =>
    new InvalidTopologySpec(group, `duplicate ${id.replace('/', ' ')}`)
  if (!previous) {
    const byId = new Map<string, DesiredRow>()
    for (const f of fragments.values()) {
      for (const [i, id] of f.ids.entries()) {
        if (byId.has(id)) throw duplicate(id)
        byId.set(id, f.rows[i] as DesiredRow)
      }
    }
    const looseSeen = new Set<string>()
    for (const id of loose.map(rowId)) {
      if (byId.has(id) || looseSeen.has(id)) throw duplicate(id)
      looseSeen.add(id)
    }
    return { byId, dropped: [] }
  }
  // The last compile's ids less those of its parts this one no longer uses.
  const gone = new Map<string, DesiredRow>()
  for (const [key, f] of previous.fragments) {
    if (fragments.get(key) !== f)
      for (const [i, id] of f.ids.entries()) gone.set(id, f.rows[i] as DesiredRow)
  }
  const kept = (id: string) => previous.byId.has(id) && !gone.has(id)
  const added = new Map<string, DesiredRow>()
  for (const f of built) {
    for (const [i, id] of f.ids.entries()) {
      if (kept(id) || added.has(id)) throw duplicate(id)
      added.set(id, f.rows[i] as DesiredRow)
    }
  }
  const looseSeen = new Set<string>()
  for (const id of loose.map(rowId)) {
    if (kept(id) || added.has(id) || looseSeen.has(id)) throw duplicate(id)
    looseSeen.add(id)
  }
  // The memo's map becomes this compile's (the caller remembers it with the fragments).
  const dropped: DesiredRow[] = []
  for (const [id, row] of gone) {
    if (added.has(id)) continue
    previous.byId.delete(id)
    dropped.push(row)
  }
  for (const [id, row] of added) previous.byId.set(id, row)
  return { byId: previous.byId, dropped }
}

/**
 * What `compileGroupTopology` built for each group's last compile, part by part, keyed by
 * the part's inputs. Holds one compile per group (the parts it used); a group whose
 * network changed starts over. `forget` drops a deleted group.
 *
 * @example
 * const memo = new CompileMemo()
 * compileGroupTopology(spec, memo) // every part built
 * compileGroupTopology(specWithOneMoreHost, memo) // that host's and its DPU's rows built
 */
export class CompileMemo {
  readonly #groups = new Map<string, MemoEntry>()
  readonly #changes = new WeakMap<DesiredRows, CompileChanges>()
  #serial = 0

  /** @internal The group's parts from its last compile, when its network is unchanged. */
  previous(group: string, head: string): MemoEntry | undefined {
    const entry = this.#groups.get(group)
    return entry?.head === head ? entry : undefined
  }

  /** @internal Remembers the group's compile; returns its serial. */
  remember(
    group: string,
    head: string,
    fragments: Map<string, Fragment>,
    byId: Map<string, DesiredRow>,
    loose: readonly DesiredRow[],
  ): number {
    const serial = ++this.#serial
    this.#groups.set(group, { head, fragments, byId, loose, serial })
    return serial
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

/** A group's last compile: its head, its parts by key, their rows by id, its loose rows. */
interface MemoEntry {
  readonly head: string
  readonly fragments: ReadonlyMap<string, Fragment>
  readonly byId: Map<string, DesiredRow>
  readonly loose: readonly DesiredRow[]
  readonly serial: number
}

/** `<table>/<key>`: a desired row's identity in its group. */
export function rowId(row: { readonly table: string; readonly key: string }): string {
  return `${row.table}/${row.key}`
}

/**
 * Whether `m` (not validated yet) has every field of `known` (a member a previous compile
 * validated): then it is valid, and its rows are `known`'s.
 */
function sameMember(known: GroupMember, m: GroupMember): boolean {
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

/**
 * Validates the spec. A member the group's last compile had with the same fields was
 * valid then and is the same now: only new and changed members are checked one by one,
 * and any failure is reported as the whole spec's parse reports it (paths like
 * `members.3.mac`).
 */
function validate(
  spec: GroupTopologySpec,
  previous: ReadonlyMap<string, Fragment> | undefined,
): void {
  const knownMember = (m: GroupMember) => {
    const before = previous?.get(`m${m?.hostName}`)?.member
    return before !== undefined && sameMember(before, m)
  }
  const known =
    previous !== undefined &&
    Array.isArray(spec.members) &&
    v.is(GroupTopologySpecSchema, { ...spec, members: [] }) &&
    spec.members.every((m) => knownMember(m) || v.is(GroupMemberSchema, m))
  if (known) return
  const parsed = v.safeParse(GroupTopologySpecSchema, spec)
  if (parsed.success) return
  throw new InvalidTopologySpec(
    String(spec.name),
    'invalid spec',
    parsed.issues.map((i) => ({ path: v.getDotPath(i) ?? '', message: i.message })),
  )
}
