import * as v from 'valibot'
import { NoBgpInstanceError } from './errors.ts'
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
}

const ROUTER_BGP = /^router bgp (\d+)\s*$/
const NETWORK = /^network (\S+)(?: route-map (\S+))?\s*$/
const ROUTE_MAP = /^route-map (\S+) (?:permit|deny) \d+\s*$/

/**
 * Reads `show running-config` text. Only the default BGP instance's IPv4 unicast
 * `network` statements count; VRF instances and other address families are ignored.
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
    if (addressFamily !== undefined && addressFamily !== 'ipv4 unicast') continue
    const network = NETWORK.exec(line)
    const prefix = network?.[1]
    if (prefix === undefined) continue
    const routeMap = network?.[2]
    if (routeMap?.startsWith(ROUTE_MAP_PREFIX))
      owned.set(prefix, routeMap.slice(ROUTE_MAP_PREFIX.length))
    else foreign.add(prefix)
  }
  return { localAs, owned, foreign, routeMaps }
}

const BgpTableJson = v.looseObject({
  routes: v.optional(
    v.record(
      v.string(),
      v.array(
        v.looseObject({
          valid: v.optional(v.boolean()),
          peerId: v.optional(v.string()),
          nexthops: v.optional(v.array(v.looseObject({ ip: v.optional(v.string()) }))),
        }),
      ),
    ),
  ),
})

/**
 * Reads `show bgp ipv4 unicast json`: prefix → next hop of the valid, locally originated
 * path (peerId `(unspec)`), which is what FRR announces for it.
 */
export function parseBgpTable(json: string): Map<string, string> {
  const table = v.parse(BgpTableJson, JSON.parse(json))
  const local = new Map<string, string>()
  for (const [prefix, paths] of Object.entries(table.routes ?? {})) {
    const path = paths.find((p) => p.valid === true && p.peerId === '(unspec)')
    const nextHop = path?.nexthops?.[0]?.ip
    if (nextHop !== undefined) local.set(prefix, nextHop)
  }
  return local
}

/** prefix → the next hop it must be announced with, or null: must not be announced. */
export type Wanted = ReadonlyMap<string, string | null>

export interface Plan {
  /** vtysh configuration-mode lines (for `vtysh -f`); empty when FRR already agrees. */
  readonly commands: readonly string[]
  /** Wanted prefixes that are configured by someone else: left alone. */
  readonly conflicts: readonly string[]
}

/**
 * The commands that take FRR from `state` to `wanted`, touching only Hydrazine's own
 * statements: a route-map for each new next hop, `network`/`no network` lines, and
 * removal of Hydrazine route-maps nothing uses any more. Applying the same plan twice,
 * or planning again from the resulting state, yields nothing new to do.
 *
 * @example
 * planChanges(state, new Map([['203.0.113.7/32', '172.18.0.105']])).commands
 * // ['route-map HZ-NH-172.18.0.105 permit 10', ' set ip next-hop 172.18.0.105', 'exit',
 * //  'router bgp 65001', ' address-family ipv4 unicast',
 * //  '  network 203.0.113.7/32 route-map HZ-NH-172.18.0.105', ' exit-address-family', 'exit']
 */
export function planChanges(state: FrrState, wanted: Wanted): Plan {
  const conflicts: string[] = []
  const networks: string[] = []
  const after = new Map(state.owned)
  for (const [prefix, nextHop] of wanted) {
    if (state.foreign.has(prefix)) {
      conflicts.push(prefix)
      continue
    }
    const current = state.owned.get(prefix)
    if (nextHop === null) {
      if (current === undefined) continue
      networks.push(`  no network ${prefix}`)
      after.delete(prefix)
    } else if (current !== nextHop) {
      networks.push(`  network ${prefix} route-map ${routeMapName(nextHop)}`)
      after.set(prefix, nextHop)
    }
  }
  if (networks.length === 0) return { commands: [], conflicts }
  if (state.localAs === undefined) throw new NoBgpInstanceError()

  const used = new Set(after.values())
  const commands: string[] = []
  for (const nextHop of used)
    if (!state.routeMaps.has(nextHop)) commands.push(...routeMapLines(nextHop))
  commands.push(`router bgp ${state.localAs}`, ' address-family ipv4 unicast', ...networks)
  commands.push(' exit-address-family', 'exit')
  for (const nextHop of state.routeMaps) {
    if (!used.has(nextHop)) commands.push(`no route-map ${routeMapName(nextHop)}`)
  }
  return { commands, conflicts }
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
