import * as v from 'valibot'
import { NoBgpInstanceError } from './errors.ts'
import { announcementProblem, IP_FAMILIES, prefixFamily } from './prefix.ts'
import { type Announcement, ROUTE_MAP_PREFIX, routeMapLines, routeMapName } from './render.ts'

/** What FRR's running configuration says about announcements. */
export interface FrrState {
  /** AS of the default BGP instance (`router bgp N`); undefined when there is none. */
  readonly localAs: number | undefined
  /** Hydrazine's announcements: prefix → next hop (from its `HZ-NH-<next hop>` route-map). */
  readonly owned: ReadonlyMap<string, string>
  /** Prefixes with a `network` statement someone else configured. Never touched. */
  readonly foreign: ReadonlySet<string>
  /** Next hops that have a Hydrazine route-map defined. */
  readonly routeMaps: ReadonlySet<string>
  /** Next hop → how many of Hydrazine's announcements use it. */
  readonly uses: ReadonlyMap<string, number>
}

/** An FRR state the controller keeps in memory and updates as its changes are applied. */
export interface FrrModel {
  readonly localAs: number | undefined
  readonly owned: Map<string, string>
  readonly foreign: Set<string>
  readonly routeMaps: Set<string>
  readonly uses: Map<string, number>
}

const ROUTER_BGP = /^router bgp (\d+)\s*$/
const NETWORK = /^network (\S+)(?: route-map (\S+))?\s*$/
const ROUTE_MAP = /^route-map (\S+) (?:permit|deny) \d+\s*$/
/** Where Hydrazine's `network` lines live: FRR may write IPv4 ones outside any block. */
const UNICAST = new Set([undefined, 'ipv4 unicast', 'ipv6 unicast'])

/**
 * Reads `show running-config` text. Only the default BGP instance's `network` statements
 * in its IPv4 and IPv6 unicast tables count (IPv4 ones also directly under `router bgp`,
 * where FRR writes them when IPv4 unicast is implied); VRF instances and other address
 * families (VPN, EVPN, multicast, …) are ignored.
 */
export function parseRunningConfig(text: string): FrrState {
  let localAs: number | undefined
  const owned = new Map<string, string>()
  const foreign = new Set<string>()
  const routeMaps = new Set<string>()
  let inDefaultBgp = false
  let addressFamily: string | undefined
  for (const raw of text.split('\n')) {
    const line = raw.trim()
    if (raw.length > 0 && raw[0] !== ' ') {
      // A top-level line opens or closes a block.
      const bgp = ROUTER_BGP.exec(line)
      inDefaultBgp = bgp !== null
      addressFamily = undefined
      if (bgp?.[1] !== undefined) localAs = Number(bgp[1])
      const map = ROUTE_MAP.exec(line)
      if (map?.[1]?.startsWith(ROUTE_MAP_PREFIX))
        routeMaps.add(map[1].slice(ROUTE_MAP_PREFIX.length))
      continue
    }
    if (!inDefaultBgp) continue
    if (line.startsWith('address-family ')) {
      addressFamily = line.slice('address-family '.length)
      continue
    }
    if (line === 'exit-address-family') {
      addressFamily = undefined
      continue
    }
    if (!UNICAST.has(addressFamily)) continue
    const network = NETWORK.exec(line)
    const prefix = network?.[1]
    if (prefix === undefined) continue
    const routeMap = network?.[2]
    if (routeMap?.startsWith(ROUTE_MAP_PREFIX))
      owned.set(prefix, routeMap.slice(ROUTE_MAP_PREFIX.length))
    else foreign.add(prefix)
  }
  const uses = new Map<string, number>()
  for (const nextHop of owned.values()) uses.set(nextHop, (uses.get(nextHop) ?? 0) + 1)
  return { localAs, owned, foreign, routeMaps, uses }
}

/**
 * Hydrazine's announcements in a bgpd configuration (e.g. the file bgpd last saved), to
 * carry them into a newly rendered one.
 */
export function announcementsIn(config: string): Announcement[] {
  return [...parseRunningConfig(config).owned].map(([prefix, nextHop]) => ({ prefix, nextHop }))
}

const NextHopsJson = v.optional(
  v.array(v.looseObject({ ip: v.optional(v.string()), scope: v.optional(v.string()) })),
)

const BgpTableJson = v.looseObject({
  routes: v.optional(
    v.record(
      v.string(),
      v.array(
        v.looseObject({
          valid: v.optional(v.boolean()),
          peerId: v.optional(v.string()),
          nexthops: NextHopsJson,
        }),
      ),
    ),
  ),
})

/**
 * A path's next hop as peers get it: for IPv6 FRR may list a link-local address beside
 * the global one (`"scope":"link-local"`), which is never the NAT address announced.
 */
function globalNextHop(
  nexthops: readonly { ip?: string | undefined; scope?: string | undefined }[] | undefined,
): string | undefined {
  return nexthops?.find((n) => n.scope !== 'link-local')?.ip
}

