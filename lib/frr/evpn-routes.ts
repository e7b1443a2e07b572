/**
 * EVPN type-5 routes as FRR prints them (`show bgp l2vpn evpn route type prefix json`):
 * what a DPU's agent reads of its own bgpd and the lab's reflector of its. Pure.
 */

/** One path of a type-5 route: its prefix, route targets and next hops. */
export interface Type5Path {
  /** `10.20.0.5/32`, `fd00::5/128`. */
  readonly prefix: string
  /** The path's route targets, `65001:10001`, in FRR's order. */
  readonly routeTargets: readonly string[]
  readonly nextHops: readonly string[]
}

/** Every path of every type-5 route of the JSON, whatever its RD; none for bad JSON. */
export function type5Paths(json: string): Type5Path[] {
  let parsed: unknown
  try {
    parsed = JSON.parse(json)
  } catch {
    return []
  }
  if (typeof parsed !== 'object' || parsed === null) return []
  const out: Type5Path[] = []
  for (const rd of Object.values(parsed)) {
    if (typeof rd !== 'object' || rd === null) continue
    for (const [key, entry] of Object.entries(rd as Record<string, unknown>)) {
      const m = /^\[5\]:\[\d+\]:\[(\d+)\]:\[([^\]]+)\]$/.exec(key)
      if (!m) continue
      const paths = ((entry as { paths?: unknown[][] }).paths ?? []).flat() as {
        extendedCommunity?: { string?: string }
        nexthops?: { ip?: string }[]
      }[]
      for (const path of paths) {
        out.push({
          prefix: `${m[2]}/${m[1]}`,
          routeTargets: [...(path.extendedCommunity?.string ?? '').matchAll(/RT:(\S+)/g)].map(
            (r) => r[1] ?? '',
          ),
          nextHops: (path.nexthops ?? []).flatMap((h) => (h.ip ? [h.ip] : [])),
        })
      }
    }
  }
  return out
}
