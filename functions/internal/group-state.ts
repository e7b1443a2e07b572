/**
 * A group's full desired state, read from the store in one place, and the pure functions
 * that turn it into the OVN topology lib/ovn compiles and into what the group's status
 * says of an apply. Every topology apply passes the WHOLE group, so concurrent handlers
 * for different hosts never lose each other's work.
 */

import { ipv6OwnerOf } from '../../lib/ipam/group-network.ts'
import type { Ipam } from '../../lib/ipam/index.ts'
import { primaryNetwork } from '../../lib/model/group-network.ts'
import {
  type ManagedResource,
  type ResourceGroup,
  type ResourceGroupStatus,
  setCondition,
} from '../../lib/model/objects.ts'
import type {
  DesiredRows,
  GroupMember,
  GroupTopologySpec,
  PolicyStatus,
} from '../../lib/ovn/index.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import type { StateStore } from '../../lib/state/store.ts'
import type { FabricSettings } from './fabric.ts'
import { relayDpuOf, relayMacOf } from './network.ts'
import { topologyPolicies, withPoliciesApplied } from './policies.ts'

/**
 * A host that is on its group's network: it holds an address, is not being detached, and
 * did not fail before its attach first wrote it there (`failedBeforeTopology`).
 */
export interface MemberState {
  readonly host: ManagedResource
  readonly ip: string
  /** In a dual-stack group: its SLAAC address in the group's `network6`. */
  readonly ip6?: string
  readonly publicIp?: string
  /** Its public IPv6 address, while it holds one. */
  readonly publicIp6?: string
}

/** Everything the group's topology is computed from. */
export interface GroupState {
  readonly group: ResourceGroup
  readonly members: readonly MemberState[]
  /** DPU id → the group's relay address there, for every DPU that serves a member. */
  readonly relayIps: ReadonlyMap<string, string>
  /**
   * IPAM owners of relay addresses on DPUs that serve no member any more (or of every
   * relay, once the group has no `dhcpServer`). They are not in the topology; the apply
   * returns them to the pool once NB no longer uses them.
   */
  readonly staleRelayOwners: readonly string[]
}

/**
 * Reads the group's state: its spec, its live members with their addresses and public
 * IPs, and its relay addresses. Undefined when the group does not exist.
 *
 * One snapshot of the group's addresses serves both the members and the relays: a host's
 * address is always taken before its DPU's relay address, so a relay held for a DPU is
 * never mistaken for one whose DPU has no member.
 */
export async function readGroupState(
  deps: { readonly store: StateStore; readonly ipam: Ipam },
  name: string,
): Promise<GroupState | undefined> {
  const group = await deps.store.groups.get(name)
  if (!group) return undefined
  const [hosts, allocations] = await Promise.all([
    deps.store.hosts.inGroup(name),
    deps.ipam.allocations(name),
  ])
  const ipByOwner = new Map(allocations.map((a) => [a.owner, a.ip]))
  const publicOwners = hosts.filter((h) => h.spec.hostAccess === 'PublicAccess').map((h) => h.name)
  const [publicByOwner, public6ByOwner] = await Promise.all([
    deps.ipam.publicIpsOf(publicOwners),
    deps.ipam.publicIpsOf(publicOwners, 6),
  ])
  const members: MemberState[] = []
  for (const host of hosts) {
    const ip = ipByOwner.get(host.name)
    if (host.deletion || !ip || failedBeforeTopology(host, name)) continue
    const publicIp = publicByOwner.get(host.name)
    const publicIp6 = public6ByOwner.get(host.name)
    const ip6 = group.spec.network6 ? ipByOwner.get(ipv6OwnerOf(host.name)) : undefined
    members.push({
      host,
      ip,
      ...(ip6 ? { ip6 } : {}),
      ...(publicIp ? { publicIp } : {}),
      ...(publicIp6 ? { publicIp6 } : {}),
    })
  }
  // Relays serve DPUs with members while the group relays DHCP at all.
  const dpus = new Set(group.spec.dhcpServer ? members.map((m) => m.host.spec.dpu.id) : [])
  const relayIps = new Map<string, string>()
  const staleRelayOwners: string[] = []
  for (const { owner, ip } of allocations) {
    const dpu = relayDpuOf(owner)
    if (dpu === undefined) continue
    if (dpus.has(dpu)) relayIps.set(dpu, ip)
    else staleRelayOwners.push(owner)
  }
  return { group, members, relayIps, staleRelayOwners }
}