/**
 * Reads `show bgp ipv4 unicast json` or `show bgp ipv6 unicast json`: prefix → next hop
 * of the valid, locally originated path (peerId `(unspec)`), which is what FRR announces
 * for it (for a /128, its global next hop).
 */
export function parseBgpTable(json: string): Map<string, string> {
  const table = v.parse(BgpTableJson, JSON.parse(json))
  const local = new Map<string, string>()
  for (const [prefix, paths] of Object.entries(table.routes ?? {})) {
    const path = paths.find((p) => p.valid === true && p.peerId === '(unspec)')
    const nextHop = globalNextHop(path?.nexthops)
    if (nextHop !== undefined) local.set(prefix, nextHop)
  }
  return local
}

const BgpPrefixJson = v.looseObject({
  prefix: v.optional(v.string()),
  paths: v.optional(
    v.array(
      v.looseObject({
        valid: v.optional(v.boolean()),
        sourced: v.optional(v.boolean()),
        removed: v.optional(v.boolean()),
        nexthops: NextHopsJson,
      }),
    ),
  ),
})

/**
 * Reads `show bgp ipv4 unicast A.B.C.D/32 json` or `show bgp ipv6 unicast X::Y/128 json`
 * (`{}` when the prefix is not in the table): the next hop of the valid, locally
 * originated path — for a /128 the global one its route-map set — or null when there is
 * none (a withdrawn path stays, `removed`, until bgpd has processed it). This is what
 * `parseBgpTable` reads for the whole table; bgpd then selects and sends the change to
 * its peers after its route-processing hold (~50 ms), as for any change.
 *
 * @example
 * parseBgpPrefix('{"prefix":"203.0.113.7/32","paths":[{"valid":true,"sourced":true,
 *   "nexthops":[{"ip":"10.77.0.105"}]}]}') // '10.77.0.105'
 * parseBgpPrefix('{"prefix":"2001:db8:ff::5/128","paths":[{"valid":true,"sourced":true,
 *   "nexthops":[{"ip":"fd00:77::105","afi":"ipv6","scope":"global"}]}]}') // 'fd00:77::105'
 */
export function parseBgpPrefix(json: string): string | null {
  const entry = v.parse(BgpPrefixJson, JSON.parse(json))
  const path = entry.paths?.find(
    (p) => p.valid === true && p.sourced === true && p.removed !== true,
  )
  return globalNextHop(path?.nexthops) ?? null
}

/** prefix → the next hop it must be announced with, or null: must not be announced. */
export type Wanted = ReadonlyMap<string, string | null>

export interface Plan {
  /** vtysh configuration-mode lines; empty when FRR already agrees. */
  readonly commands: readonly string[]
  /** Wanted prefixes that are configured by someone else: left alone. */
  readonly conflicts: readonly string[]
  /**
   * Wanted changes Hydrazine cannot make (`announcementProblem`: not a canonical /32 or
   * /128, a next hop of the other family), with why: left out of `commands`.
   */
  readonly invalid: readonly { readonly prefix: string; readonly reason: string }[]
  /** What `commands` change: prefix → its new next hop, or null: withdrawn. */
  readonly changes: ReadonlyMap<string, string | null>
  /** Hydrazine route-maps `commands` define, and remove because nothing uses them. */
  readonly routeMaps: { readonly added: readonly string[]; readonly removed: readonly string[] }
}

/**
 * The commands that take FRR from `state` to `wanted`, touching only Hydrazine's own
 * statements: a route-map for each next hop in use that has none, `network`/`no network`
 * lines (IPv4 /32s in the `ipv4 unicast` block, IPv6 /128s in the `ipv6 unicast` one),
 * and removal of Hydrazine route-maps nothing uses any more. Costs O(wanted + next hops),
 * not O(announcements): a change to one prefix with 10,000 announced plans one line.
 * Applying the same plan twice, or planning again from the resulting state, yields
 * nothing new to do. Withdrawing a prefix Hydrazine owns always works, however it is
 * spelt; anything else wanted must pass `announcementProblem` or is `invalid`.
 *
 * @example
 * planChanges(state, new Map([['203.0.113.7/32', '172.18.0.105']])).commands
 * // ['route-map HZ-NH-172.18.0.105 permit 10', ' set ip next-hop 172.18.0.105', 'exit',
 * //  'router bgp 65001', ' address-family ipv4 unicast',
 * //  '  network 203.0.113.7/32 route-map HZ-NH-172.18.0.105', ' exit-address-family', 'exit']
 * planChanges(state, new Map([['2001:db8:ff::5/128', 'fd00:77::105']])).commands
 * // ['route-map HZ-NH-fd00:77::105 permit 10', ' set ipv6 next-hop global fd00:77::105',
 * //  'exit', 'router bgp 65001', ' address-family ipv6 unicast',
 * //  '  network 2001:db8:ff::5/128 route-map HZ-NH-fd00:77::105', ' exit-address-family',
 * //  'exit']
 */
