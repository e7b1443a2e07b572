import * as v from 'valibot'
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
export {
  CHILD_COLUMNS,
  type DesiredRow,
  isParentTable,
  type ParentRef,
  type RowLinks,
  TOPOLOGY_TABLES,
  type TopologyProblem,
  type TopologyTable,
} from './rows.ts'

import type { DesiredRow, TopologyProblem } from './rows.ts'

export { REROUTE_POLICY_PRIORITY } from './parts.ts'

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
 * Compiles a group's desired state into the NB rows of its user-defined network topology.
 * Pure: same spec, same rows.
 *
 * - distributed: switch `hz-<g>-ls` (host ports, DHCP relay ports) and router `hz-<g>-lr`
 *   with the gateway IP and each routed extra subnet's gateway, a default route per DPU
 *   (ECMP) and, per DPU, one reroute policy to its gateway router matching an
 *   `Address_Set` of that DPU's routed IPv4 hosts (with two routed IPv4 subnets or more,
 *   traffic between them is allowed first), so an attach or detach changes the set and
 *   never the router; and the group's guard, an `Address_Set` no match names, whose
 *   `external_ids` carry the generation every apply bumps (`diff.ts`);
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
 *   `dummyFabricIp6` on each public port, `::/0` routes, an `Address_Set` and a reroute per DPU
 *   for its hosts' IPv6 addresses, and NAT66 to the DPU's `natIp6` (and a PublicAccess host's `publicIp6`),
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
  // With a previous compile, the members are checked as the compile meets them (only the
  // new and changed ones); else the whole spec is checked here.
  const checkedWhole = !previous || !Array.isArray(spec.members) || !v.is(GroupSpecHead, spec)
  if (checkedWhole) validate(spec)
  const state = previous ?? new GroupCompile(head)
  const after = previous?.serial
  try {
    const { result, built, dropped } = compileInto(spec, g, state, !checkedWhole)
    if (memo) {
      memo.remember(g, state)
      memo.noteChanges(result, {
        serial: state.serial,
        ...(after !== undefined ? { after } : {}),
        built,
        dropped,
        rowOf: state.rowOf,
      })
    }
    return result
  } catch (error) {
    // The group's memo may be half updated: its next compile starts over.
    memo?.forget(g)
    throw error
  }
}

/**
 * Brings `s` (the group's last compile, or a new one) to `spec`: rebuilds the parts of
 * hosts that are new or changed, of DPUs whose hosts or link slot changed, and DNS records
 * whose host or name clash changed; drops the parts of hosts and DPUs that are gone. A
 * pass over the members compares each with its last compile's (no rows built, nothing
 * allocated for an unchanged host); the rest costs what changed.
 */
