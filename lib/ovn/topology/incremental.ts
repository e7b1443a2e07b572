/**
 * The walk that brings a group's last compile (`GroupCompile`) up to its spec, part by
 * part: it rebuilds the parts of hosts that are new or changed, of DPUs whose hosts or
 * link slot changed, and DNS records whose host or name clash changed, and drops the parts
 * of hosts and DPUs that are gone. DNS changes may be held back for a later compile
 * (`holdDns`). What each part holds is `compile.ts`'s (`GroupParts`);
 * this module only decides which parts to build and puts them in order. Pure but for the
 * `GroupCompile` it updates.
 */
import { linkLocalSlots } from './addresses.ts'
import { type Draft, newDraft } from './context.ts'
import { DnsNameConflict, InvalidTopologySpec } from './errors.ts'
import {
  type Fragment,
  type GroupCompile,
  type HostEntry,
  rowId,
  sameMember,
  uniqueIds,
} from './memo.ts'
import type { PolicyStatus } from './policy-rules.ts'
import type { DesiredRow, DesiredRows, TopologyProblem } from './rows.ts'
import type { GroupMember, GroupTopologySpec } from './spec.ts'

/** How each part of one group's compile is built. */
export interface GroupParts {
  /** Value of the owner key on every row of the group. */
  readonly owner: string
  /** The group's own rows, whatever its hosts: switch, router, guard. */
  readonly head: (draft: Draft) => void
  /** A host's rows (`draft.omitted` when it is left out). */
  readonly host: (draft: Draft, m: GroupMember) => void
  /** A built host's DNS records. */
  readonly hostDns: (draft: Draft, m: GroupMember) => void
  /** A DPU's rows for its built hosts (in the spec's order), on link slot `slot`. */
  readonly dpu: (draft: Draft, dpu: string, slot: number, hosts: GroupMember[]) => void
  /** Rows built on every compile, no part holding them: the relays'. */
  readonly relays: (draft: Draft) => void
  /** The policies' rows over the group's built hosts. */
  readonly policies: (members: GroupMember[]) => { rows: DesiredRow[]; status: PolicyStatus }
}

/** What one compile built and dropped, besides its result (`CompileChanges`). */
export interface CompileOutcome {
  readonly result: DesiredRows
  readonly built: DesiredRow[]
  readonly dropped: DesiredRow[]
}

/** One compile's walk: what it built, retired and marked for the steps after. */
class Walk {
  readonly stamp: number
  /** Parts this compile built, and parts it stopped using. */
  readonly built: Fragment[] = []
  readonly retired: Fragment[] = []
  readonly dirtyDpus = new Set<string>()
  readonly dirtyNames = new Set<string>()
  /** Hosts whose DNS records must be decided again (new, changed or gone). */
  readonly dnsHosts = new Set<string>()
  /** Whether unchanged members moved in the spec's order (every DPU's hosts may have). */
  reordered = false

  constructor(
    readonly spec: GroupTopologySpec,
    readonly g: string,
    readonly s: GroupCompile,
    readonly parts: GroupParts,
    /** DNS changes wait for the next compile that does not hold them. */
    readonly holdDns: boolean,
  ) {
    this.stamp = ++s.stamp
  }

  build(make: (draft: Draft) => void): Fragment {
    const draft = newDraft()
    make(draft)
    const part = { ...draft, ids: draft.rows.map(rowId) }
    this.built.push(part)
    return part
  }