export function planChanges(state: FrrState, wanted: Wanted): Plan {
  const conflicts: string[] = []
  const invalid: { prefix: string; reason: string }[] = []
  const networks = { ipv4: [] as string[], ipv6: [] as string[] }
  const changes = new Map<string, string | null>()
  const delta = new Map<string, number>()
  const bump = (nextHop: string, by: number) => delta.set(nextHop, (delta.get(nextHop) ?? 0) + by)
  for (const [prefix, nextHop] of wanted) {
    const current = state.owned.get(prefix)
    const problem =
      nextHop === null && current !== undefined ? undefined : announcementProblem(prefix, nextHop)
    if (problem !== undefined) {
      invalid.push({ prefix, reason: problem })
      continue
    }
    if (state.foreign.has(prefix)) {
      conflicts.push(prefix)
      continue
    }
    const lines = networks[prefixFamily(prefix)]
    if (nextHop === null) {
      if (current === undefined) continue
      lines.push(`  no network ${prefix}`)
      bump(current, -1)
    } else if (current !== nextHop) {
      lines.push(`  network ${prefix} route-map ${routeMapName(nextHop)}`)
      bump(nextHop, 1)
      if (current !== undefined) bump(current, -1)
    } else continue
    changes.set(prefix, nextHop)
  }
  const none = { added: [], removed: [] }
  if (changes.size === 0) return { commands: [], conflicts, invalid, changes, routeMaps: none }
  if (state.localAs === undefined) throw new NoBgpInstanceError()

  const usesAfter = (nextHop: string) => (state.uses.get(nextHop) ?? 0) + (delta.get(nextHop) ?? 0)
  const added = [...new Set([...state.uses.keys(), ...delta.keys()])].filter(
    (nextHop) => usesAfter(nextHop) > 0 && !state.routeMaps.has(nextHop),
  )
  const removed = [...state.routeMaps].filter((nextHop) => usesAfter(nextHop) === 0)
  const commands = [
    ...added.flatMap(routeMapLines),
    `router bgp ${state.localAs}`,
    ...IP_FAMILIES.flatMap((family) =>
      networks[family].length === 0
        ? []
        : [` address-family ${family} unicast`, ...networks[family], ' exit-address-family'],
    ),
    'exit',
    ...removed.map((nextHop) => `no route-map ${routeMapName(nextHop)}`),
  ]
  return { commands, conflicts, invalid, changes, routeMaps: { added, removed } }
}

/** A mutable copy of `state`, for a controller to keep in memory. */
export function toModel(state: FrrState): FrrModel {
  return {
    localAs: state.localAs,
    owned: new Map(state.owned),
    foreign: new Set(state.foreign),
    routeMaps: new Set(state.routeMaps),
    uses: new Map(state.uses),
  }
}

/** Updates `model` with what an applied `plan` changed, in O(the plan). */
export function applyPlan(model: FrrModel, plan: Plan): void {
  for (const [prefix, nextHop] of plan.changes) {
    const before = model.owned.get(prefix)
    if (before !== undefined) {
      const left = (model.uses.get(before) ?? 1) - 1
      left > 0 ? model.uses.set(before, left) : model.uses.delete(before)
    }
    if (nextHop === null) model.owned.delete(prefix)
    else {
      model.owned.set(prefix, nextHop)
      model.uses.set(nextHop, (model.uses.get(nextHop) ?? 0) + 1)
    }
  }
  for (const nextHop of plan.routeMaps.added) model.routeMaps.add(nextHop)
  for (const nextHop of plan.routeMaps.removed) model.routeMaps.delete(nextHop)
}

export interface ResyncPlan {
  /** What the resync hands to `converge`: every wanted prefix, and stale ones as null. */
  readonly wanted: Wanted
  /** Hydrazine prefixes the source does not want, left announced (see `planResync`). */
  readonly held: readonly string[]
}

/**
 * What a resync asks of FRR: announce every prefix the source wants, withdraw every
 * Hydrazine prefix it does not — unless that looks like a store that was wiped or only
 * partly restored rather than drift: the source wants nothing while FRR announces some,
 * or more than `maxWithdrawals` would go at once. Then nothing is withdrawn and the stale
 * prefixes are reported as `held` (announcing what is missing never hurts). Job handlers
 * withdraw released public IPs one by one; a resync only catches what they missed.
 *
 * @example
 * planResync(new Map([['198.51.100.1/32', '10.77.0.105']]), [], 16)
 * // { wanted: Map {}, held: ['198.51.100.1/32'] }: an empty store withdraws nothing
 */
export function planResync(
  owned: ReadonlyMap<string, string>,
  desired: readonly Announcement[],
  maxWithdrawals: number,
): ResyncPlan {
  const wanted = new Map<string, string | null>(desired.map((a) => [a.prefix, a.nextHop]))
  const stale = [...owned.keys()].filter((prefix) => !wanted.has(prefix)).sort()
  if ((desired.length === 0 && stale.length > 0) || stale.length > maxWithdrawals) {
    return { wanted, held: stale }
  }
  for (const prefix of stale) wanted.set(prefix, null)
  return { wanted, held: [] }
}
