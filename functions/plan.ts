/**
 * Dry runs: what a group or host request would change — NB rows, FRR prefixes, agent
 * jobs, addresses — computed the way the handlers would compute it (the group's state →
 * `topologyOf` → the diff against its NB), with nothing stored, enqueued, allocated or
 * written. Read-only: a central that is not running is not started (its rows count as
 * none), and addresses a pool would pick are predicted from the pool's map.
 */
import { isIP } from 'node:net'
import { HydrazineError } from '../lib/errors.ts'
import { eui64Address, formatIp, parseIp } from '../lib/ipam/address.ts'
import { ipv6OwnerOf } from '../lib/ipam/group-network.ts'
import { DEFAULT_POOL } from '../lib/model/group-network.ts'
import {
  implementationOf,
  type ManagedResource,
  type ResourceGroup,
  type ResourceGroupSpec,
} from '../lib/model/objects.ts'
import type {
  ChangePlan,
  PlannedAddress,
  PlannedAgentJob,
  PlannedPrefix,
  Planner,
} from '../lib/model/plans.ts'
import {
  compileGroupTopology,
  type DesiredRows,
  emptyRows,
  type OvnCentralEndpoints,
  ownerOf,
  planGroupRows,
  planTopology,
} from '../lib/ovn/index.ts'
import type { HandlerDeps } from './internal/deps.ts'
import { fabricGroupPlan } from './internal/fabric-group.ts'
import {
  type GroupState,
  type MemberState,
  readGroupState,
  topologyOf,
} from './internal/group-state.ts'
import {
  memberSettingsOf,
  ownsSlaacAddress,
  relayOwnerOf,
  type SlaacChange,
  slaacChangeOf,
} from './internal/network.ts'
import { natIp6Of, publicIpv6Via } from './internal/public-ip-jobs.ts'

export type { Planner }

export type PlannerDeps = Pick<
  HandlerDeps,
  'store' | 'ipam' | 'ovn' | 'nb' | 'fabric' | 'dnsZone' | 'fabricAsn'
>

interface Parts {
  readonly state: GroupState | undefined
  readonly agentJobs?: readonly PlannedAgentJob[]
  readonly announce?: readonly PlannedPrefix[]
  readonly withdraw?: readonly PlannedPrefix[]
  readonly allocate?: readonly PlannedAddress[]
  readonly release?: readonly PlannedAddress[]
  readonly notes?: readonly string[]
}

