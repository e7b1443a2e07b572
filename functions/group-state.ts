/**
 * Reading a group's full desired state (its spec, its live hosts and their addresses)
 * and turning it into the OVN topology spec lib/ovn compiles. Every topology apply passes
 * the WHOLE group, so concurrent handlers for different hosts never lose each other's work.
 */
import { createHash } from 'node:crypto'
import { formatIp, parseCidr } from '../lib/ipam/address.ts'
import type { NetworkSpec } from '../lib/ipam/index.ts'
import { applyGroupTopology, type GroupMember, type GroupTopologySpec } from '../lib/ovn/index.ts'
import type { ManagedResource, ResourceGroup } from '../lib/state/objects.ts'
import type { FabricSettings, HandlerDeps } from './deps.ts'

/** The NB logical switch port of a host: unique across groups because host names are. */
export function logicalPortOf(group: string, host: string): string {
  return `hz-${group}-${host}`
}

/** The NB logical switch port of a group's DHCP relay on one DPU. */
export function relayLogicalPortOf(group: string, dpuId: string): string {
  return `hz-${group}-relay-${dpuId}`
}

/**
 * The IPAM owner of a group's relay address on one DPU. The `/` keeps it apart from host
 * names, which are RFC 1123 labels.
 */
export function relayOwnerOf(dpuId: string): string {
  return `relay/${dpuId}`
}

/** A deterministic, locally administered unicast MAC for a relay port. */
export function relayMacOf(group: string, dpuId: string): string {
  const h = createHash('sha256').update(`${group}/${dpuId}/relay`).digest()
  const bytes = [0x0a, h[0] ?? 0, h[1] ?? 0, h[2] ?? 0, h[3] ?? 0, h[4] ?? 0]
  return bytes.map((b) => b.toString(16).padStart(2, '0')).join(':')
}

/** The group's IPAM network: its subnets with one pool each covering the usable range. */
export function networkSpecOf(group: ResourceGroup): NetworkSpec {
  const subnets = [
    { cidr: group.spec.network.cidr, gateway: group.spec.network.gateway, dhcp: true },
    ...(group.spec.extraSubnets ?? []),
  ]
  return {
    subnets: subnets.map((s) => {
      const span = parseCidr(s.cidr)
      const size = span.last - span.first + 1n
      // IPv4 skips network and broadcast; IPv6 pools are bounded (the first 65,536).
      const first = span.version === 4 && size > 2n ? span.first + 1n : span.first
      const last =
        span.version === 4
          ? size > 2n
            ? span.last - 1n
            : span.last
          : span.first + (size < 65_536n ? size - 1n : 65_535n)
      const at = (value: bigint) => formatIp({ version: span.version, value })
      return {
        cidr: s.cidr,
        ...(s.gateway ? { gateway: s.gateway } : {}),
        dhcp: s.dhcp ?? false,
        pools: [{ start: at(first), end: at(last), name: 'default' }],
      }
    }),
  }
}

export interface MemberState {
  readonly host: ManagedResource
  readonly ip: string
  readonly publicIp?: string
}

/**
 * The live members of a group: hosts that hold an address and are not being detached.
 * `allocations` is a snapshot of the group's addresses already read by the caller.
 */
export async function groupMembers(
  deps: Pick<HandlerDeps, 'store' | 'ipam'>,
  group: string,
  options: { allocations?: readonly { owner: string; ip: string }[] } = {},
): Promise<MemberState[]> {
  const [hosts, publicIps, allocations] = await Promise.all([
    deps.store.listHosts({ resourceGroup: group }),
    deps.ipam.listPublicIps(),
    options.allocations ?? deps.ipam.allocations(group),
  ])
  const publicByOwner = new Map(
    publicIps.filter((p) => p.allocatedTo).map((p) => [p.allocatedTo ?? '', p.ip]),
  )
  const ipByOwner = new Map(allocations.map((a) => [a.owner, a.ip]))
  const members: MemberState[] = []
  for (const host of hosts) {
    if (host.deletion) continue
    const ip = ipByOwner.get(host.name)
    if (!ip) continue
    const publicIp = publicByOwner.get(host.name)
    members.push({ host, ip, ...(publicIp ? { publicIp } : {}) })
  }
  return members
}