/**
 * True when the host is Failed and its attach never put it in this group's topology (it
 * failed at its addresses, say): it holds an address from before the failure, but no
 * apply may write its rows until an attempt gets past that point. Its status names its
 * port in this group (`logicalPortReference`) once an attach applied it.
 */
export function failedBeforeTopology(host: ManagedResource, group: string): boolean {
  return (
    host.status.phase === 'Failed' &&
    host.status.logicalPortReference?.logicalPort !== topologyNames.hostPort(group, host.name)
  )
}

/**
 * The topology lib/ovn compiles for a group's state; with a `dnsZone`, its hosts' DNS
 * names too, unless the group turned DNS off. Pure: same state, same topology.
 */
export function topologyOf(
  state: GroupState,
  fabric: FabricSettings,
  dnsZone?: string,
): GroupTopologySpec {
  const { group, members, relayIps } = state
  const dpus = [...new Set(members.map((m) => m.host.spec.dpu.id))].sort()
  return {
    name: group.name,
    // An IPv6-only group's primary network is its network6, which then sends RAs too.
    cidr: primaryNetwork(group.spec).cidr,
    gateway: primaryNetwork(group.spec).gateway,
    ...(group.spec.extraSubnets?.length
      ? {
          extraSubnets: group.spec.extraSubnets.map((s) => ({
            cidr: s.cidr,
            ...(s.gateway ? { gateway: s.gateway } : {}),
          })),
        }
      : {}),
    ...(group.spec.network6 ? { network6: { ...group.spec.network6 } } : {}),
    dummyFabricIp: fabric.dummyIp,
    ...(fabric.gateway ? { fabricGatewayIp: fabric.gateway } : {}),
    ...(fabric.dummyIp6 ? { dummyFabricIp6: fabric.dummyIp6 } : {}),
    ...(fabric.gateway6 ? { fabricGatewayIp6: fabric.gateway6 } : {}),
    physicalNetwork: fabric.physicalNetwork,
    members: members.map((m) => memberOf(group.name, m)),
    ...(group.spec.dhcpServer
      ? {
          dhcpRelayPorts: dpus.map((dpuId) => {
            const ip = relayIps.get(dpuId)
            return {
              dpuId,
              portName: topologyNames.relayPort(group.name, dpuId),
              mac: relayMacOf(group.name, dpuId),
              ...(ip ? { ip } : {}),
            }
          }),
        }
      : {}),
    ...(dnsZone && group.spec.dns?.enabled !== false ? { dns: { zone: dnsZone } } : {}),
    ...(group.spec.policies?.length ? { policies: topologyPolicies(group.spec.policies) } : {}),
  }
}

/**
 * A member's part of the topology spec. The same object while its host object (kept
 * decoded by the store, a new one once the host changed), its group and its addresses are
 * the same: the compile then knows the member unchanged without comparing its fields.
 */
function memberOf(group: string, m: MemberState): GroupMember {
  const known = keptMembers.get(m.host)
  if (
    known?.group === group &&
    known.ip === m.ip &&
    known.ip6 === m.ip6 &&
    known.publicIp === m.publicIp &&
    known.publicIp6 === m.publicIp6
  ) {
    return known.member
  }
  const member: GroupMember = {
    hostName: m.host.name,
    logicalPort: topologyNames.hostPort(group, m.host.name),
    mac: m.host.spec.hostMAC,
    ip: m.ip,
    ...(m.ip6 ? { ip6: m.ip6 } : {}),
    dpu: {
      id: m.host.spec.dpu.id,
      ...(m.host.spec.dpu.ips[1] ? { natIp: m.host.spec.dpu.ips[1] } : {}),
      ...(m.host.spec.dpu.natIp6 ? { natIp6: m.host.spec.dpu.natIp6 } : {}),
    },
    access: m.host.spec.hostAccess,
    ...(m.publicIp && m.host.spec.hostAccess === 'PublicAccess' ? { publicIp: m.publicIp } : {}),
    ...(m.publicIp6 && m.host.spec.hostAccess === 'PublicAccess' ? { publicIp6: m.publicIp6 } : {}),
    ...(m.host.spec.hostname ? { dnsName: m.host.spec.hostname } : {}),
  }
  keptMembers.set(m.host, {
    group,
    ip: m.ip,
    ip6: m.ip6,
    publicIp: m.publicIp,
    publicIp6: m.publicIp6,
    member,
  })
  return member
}
const keptMembers = new WeakMap<
  MemberState['host'],
  {
    readonly group: string
    readonly ip: string
    readonly ip6: string | undefined
    readonly publicIp: string | undefined
    readonly publicIp6: string | undefined
    readonly member: GroupMember
  }
