import type { BgpSettings } from './settings.ts'

/** One public IP announced to the fabric: `prefix` (`A.B.C.D/32`) via `nextHop` (a NAT IP). */
export interface Announcement {
  readonly prefix: string
  readonly nextHop: string
}

/**
 * Every prefix Hydrazine originates uses a route-map named after its next hop. The name
 * is the ownership tag: a `network` line without it was configured by someone else and
 * Hydrazine never touches it.
 */
export const ROUTE_MAP_PREFIX = 'HZ-NH-'

/** `HZ-NH-172.18.0.105` for next hop 172.18.0.105. */
export function routeMapName(nextHop: string): string {
  return `${ROUTE_MAP_PREFIX}${nextHop}`
}

/** The route-map that sets the next hop of everything Hydrazine announces via `nextHop`. */
export function routeMapLines(nextHop: string): string[] {
  return [`route-map ${routeMapName(nextHop)} permit 10`, ` set ip next-hop ${nextHop}`, 'exit']
}

/**
 * bgpd's configuration: the base Hydrazine's FRR starts with (no announcements), or,
 * given announcements, the whole intended configuration (what `frr-reload.py` would
 * apply).
 *
 * - `no bgp network import-check`: a public IP /32 is in no RIB here; it is originated
 *   with a `network` statement whose route-map sets the next hop to the host's NAT IP.
 * - `attribute-unchanged next-hop` towards every peer: eBGP would otherwise rewrite the
 *   next hop to bgpd's own address whenever the NAT IP is not on the peering subnet.
 *   (A fabric router that is not on the NAT IP's subnet needs a route to it and
 *   `neighbor … disable-connected-check` to accept such a next hop.)
 * - Routes learned from the fabric are refused (`HZ-IMPORT`): this speaker only
 *   announces; everything it originates is exported (`HZ-EXPORT`).
 *
 * `listenPort` is not part of the file: it is bgpd's `-p` flag.
 */
export function renderBgpdConfig(
  settings: BgpSettings,
  announcements: readonly Announcement[] = [],
): string {
  const lines = [
    '! bgpd configuration rendered by Hydrazine',
    'frr defaults traditional',
    `router bgp ${settings.localAs}`,
    ` bgp router-id ${settings.routerId}`,
    ' no bgp network import-check',
  ]
  for (const peer of settings.peers) {
    lines.push(` neighbor ${peer.address} remote-as ${peer.remoteAs}`)
    if (peer.port !== undefined) lines.push(` neighbor ${peer.address} port ${peer.port}`)
    lines.push(` neighbor ${peer.address} timers connect ${settings.connectRetrySeconds}`)
  }
  lines.push(' !', ' address-family ipv4 unicast')
  for (const a of sortByPrefix(announcements)) {
    lines.push(`  network ${a.prefix} route-map ${routeMapName(a.nextHop)}`)
  }
  for (const peer of settings.peers) {
    lines.push(
      `  neighbor ${peer.address} attribute-unchanged next-hop`,
      `  neighbor ${peer.address} route-map HZ-IMPORT in`,
      `  neighbor ${peer.address} route-map HZ-EXPORT out`,
    )
  }
  lines.push(' exit-address-family', 'exit', '!')
  lines.push('route-map HZ-IMPORT deny 10', 'exit', '!', 'route-map HZ-EXPORT permit 10', 'exit')
  for (const nextHop of new Set(announcements.map((a) => a.nextHop))) {
    lines.push('!', ...routeMapLines(nextHop))
  }
  lines.push('!', '')
  return lines.join('\n')
}

function sortByPrefix(announcements: readonly Announcement[]): Announcement[] {
  return [...announcements].sort((a, b) => (a.prefix < b.prefix ? -1 : a.prefix > b.prefix ? 1 : 0))
}