function compileInto(
  spec: GroupTopologySpec,
  g: string,
  s: GroupCompile,
  /** Whether new and changed members still need checking (the whole spec was not). */
  checkMembers: boolean,
): { result: DesiredRows; built: DesiredRow[]; dropped: DesiredRow[] } {
  const c = groupParts(spec)
  const stamp = ++s.stamp
  /** Parts this compile built, and parts it stopped using. */
  const built: Fragment[] = []
  const retired: Fragment[] = []
  const build = (make: (draft: Draft) => void): Fragment => {
    const draft: Draft = { rows: [], problems: [], omitted: false }
    make(draft)
    const part = { ...draft, ids: draft.rows.map(rowId) }
    built.push(part)
    return part
  }
  s.headPart ??= build(({ rows }) => c.headRows(rows))

  const dirtyDpus = new Set<string>()
  const dirtyNames = new Set<string>()
  /** Hosts whose DNS records must be decided again (new or changed). */
  const renamed: HostEntry[] = []
  /**
   * A host joins (or leaves) the holders of its DNS name and, when placed, its DPU's
   * hosts; both are marked for the steps below.
   */
  const join = (entry: HostEntry, joined: boolean) => {
    const { member } = entry
    if (spec.dns) {
      const name = dnsNameOf(member)
      let holders = s.dnsNames.get(name)
      if (joined) {
        if (!holders) {
          holders = new Set()
          s.dnsNames.set(name, holders)
        }
        holders.add(member.hostName)
      } else {
        holders?.delete(member.hostName)
        if (holders?.size === 0) s.dnsNames.delete(name)
      }
      dirtyNames.add(name)
    }
    if (entry.own.omitted) return
    const id = member.dpu.id
    let dpu = s.dpus.get(id)
    if (joined) {
      if (!dpu) {
        dpu = { hosts: new Set(), own: undefined, slot: -1 }
        s.dpus.set(id, dpu)
      }
      dpu.hosts.add(member.hostName)
    } else dpu?.hosts.delete(member.hostName)
    dirtyDpus.add(id)
  }
  const leave = (entry: HostEntry) => {
    join(entry, false)
    retired.push(entry.own)
    if (entry.dns) retired.push(entry.dns)
  }

  // Members: an unchanged one keeps its part; a new or changed one gets a new part.
  let lastIndex = -1
  let reordered = false
  const members = spec.members
  for (let i = 0; i < members.length; i++) {
    const m = members[i] as GroupMember
    const entry = s.hosts.get(m?.hostName)
    if (entry?.stamp === stamp) throw new InvalidTopologySpec(g, `duplicate member ${m.hostName}`)
    // An unchanged member was valid at its last compile and is the same now.
    if (entry && sameMember(entry.member, m)) {
      if (entry.index < lastIndex) reordered = true
      lastIndex = entry.index
      entry.index = i
      entry.stamp = stamp
      continue
    }
    if (checkMembers && !v.is(GroupMemberSchema, m)) validate(spec)
    if (entry) leave(entry)
    const next: HostEntry = {
      member: m,
      own: build((draft) => c.memberRows(draft, m)),
      dns: undefined,
      index: i,
      stamp,
    }
    s.hosts.set(m.hostName, next)
    join(next, true)
    renamed.push(next)
  }
  if (s.hosts.size > members.length) {
    for (const [name, entry] of s.hosts) {
      if (entry.stamp === stamp) continue
      leave(entry)
      s.hosts.delete(name)
    }
  }

  // DNS: a placed host whose name no other member has gets its records.
  if (spec.dns) {
    const decide = new Set<HostEntry>(renamed)
    for (const name of dirtyNames) {
      const holders = s.dnsNames.get(name)
      if (holders && holders.size >= 2) s.clashes.add(name)
      else s.clashes.delete(name)
      for (const host of holders ?? []) {
        const entry = s.hosts.get(host)
        if (entry) decide.add(entry)
      }
    }
    for (const entry of decide) {
      const wanted = !entry.own.omitted && !s.clashes.has(dnsNameOf(entry.member))
      if (wanted && !entry.dns) entry.dns = build((draft) => c.dnsRows(draft, entry.member))
      else if (!wanted && entry.dns) {
        retired.push(entry.dns)
        entry.dns = undefined
      }
    }
  }

  // Per DPU: transit switch, gateway router, public switch, NAT. Rebuilt when its hosts
  // or their parts changed, or its link slot did (DPUs joining or leaving may move it).
  let dpuSetChanged = false
  for (const id of dirtyDpus) {
    const dpu = s.dpus.get(id)
    if (dpu?.hosts.size === 0) {
      if (dpu.own) retired.push(dpu.own)
      s.dpus.delete(id)
      dpuSetChanged = true
    } else if (dpu && dpu.slot === -1) dpuSetChanged = true
  }
  if (dpuSetChanged) {
    const slots = linkLocalSlots([...s.dpus.keys()])
    for (const [id, dpu] of s.dpus) {
      const slot = slots.get(id) ?? 0
      if (slot !== dpu.slot) dirtyDpus.add(id)
      dpu.slot = slot
    }
    s.dpuOrder = [...s.dpus.keys()].sort()
  }
  for (const id of reordered ? s.dpus.keys() : dirtyDpus) {
    const dpu = s.dpus.get(id)
    if (!dpu) continue
    const hosts = [...dpu.hosts]
      .flatMap((h) => s.hosts.get(h) ?? [])
      .sort((a, b) => a.index - b.index)
      .map((e) => e.member)
    if (dpu.own) retired.push(dpu.own)
    dpu.own = build((draft) => c.dpuRows(draft, id, dpu.slot, hosts))
  }

  // Loose rows, built on every compile: relays and policies.
  const relays: Draft = { rows: [], problems: [], omitted: false }
  for (const r of spec.dhcpRelayPorts ?? []) c.relayRows(relays, r)
  const rules = spec.policies ?? []
  const policies = policyRows(
    g,
    rules,
    rules.length === 0 ? [] : members.filter((m) => s.hosts.get(m.hostName)?.own.omitted === false),
  )
  const loose = [...relays.rows, ...policies.rows]
  const dropped = uniqueIds(g, s, built, retired, loose)

  // The parts in the order the rows come in: head, each host (and its DNS records) in
  // the spec's order, then the DPUs by id.
  const hostParts: Fragment[] = [s.headPart]
  for (const m of members) {
    const entry = s.hosts.get(m.hostName) as HostEntry
    hostParts.push(entry.own)
    if (entry.dns) hostParts.push(entry.dns)
  }
  const dpuParts = s.dpuOrder.flatMap((id) => s.dpus.get(id)?.own ?? [])
  let rows: DesiredRow[] | undefined
  const problems: TopologyProblem[] = []
  for (const part of hostParts) if (part.problems.length > 0) problems.push(...part.problems)
  for (const part of dpuParts) if (part.problems.length > 0) problems.push(...part.problems)
  problems.push(...relays.problems)
  problems.push(...dnsClashProblems(g, s))
  const result: DesiredRows = {
    group: g,
    owner: c.owner,
    // Built when asked for: an apply that compares only what changed never asks.
    get rows(): readonly DesiredRow[] {
      rows ??= [
        ...hostParts.flatMap((p) => p.rows),
        ...relays.rows,
        ...policies.rows,
        ...dpuParts.flatMap((p) => p.rows),
      ]
      return rows
    },
    problems,
    ...(policies.status.rules > 0 ? { policies: policies.status } : {}),
  }
  return { result, built: [...built.flatMap((f) => f.rows), ...loose], dropped }
}

