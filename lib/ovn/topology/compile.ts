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
 * - with `network6` (dual-stack): the distributed router takes its gateway too and sends
 *   router advertisements for SLAAC there; each host's port holds its `ip6` beside its
 *   address (IPv6 stays in the group: no route, NAT or reroute takes it out);
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
    spec.physicalNetwork,
    spec.dns ?? null,
  ])
  const previous = memo?.previous(g, head)
  const memberSigs = Array.isArray(spec.members) ? spec.members.map(memberSignature) : []
  validate(spec, memberSigs, previous)
  const fragments = new Map<string, Fragment>()
  const fragment = (signature: string, build: (draft: Draft) => void): Fragment => {
    let found = fragments.get(signature) ?? previous?.get(signature)
    if (!found) {
      const draft: Draft = { rows: [], problems: [], omitted: false }
      build(draft)
      found = { ...draft, ids: draft.rows.map(rowId) }
    }
    fragments.set(signature, found)
    return found
  }

  const c = groupParts(spec)
  const rows: DesiredRow[] = [...fragment('head', ({ rows }) => c.headRows(rows)).rows]
  const placed: { member: GroupMember; sig: string }[] = []
  const dnsClashes = spec.dns ? dnsNameClashes(spec.members) : new Map<string, string[]>()
  for (const [i, m] of spec.members.entries()) {
    const sig = memberSigs[i] ?? ''
    if (fragments.has(`m${sig}`)) throw new InvalidTopologySpec(g, `duplicate member ${m.hostName}`)
    const built = fragment(`m${sig}`, (draft) => c.memberRows(draft, m))
    rows.push(...built.rows)
    if (built.omitted) continue
    placed.push({ member: m, sig })
    if (spec.dns && !dnsClashes.has(dnsNameOf(m))) {
      rows.push(...fragment(`n${sig}`, (draft) => c.dnsRows(draft, m)).rows)
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

  // Per DPU: transit switch, gateway router, public switch, NAT.
  const byDpu = new Map<string, { members: GroupMember[]; sigs: string[] }>()
  for (const { member, sig } of placed) {
    const entry = byDpu.get(member.dpu.id) ?? { members: [], sigs: [] }
    entry.members.push(member)
    entry.sigs.push(sig)
    byDpu.set(member.dpu.id, entry)
  }
  const slots = linkLocalSlots([...byDpu.keys()])
  for (const [dpu, { members, sigs }] of [...byDpu].sort(([a], [b]) =>
    a < b ? -1 : a > b ? 1 : 0,
  )) {
    const slot = slots.get(dpu) ?? 0
    const built = fragment(`d${JSON.stringify(dpu)}/${slot}/${sigs.join(',')}`, (draft) =>
      c.dpuRows(draft, dpu, slot, members),
    )
    rows.push(...built.rows)
  }
  const seen = new Set<string>()
  const unmemoised = [...relays.rows, ...policies.rows].map(rowId)
  for (const ids of [...[...fragments.values()].map((f) => f.ids), unmemoised]) {
    for (const id of ids) {
      if (seen.has(id)) throw new InvalidTopologySpec(g, `duplicate ${id.replace('/', ' ')}`)
      seen.add(id)
    }
  }
  memo?.remember(g, head, fragments)
  const problems = [...[...fragments.values()].flatMap((f) => f.problems), ...relays.problems]
  for (const [name, hosts] of dnsClashes) {
    for (const host of hosts) {
      const others = hosts.filter((h) => h !== host)
      const { code, message } = new DnsNameConflict(g, host, name, others)
      problems.push({ code, message, host })
    }
  }
  return {
    group: g,
    owner: c.owner,
    rows,
    problems,
    ...(policies.status.rules > 0 ? { policies: policies.status } : {}),
  }
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
  readonly #groups = new Map<string, { head: string; fragments: Map<string, Fragment> }>()

  /** @internal The group's parts from its last compile, when its network is unchanged. */
  previous(group: string, head: string): ReadonlyMap<string, Fragment> | undefined {
    const entry = this.#groups.get(group)
    return entry?.head === head ? entry.fragments : undefined
  }

  /** @internal */
  remember(group: string, head: string, fragments: Map<string, Fragment>): void {
    this.#groups.set(group, { head, fragments })
  }

  forget(group: string): void {
    this.#groups.delete(group)
  }
}

/** `<table>/<key>`: a desired row's identity in its group. */
export function rowId(row: { readonly table: string; readonly key: string }): string {
  return `${row.table}/${row.key}`
}

function memberSignature(m: GroupMember): string {
  return JSON.stringify([
    m?.hostName,
    m?.logicalPort,
    m?.mac,
    m?.ip,
    m?.ip6,
    m?.dpu?.id,
    m?.dpu?.natIp,
    m?.access,
    m?.publicIp,
    m?.dnsName,
  ])
}

/**
 * Validates the spec. A member whose signature the group's last compile already used was
 * valid then and is the same now: only new members are checked one by one, and any
 * failure is reported as the whole spec's parse reports it (paths like `members.3.mac`).
 */
function validate(
  spec: GroupTopologySpec,
  memberSigs: readonly string[],
  previous: ReadonlyMap<string, Fragment> | undefined,
): void {
  const known =
    previous !== undefined &&
    Array.isArray(spec.members) &&
    v.is(GroupTopologySpecSchema, { ...spec, members: [] }) &&
    spec.members.every((m, i) => previous.has(`m${memberSigs[i]}`) || v.is(GroupMemberSchema, m))
  if (known) return
  const parsed = v.safeParse(GroupTopologySpecSchema, spec)
  if (parsed.success) return
  throw new InvalidTopologySpec(
    String(spec.name),
    'invalid spec',
    parsed.issues.map((i) => ({ path: v.getDotPath(i) ?? '', message: i.message })),
  )
}