/** The topology lib/ovn compiles for a group with these members. */
export function topologyOf(
  group: ResourceGroup,
  members: readonly MemberState[],
  fabric: FabricSettings,
  /** DPU id → the address IPAM reserved for the group's relay there. */
  relayIps: ReadonlyMap<string, string> = new Map(),
): GroupTopologySpec {
  const dpus = [...new Set(members.map((m) => m.host.spec.dpu.id))].sort()
  return {
    name: group.name,
    cidr: group.spec.network.cidr,
    gateway: group.spec.network.gateway,
    dummyFabricIp: fabric.dummyIp,
    ...(fabric.gateway ? { fabricGatewayIp: fabric.gateway } : {}),
    physicalNetwork: fabric.physicalNetwork,
    members: members.map(
      (m): GroupMember => ({
        hostName: m.host.name,
        logicalPort: logicalPortOf(group.name, m.host.name),
        mac: m.host.spec.hostMAC,
        ip: m.ip,
        dpu: {
          id: m.host.spec.dpu.id,
          ...(m.host.spec.dpu.ips[1] ? { natIp: m.host.spec.dpu.ips[1] } : {}),
        },
        access: m.host.spec.hostAccess,
        ...(m.publicIp && m.host.spec.hostAccess === 'PublicAccess'
          ? { publicIp: m.publicIp }
          : {}),
      }),
    ),
    ...(group.spec.dhcpServer
      ? {
          dhcpRelayPorts: dpus.map((dpuId) => {
            const ip = relayIps.get(dpuId)
            return {
              dpuId,
              portName: relayLogicalPortOf(group.name, dpuId),
              mac: relayMacOf(group.name, dpuId),
              ...(ip ? { ip } : {}),
            }
          }),
        }
      : {}),
  }
}

type ApplyDeps = Pick<HandlerDeps, 'store' | 'ipam' | 'ovn' | 'nb' | 'fabric'>
type Applied = Awaited<ReturnType<typeof applyOnce>>

/** Per group: the apply in flight, and the one queued behind it that later callers share. */
interface GroupApplies {
  running?: Promise<Applied> | undefined
  next?: Promise<Applied> | undefined
}
const inFlight = new WeakMap<ApplyDeps['nb'], Map<string, GroupApplies>>()

/**
 * Applies the group's whole current topology to its OVN NB.
 *
 * Applies of one group in this process are coalesced: while one runs, every caller that
 * arrives shares the single apply that starts when it ends. That apply reads the group's
 * state after all of them made their changes (allocations, deletion marks), so each
 * caller's change is in it — 50 concurrent attaches cost a few applies, not 50 that
 * race for the same rows. Across processes, lib/ovn's generation guard keeps concurrent
 * applies from losing each other's work.
 */
export function applyGroup(deps: ApplyDeps, group: ResourceGroup): Promise<Applied> {
  let groups = inFlight.get(deps.nb)
  if (!groups) {
    groups = new Map()
    inFlight.set(deps.nb, groups)
  }
  const state = groups.get(group.name) ?? {}
  groups.set(group.name, state)
  if (!state.running) {
    state.running = applyOnce(deps, group).finally(() => {
      state.running = undefined
    })
    return state.running
  }
  if (!state.next) {
    const after = state.running.catch(() => undefined)
    state.next = after.then(() => {
      state.next = undefined
      state.running = applyOnce(deps, group).finally(() => {
        state.running = undefined
      })
      return state.running
    })
  }
  return state.next
}

async function applyOnce(deps: ApplyDeps, requested: ResourceGroup) {
  const endpoints = await deps.ovn.ensure(requested.name)
  const { client, cache } = await deps.nb.get(endpoints.nb)
  let members: MemberState[] = []
  // Read on every attempt: after a lost race (another process applied this group), the
  // group's members are read again, so the winner's host is not undone.
  const readTopology = async () => {
    const group = (await deps.store.getGroup(requested.name)) ?? requested
    // One snapshot of the group's addresses serves both the members and the relays: a
    // host's address is always taken before its DPU's relay address, so a relay held
    // for a DPU is never mistaken for one whose DPU has no member.
    const allocations = await deps.ipam.allocations(group.name)
    members = await groupMembers(deps, group.name, { allocations })
    // Relay addresses: those of DPUs with members go on the relay LSPs; those of DPUs
    // without members any more go back to the pool (so that the network can be deleted).
    const relayIps = new Map<string, string>()
    const dpus = new Set(members.map((m) => m.host.spec.dpu.id))
    for (const { owner, ip } of allocations) {
      if (!owner.startsWith(relayOwnerOf(''))) continue
      const dpu = owner.slice(relayOwnerOf('').length)
      if (dpus.has(dpu)) relayIps.set(dpu, ip)
      else await deps.ipam.release(group.name, owner)
    }
    return topologyOf(group, members, deps.fabric, relayIps)
  }
  const result = await applyGroupTopology(client, readTopology, { cache })
  return { endpoints, members, result }
}