/** The problems of DNS names more than one member has: none of them gets a record. */
function dnsClashProblems(g: string, s: GroupCompile): TopologyProblem[] {
  if (s.clashes.size === 0) return []
  const indexOf = (host: string) => s.hosts.get(host)?.index ?? 0
  const clashes = [...s.clashes].map((name) => ({
    name,
    hosts: [...(s.dnsNames.get(name) ?? [])].sort((a, b) => indexOf(a) - indexOf(b)),
  }))
  // In the order the spec first names each.
  clashes.sort((a, b) => indexOf(a.hosts[0] ?? '') - indexOf(b.hosts[0] ?? ''))
  const problems: TopologyProblem[] = []
  for (const { name, hosts } of clashes) {
    for (const host of hosts) {
      const others = hosts.filter((h) => h !== host)
      const { code, message } = new DnsNameConflict(g, host, name, others)
      problems.push({ code, message, host })
    }
  }
  return problems
}

/** A member's name in its group's DNS. */
function dnsNameOf(m: GroupMember): string {
  return m.dnsName ?? m.hostName
}

/** Rows built for one part of a group (its head, one host, one DPU), with their ids. */
interface Fragment {
  readonly rows: readonly DesiredRow[]
  readonly ids: readonly string[]
  readonly problems: readonly TopologyProblem[]
  /** A host left out of the topology (nothing of it is built). */
  readonly omitted: boolean
}

/** A member as its group's last compile had it. */
interface HostEntry {
  readonly member: GroupMember
  /** Its part (its port, NAT, reroute, …). */
  readonly own: Fragment
  /** Its DNS records, when it has a name no other member has. */
  dns: Fragment | undefined
  /** Its place in the spec's members. */
  index: number
  /** The compile that last saw it. */
  stamp: number
}

/** A DPU with placed hosts, and its part. */
interface DpuEntry {
  readonly hosts: Set<string>
  own: Fragment | undefined
  /** Its link-local slot (-1 until placed). */
  slot: number
}

/**
 * A group's compiled state: every part by what it was built from, and every row by id.
 * A `CompileMemo` keeps it from one compile of the group to the next.
 */
class GroupCompile {
  headPart: Fragment | undefined
  readonly hosts = new Map<string, HostEntry>()
  readonly dpus = new Map<string, DpuEntry>()
  /** DPU ids in order. */
  dpuOrder: string[] = []
  /** Members by DNS name (placed or not: a left-out host's name still clashes). */
  readonly dnsNames = new Map<string, Set<string>>()
  /** DNS names more than one member has. */
  readonly clashes = new Set<string>()
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
function uniqueIds(
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
function sameMember(known: GroupMember, m: GroupMember): boolean {
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

/**
 * The spec's own settings, its members aside (the caller checks they are an array; each
 * is checked as the compile meets it).
 */
const GroupSpecHead = v.object({ ...GroupTopologySpecSchema.entries, members: v.unknown() })

/**
 * Validates the whole spec; any failure is reported with paths like `members.3.mac`.
 *
 * @throws InvalidTopologySpec
 */
function validate(spec: GroupTopologySpec): void {
  const parsed = v.safeParse(GroupTopologySpecSchema, spec)
  if (parsed.success) return
  throw new InvalidTopologySpec(
    String(spec.name),
    'invalid spec',
    parsed.issues.map((i) => ({ path: v.getDotPath(i) ?? '', message: i.message })),
  )
}