  /**
   * A host joins (or leaves) the holders of its DNS name and, when placed, its DPU's
   * hosts; both are marked for the steps below.
   */
  join(entry: HostEntry, joined: boolean): void {
    const { member } = entry
    const { s } = this
    if (this.spec.dns) {
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
      this.dirtyNames.add(name)
      this.dnsHosts.add(member.hostName)
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
    this.dirtyDpus.add(id)
  }

  leave(entry: HostEntry): void {
    this.join(entry, false)
    this.retired.push(entry.own)
  }
}

/**
 * Brings `s` (the group's last compile, or a new one) to `spec` with `parts`. A pass over
 * the members compares each with its last compile's (no rows built, nothing allocated for
 * an unchanged host); the rest costs what changed. `checkMember` checks a new or changed
 * member (it throws when the spec is invalid). With `holdDns`, the published DNS records
 * stay as they are (`GroupCompile.dns`); the next compile without it brings them up to date.
 *
 * @throws InvalidTopologySpec (a member listed twice, two rows with one id), or what
 *   `checkMember` and `parts` throw
 */
export function compileInto(
  spec: GroupTopologySpec,
  g: string,
  s: GroupCompile,
  parts: GroupParts,
  checkMember: (m: GroupMember) => void,
  holdDns = false,
): CompileOutcome {
  const walk = new Walk(spec, g, s, parts, holdDns)
  s.headPart ??= walk.build(parts.head)
  updateMembers(walk, checkMember)
  if (spec.dns) updateDns(walk)
  updateDpus(walk)
  return assemble(walk)
}

/** Members: an unchanged one keeps its part; a new or changed one gets a new part. */
function updateMembers(walk: Walk, checkMember: (m: GroupMember) => void): void {
  const { s, stamp, g, parts } = walk
  const members = walk.spec.members
  let lastIndex = -1
  for (let i = 0; i < members.length; i++) {
    const m = members[i] as GroupMember
    const entry = s.hosts.get(m?.hostName)
    if (entry?.stamp === stamp) throw new InvalidTopologySpec(g, `duplicate member ${m.hostName}`)
    // An unchanged member was valid at its last compile and is the same now.
    if (entry && sameMember(entry.member, m)) {
      if (entry.index < lastIndex) walk.reordered = true
      lastIndex = entry.index
      entry.index = i
      entry.stamp = stamp
      continue
    }
    checkMember(m)
    if (entry) walk.leave(entry)
    const next: HostEntry = {
      member: m,
      own: walk.build((draft) => parts.host(draft, m)),
      index: i,
      stamp,
    }
    s.hosts.set(m.hostName, next)
    walk.join(next, true)
  }
  if (s.hosts.size > members.length) {
    for (const [name, entry] of s.hosts) {
      if (entry.stamp === stamp) continue
      walk.leave(entry)
      s.hosts.delete(name)
    }
  }
}

/**
 * DNS: a placed host whose name no other member has gets its records, built from the
 * member as it is. The hosts to decide are those new, changed or gone and those whose
 * name's clash changed; held (`walk.holdDns`), they are noted for the next compile that
 * publishes and the published records stay as they are.
 */
function updateDns(walk: Walk): void {
  const { s, parts, dnsHosts } = walk
  for (const name of walk.dirtyNames) {
    const holders = s.dnsNames.get(name)
    if (holders && holders.size >= 2) s.clashes.add(name)
    else s.clashes.delete(name)
    for (const host of holders ?? []) dnsHosts.add(host)
  }
  if (walk.holdDns) {
    for (const host of dnsHosts) s.dnsPending.add(host)
    return
  }
  for (const host of s.dnsPending) dnsHosts.add(host)
  s.dnsPending.clear()
  for (const host of dnsHosts) {
    const entry = s.hosts.get(host)
    const published = s.dns.get(host)
    const wanted =
      entry !== undefined && !entry.own.omitted && !s.clashes.has(dnsNameOf(entry.member))
    // Unchanged: the member it was built from is the member still (an unchanged member
    // keeps its entry, and its object).
    if (wanted && published?.member === entry.member) continue
    if (published) {
      walk.retired.push(published.part)
      s.dns.delete(host)
    }
    if (wanted) {
      const { member } = entry
      s.dns.set(host, { member, part: walk.build((draft) => parts.hostDns(draft, member)) })
    }
  }
}

/**
 * Per DPU: transit switch, gateway router, public switch, NAT. Rebuilt when its hosts or
 * their parts changed, or its link slot did (DPUs joining or leaving may move it).
 */
function updateDpus(walk: Walk): void {
  const { s, dirtyDpus, parts } = walk
  let dpuSetChanged = false
  for (const id of dirtyDpus) {
    const dpu = s.dpus.get(id)
    if (dpu?.hosts.size === 0) {
      if (dpu.own) walk.retired.push(dpu.own)
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
  for (const id of walk.reordered ? s.dpus.keys() : dirtyDpus) {
    const dpu = s.dpus.get(id)
    if (!dpu) continue
    const hosts = [...dpu.hosts]
      .flatMap((h) => s.hosts.get(h) ?? [])
      .sort((a, b) => a.index - b.index)
      .map((e) => e.member)
    if (dpu.own) walk.retired.push(dpu.own)
    dpu.own = walk.build((draft) => parts.dpu(draft, id, dpu.slot, hosts))
  }
}

/**
 * The loose rows (relays, policies), built on every compile, and the result: the parts in
 * the order the rows come in — head, each host (and its DNS records) in the spec's order,
 * relays, policies, then the DPUs by id.
 */
function assemble(walk: Walk): CompileOutcome {
  const { s, g, spec, parts, built, retired } = walk
  const members = spec.members
  const relays = newDraft()
  parts.relays(relays)
  const policies = parts.policies(
    (spec.policies ?? []).length === 0
      ? []
      : members.filter((m) => s.hosts.get(m.hostName)?.own.omitted === false),
  )
  const loose = [...relays.rows, ...policies.rows]
  const dropped = uniqueIds(g, s, built, retired, loose)

  const hostParts: Fragment[] = [s.headPart as Fragment]
  for (const m of members) {
    const entry = s.hosts.get(m.hostName) as HostEntry
    hostParts.push(entry.own)
    const dns = s.dns.get(m.hostName)
    if (dns) hostParts.push(dns.part)
  }
  // Records of hosts gone, still published while DNS changes are held.
  for (const host of s.dnsPending) {
    const dns = s.hosts.has(host) ? undefined : s.dns.get(host)
    if (dns) hostParts.push(dns.part)
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
    owner: parts.owner,
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
    ...(s.dnsPending.size > 0 ? { dnsHeld: true as const } : {}),
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