export function createPlanner(deps: PlannerDeps): Planner {
  /** The group's running central (its own, else a shared one), without starting any. */
  const centralOf = async (group: string): Promise<OvnCentralEndpoints | undefined> => {
    const all = await deps.ovn.list()
    return all.find((c) => c.group === group) ?? all.find((c) => c.group === undefined)
  }

  const plan = async (group: string, parts: Parts): Promise<ChangePlan> => {
    const central = await centralOf(group)
    let desired: DesiredRows = { group, owner: ownerOf(group), rows: [] }
    const notes = [...(parts.notes ?? [])]
    try {
      if (parts.state) {
        desired = compileGroupTopology(topologyOf(parts.state, deps.fabric, deps.dnsZone))
      }
    } catch (error) {
      if (!(error instanceof HydrazineError)) throw error
      // What the apply would meet too: it would fail the same way.
      return {
        dryRun: true,
        nb: { central: central?.service ?? null, insert: [], update: [], delete: [] },
        frr: { announce: [], withdraw: [] },
        agentJobs: [],
        addresses: { allocate: [], release: [] },
        notes: [...notes, `the apply would fail: ${error.code}: ${error.message}`],
      }
    }
    for (const problem of desired.problems ?? []) {
      notes.push(`the topology would leave out ${problem.host ?? 'a port'}: ${problem.message}`)
    }
    const rows = central
      ? await planGroupRows((await deps.nb.get(central.nb)).client, group, desired)
      : planTopology(desired, emptyRows())
    return {
      dryRun: true,
      nb: { central: central?.service ?? null, ...rows },
      frr: { announce: parts.announce ?? [], withdraw: parts.withdraw ?? [] },
      agentJobs: parts.agentJobs ?? [],
      addresses: { allocate: parts.allocate ?? [], release: parts.release ?? [] },
      notes,
    }
  }

  const isolations = (members: readonly MemberState[]): PlannedAgentJob[] =>
    members.map((m) => ({ dpu: m.host.spec.dpu.id, job: 'isolate', host: m.host.name }))
  const withdrawals = (members: readonly MemberState[]): PlannedPrefix[] =>
    members.flatMap((m) => [
      ...(m.publicIp ? [{ prefix: `${m.publicIp}/32` }] : []),
      ...(m.publicIp6 ? [{ prefix: `${m.publicIp6}/128` }] : []),
    ])
  /** The public IPs (both families) the members hold, as released to their pools. */
  const publicReleases = (members: readonly MemberState[]): PlannedAddress[] =>
    members.flatMap((m) =>
      [m.publicIp, m.publicIp6].flatMap((ip): PlannedAddress[] =>
        ip ? [{ pool: 'public', owner: m.host.name, ip }] : [],
      ),
    )

  return {
    async group(name, spec) {
      if (implementationOf(spec) === 'Fabric') {
        return fabricGroupPlan(name, await deps.ipam.fabricIdsOf(name), deps.fabricAsn)
      }
      const existing = await deps.store.groups.get(name)
      const read = existing ? await readGroupState(deps, name) : undefined
      const now = new Date().toISOString()
      const group: ResourceGroup = {
        ...(existing ?? newObject(name, now)),
        spec,
      } as ResourceGroup
      const same = existing !== undefined && sameJson(existing.spec, spec)
      // Members are sent their settings again only when what they are sent changes.
      const resent =
        existing !== undefined &&
        !same &&
        (await deps.store.groups.memberSettingsOf(name)) !== memberSettingsOf(spec)
      const slaac = slaacChanges(read?.members ?? [], spec, resent)
      const state: GroupState = read
        ? { ...read, group, members: slaac.members }
        : { group, members: [], relayIps: new Map(), staleRelayOwners: [] }
      const relays = spec.dhcpServer
        ? [...new Set(state.members.map((m) => m.host.spec.dpu.id))]
            .filter((dpu) => !state.relayIps.has(dpu))
            .map((dpu): PlannedAddress => ({ pool: 'group', owner: relayOwnerOf(dpu), ip: null }))
        : []
      return plan(name, {
        state,
        // A change of what members are sent re-drives every member's configuration.
        agentJobs: resent
          ? state.members.map((m) => ({
              dpu: m.host.spec.dpu.id,
              job: 'configure',
              host: m.host.name,
            }))
          : [],
        allocate: [...slaac.allocate, ...relays],
        release: slaac.release,
        notes: same
          ? [
              existing?.status.phase === 'Failed'
                ? 'the spec is stored as given: a new attempt would start'
                : 'the spec is stored as given: nothing would change',
            ]
          : existing
            ? [`the spec would be stored as version ${existing.specVersion + 1}`]
            : ['the group would be created (version 1)'],
      })
    },

    async groupDeletion(name) {
      const state = await readGroupState(deps, name)
      if (!state) return undefined
      const allocations = await deps.ipam.allocations(name)
      return plan(name, {
        state: undefined,
        agentJobs: isolations(state.members),
        withdraw: withdrawals(state.members),
        release: [
          ...allocations.map((a): PlannedAddress => ({ pool: 'group', owner: a.owner, ip: a.ip })),
          ...publicReleases(state.members),
        ],
        notes: ['hosts are isolated first, the network removed last'],
      })
    },

    async host(name, spec) {
      const group = spec.resourceGroup
      const state = await readGroupState(deps, group)
      if (!state) throw new Error(`resource group ${group} vanished while planning`)
      const existing = await deps.store.hosts.get(name)
      const current = state.members.find((m) => m.host.name === name)
      const allocate: PlannedAddress[] = []
      const network6 = state.group.spec.network6
      // An IPv6-only group's host naming no address or pool: its SLAAC address is its own.
      const slaacOnly = network6 && ownsSlaacAddress(state.group.spec, spec)
      let ip = current?.ip ?? spec.hostIP
      if (!ip) {
        const version = spec.hostAccess === 'None' ? undefined : 4
        ip = slaacOnly
          ? eui64Address(network6.cidr, spec.hostMAC)
          : await firstFreeAddress(deps, group, spec.pool ?? DEFAULT_POOL, version)
        allocate.push({ pool: 'group', owner: name, ip: ip ?? null })
      }
      let ip6 = current?.ip6
      if (network6 && !ip6 && !slaacOnly) {
        ip6 = eui64Address(network6.cidr, spec.hostMAC)
        allocate.push({ pool: 'group', owner: ipv6OwnerOf(name), ip: ip6 })
      }
      const announce: PlannedPrefix[] = []
      const withdraw: PlannedPrefix[] = []
      const release: PlannedAddress[] = []
      const isPublic = spec.hostAccess === 'PublicAccess'
      // As the attach decides (host-attach.ts): an IPv4 public IP for a host with IPv4 (via
      // its DPU's NAT IP), an IPv6 one as `publicIpv6Via` says.
      const natIp = ip !== undefined && isIP(ip) === 4 ? spec.dpu.ips[1] : undefined
      const hostIpv6 = ip6 ?? (ip !== undefined && isIP(ip) === 6 ? ip : undefined)
      const public6 = isPublic
        ? await publicIpv6Via(deps, natIp, natIp6Of(deps, spec, hostIpv6))
        : undefined
      /** One family's public IP: kept, taken from the pool and announced, or given back. */
      const publicOf = async (
        family: 4 | 6,
        wanted: boolean,
        held: string | undefined,
        nextHop: string | undefined,
      ): Promise<string | undefined> => {
        const length = family === 4 ? 32 : 128
        if (!wanted) {
          if (held) {
            withdraw.push({ prefix: `${held}/${length}` })
            release.push({ pool: 'public', owner: name, ip: held })
          }
          return undefined
        }
        const publicIp = held ?? (await deps.ipam.nextPublicIp(family))
        if (!held) allocate.push({ pool: 'public', owner: name, ip: publicIp ?? null })
        announce.push({
          prefix: publicIp ? `${publicIp}/${length}` : null,
          ...(nextHop ? { nextHop } : {}),
        })
        return publicIp
      }
      const publicIp = await publicOf(4, isPublic && natIp !== undefined, current?.publicIp, natIp)
      const publicIp6 = await publicOf(6, public6 !== undefined, current?.publicIp6, public6)
      const host = {
        ...(existing ?? newObject(name, new Date().toISOString())),
        spec,
      } as ManagedResource
      const member: MemberState | undefined = ip
        ? {
            host,
            ip,
            ...(ip6 ? { ip6 } : {}),
            ...(publicIp ? { publicIp } : {}),
            ...(publicIp6 ? { publicIp6 } : {}),
          }
        : undefined
      const others = state.members.filter((m) => m.host.name !== name)
      const same = existing !== undefined && sameJson(existing.spec, spec)
      const moved =
        existing && existing.spec.dpu.id !== spec.dpu.id ? existing.spec.dpu.id : undefined
      return plan(group, {
        state: { ...state, members: member ? [...others, member] : others },
        agentJobs: [
          ...(moved ? [{ dpu: moved, job: 'isolate' as const, host: name }] : []),
          ...(same && existing?.status.phase !== 'Failed'
            ? []
            : [{ dpu: spec.dpu.id, job: 'configure' as const, host: name }]),
        ],
        announce: same ? [] : announce,
        withdraw,
        allocate,
        release,
        notes: [
          ...(ip ? [] : ['the group network has no free address: the attach would fail']),
          ...(same
            ? ['the spec is stored as given: nothing would change']
            : existing
              ? [`the spec would be stored as version ${existing.specVersion + 1}`]
              : ['the host would be created (version 1)']),
        ],
      })
    },

    async hostDeletion(name) {
      const host = await deps.store.hosts.get(name)
      if (!host) return undefined
      const group = host.spec.resourceGroup
      const state = await readGroupState(deps, group)
      const member = state?.members.find((m) => m.host.name === name)
      const allocations = member
        ? [
            { pool: 'group' as const, owner: name, ip: member.ip },
            ...(member.ip6
              ? [{ pool: 'group' as const, owner: ipv6OwnerOf(name), ip: member.ip6 }]
              : []),
          ]
        : []
      return plan(group, {
        state: state && { ...state, members: state.members.filter((m) => m.host.name !== name) },
        agentJobs: [{ dpu: host.spec.dpu.id, job: 'isolate', host: name }],
        withdraw: member ? withdrawals([member]) : [],
        release: [...allocations, ...(member ? publicReleases([member]) : [])],
        notes: ['the host is isolated on its DPU before its addresses are released'],
      })
    },
  }
}

