import * as v from 'valibot'
import { linkLocalSlots } from './addresses.ts'
import { type Draft, groupContext, newDraft } from './context.ts'
import { dnsGuardRows, hostDnsRows } from './dns.ts'
import { DnsNameConflict, InvalidTopologySpec } from './errors.ts'
import { gatewayRows } from './gateway.ts'
import { natRows } from './nat.ts'
import { policyRows } from './policies.ts'
import { relayRows } from './relay.ts'
import { edgePolicyRows, guardRows, routerRows } from './router.ts'
import {
  type GroupMember,
  GroupMemberSchema,
  type GroupTopologySpec,
  GroupTopologySpecSchema,
} from './spec.ts'
import { hostPortRows, switchRows } from './switch.ts'

export { transitAddresses } from './addresses.ts'
export {
  CHILD_COLUMNS,
  type CompileChanges,
  type DesiredRow,
  type DesiredRows,
  isParentTable,
  type ParentRef,
  type RowLinks,
  TOPOLOGY_TABLES,
  type TopologyProblem,
  type TopologyTable,
} from './rows.ts'

import {
  type CompileMemo,
  type Fragment,
  GroupCompile,
  type HostEntry,
  rowId,
  sameMember,
  uniqueIds,
} from './memo.ts'
import type { DesiredRow, DesiredRows, TopologyProblem } from './rows.ts'

export { CompileMemo, rowId } from './memo.ts'

export { REROUTE_POLICY_PRIORITY } from './nat.ts'

/**
 * Compiles a group's desired state into the NB rows of its user-defined network topology.
 * Pure: same spec, same rows. Each part is its own module, composed here in order:
 * `router.ts` (the guard, the distributed router), `switch.ts` (the switch, host ports),
 * `dns.ts`, `gateway.ts` and `nat.ts` (per DPU), `relay.ts`, `policies.ts`.
 *
 * - distributed: switch `hz/<g>/ls` (host ports, DHCP relay ports) and router `hz/<g>/lr`
 *   with the gateway IP and each routed extra subnet's gateway, a default route per DPU
 *   (ECMP) and, per DPU, one reroute policy to its gateway router matching an
 *   `Address_Set` of that DPU's routed IPv4 hosts (with two routed IPv4 subnets or more,
 *   traffic between them is allowed first), so an attach or detach changes the set and
 *   never the router; and the group's guard, an `Address_Set` no match names, whose
 *   `external_ids` carry the generation every apply bumps (`diff.ts`);
 * - per DPU `d`: transit switch `hz/<g>/dpu/<d>/ts`, gateway router `hz/<g>/dpu/<d>/gw` pinned to
 *   chassis `d`, public switch `hz/<g>/dpu/<d>/pub` with a localnet port; a route back and an
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
  const c = groupContext(spec)
  const stamp = ++s.stamp
  /** Parts this compile built, and parts it stopped using. */
  const built: Fragment[] = []
  const retired: Fragment[] = []
  const build = (make: (draft: Draft) => void): Fragment => {
    const draft = newDraft()
    make(draft)
    const part = { ...draft, ids: draft.rows.map(rowId) }
    built.push(part)
    return part
  }
  // The head: the guard, the distributed switch and router, their policies and DNS guard.
  s.headPart ??= build(({ rows }) => {
    rows.push(...guardRows(c), ...switchRows(c), ...routerRows(c))
    rows.push(...dnsGuardRows(c), ...edgePolicyRows(c))
  })

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
      own: build((draft) => hostPortRows(c, draft, m)),
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
      if (wanted && !entry.dns) entry.dns = build((draft) => hostDnsRows(c, draft, entry.member))
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
    dpu.own = build((draft) => {
      gatewayRows(c, draft, id, dpu.slot, hosts)
      natRows(c, draft, id, dpu.slot, hosts)
    })
  }

  // Loose rows, built on every compile: relays and policies.
  const relays: Draft = newDraft()
  for (const r of spec.dhcpRelayPorts ?? []) relayRows(c, relays, r)
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
    owner: c.b.owner,
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