>()

/**
 * What a group's status reports of its members, kept live by every apply: how many there
 * are, and the NAT IPs of the DPUs serving them (sorted).
 */
export type MembersStatus = Pick<ResourceGroupStatus, 'managedResourceCount' | 'snatIPs'>

/** The group's members as its status reports them. Pure. */
export function membersStatusOf(state: Pick<GroupState, 'members'>): MembersStatus {
  // Every apply of a 1,000-host group passes here: one loop, no array per member.
  const natIps = new Set<string>()
  for (const { host } of state.members) {
    const ips = host.spec.dpu.ips
    for (let i = 1; i < ips.length; i++) natIps.add(ips[i] as string)
  }
  return { managedResourceCount: state.members.length, snatIPs: [...natIps].sort() }
}

/** What one apply of the group's topology left out (`TopologyProblem` of lib/ovn). */
export type TopologyProblems = NonNullable<DesiredRows['problems']>

/**
 * The group's status after an apply of its topology, or undefined when it already says
 * all this (nothing to write). An apply keeps the members' count and NAT IPs live, names
 * what the topology left out (`Degraded=True`, gone once nothing is) and what the group's
 * security policies came to (`PoliciesApplied`, `policies.ts`), and ends a failure
 * of OVN alone (`OvnConfigured=False`) once the group's current version was provisioned:
 * NB accepts the topology again, so the group is Ready again. Pure.
 */
export function appliedStatus(
  group: Pick<ResourceGroup, 'status' | 'specVersion'>,
  members: MembersStatus,
  problems: TopologyProblems,
  ovnService: string,
  policies?: PolicyStatus,
): ResourceGroupStatus | undefined {
  const current = group.status
  let next = withPoliciesApplied(current, policies)
  if (
    current.managedResourceCount !== members.managedResourceCount ||
    current.snatIPs.join() !== members.snatIPs.join()
  ) {
    next = { ...next, ...members, snatIPs: [...members.snatIPs] }
  }
  const degraded = degradedOf(problems)
  const was = current.conditions.find((c) => c.type === DEGRADED)
  if (degraded && (was?.reason !== degraded.reason || was.message !== degraded.message)) {
    next = { ...next, conditions: setCondition(next.conditions, degraded) }
  } else if (!degraded && was?.reason === TOPOLOGY_INCOMPLETE) {
    next = { ...next, conditions: next.conditions.filter((c) => c.type !== DEGRADED) }
  }
  const failures = current.conditions.filter((c) => c.status === 'False')
  const failedInOvn =
    current.phase === 'Failed' &&
    failures.length > 0 &&
    failures.every((c) => c.type === 'OvnConfigured')
  if (failedInOvn && current.observedVersion === group.specVersion) {
    next = {
      ...next,
      phase: 'Ready',
      configsSynced: true,
      conditions: setCondition(next.conditions, {
        type: 'OvnConfigured',
        status: 'True',
        reason: 'TopologyApplied',
        message: `the topology of the group is in ${ovnService} OVN central`,
      }),
    }
  }
  return next === current ? undefined : next
}

const DEGRADED = 'Degraded'
/** `Degraded`'s reason when the topology left something out (the hosts' own is `HostsNotReady`). */
const TOPOLOGY_INCOMPLETE = 'TopologyIncomplete'
const LISTED_PROBLEMS = 5

/** `Degraded=True`, naming what the topology left out; undefined when nothing was. */
function degradedOf(problems: TopologyProblems) {
  if (problems.length === 0) return undefined
  const listed = problems.slice(0, LISTED_PROBLEMS).map((p) => p.message)
  const more = problems.length - listed.length
  return {
    type: DEGRADED,
    status: 'True',
    reason: TOPOLOGY_INCOMPLETE,
    message: `${listed.join('; ')}${more > 0 ? `; and ${more} more` : ''}`,
  } as const
}