function newObject(name: string, now: string) {
  return {
    name,
    specVersion: 1,
    status: { phase: 'Provisioning', conditions: [], observedVersion: 0, configsSynced: false },
    createdAt: now,
    updatedAt: now,
  }
}

const sameJson = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b)

/**
 * What a group spec does to its members' SLAAC addresses (`slaacChangeOf`): each one the
 * new `network6` no longer holds is released (the group's network change gives it back),
 * and, when the members are re-driven (`resent`), each one they lack in it is allocated
 * (by their attach). `members` are as they end up, for the topology.
 */
function slaacChanges(
  members: readonly MemberState[],
  spec: ResourceGroupSpec,
  resent: boolean,
): { members: MemberState[]; allocate: PlannedAddress[]; release: PlannedAddress[] } {
  const planned = members.map((member): [MemberState, SlaacChange] => {
    const { host, ip6 } = member
    const own = ownsSlaacAddress(spec, host.spec)
    return [
      member,
      own ? { ...(ip6 ? { ip6 } : {}) } : slaacChangeOf(ip6, host.spec.hostMAC, spec.network6),
    ]
  })
  const address = (member: MemberState, ip: string): PlannedAddress => ({
    pool: 'group',
    owner: ipv6OwnerOf(member.host.name),
    ip,
  })
  return {
    members: planned.map(([{ ip6: _held, ...member }, change]) => {
      const ip6 = change.allocate !== undefined && !resent ? undefined : change.ip6
      return { ...member, ...(ip6 ? { ip6 } : {}) }
    }),
    allocate: resent
      ? planned.flatMap(([m, c]) => (c.allocate ? [address(m, c.allocate)] : []))
      : [],
    release: planned.flatMap(([m, c]) => (c.release ? [address(m, c.release)] : [])),
  }
}

/** The address the group network's pool would hand out next (its first free one), if any. */
async function firstFreeAddress(
  deps: PlannerDeps,
  group: string,
  poolName: string,
  version: 4 | undefined,
): Promise<string | undefined> {
  const map = await deps.ipam.map(group)
  for (const subnet of map.subnets) {
    if (version === 4 && subnet.cidr.includes(':')) continue
    for (const pool of subnet.pools) {
      if (pool.name !== poolName) continue
      const free = pool.map.indexOf('.')
      if (free < 0) continue
      const start = parseIp(pool.start)
      return formatIp({ ...start, value: start.value + BigInt(free) })
    }
  }
  return undefined
}
