import { IP_FAMILIES, prefixFamily } from './prefix.ts'
import type { BgpSettings } from './settings.ts'

/**
 * One public IP announced to the fabric: `prefix` via `nextHop` (a DPU's NAT address) —
 * `A.B.C.D/32` via an IPv4 NAT IP, or `<ipv6>/128` via an IPv6 NAT address, IPv6 in
 * canonical form (`2001:db8:ff::5/128` via `fd00:77::105`; see `publicPrefix`). A prefix
 * and a next hop of different families are invalid (`announcementProblem`).
 */
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

/**
 * `HZ-NH-172.18.0.105` for next hop 172.18.0.105, `HZ-NH-fd00:77::105` for fd00:77::105
 * (FRR 8.4 takes ':' in a route-map name and writes it back unchanged).
 */
export function routeMapName(nextHop: string): string {
  return `${ROUTE_MAP_PREFIX}${nextHop}`
}

/**
 * The route-map that sets the next hop of everything Hydrazine announces via `nextHop`:
 * `set ip next-hop` for an IPv4 NAT IP, `set ipv6 next-hop global` for an IPv6 one.
 */
export function routeMapLines(nextHop: string): string[] {
  const set =
    prefixFamily(nextHop) === 'ipv4'
      ? ` set ip next-hop ${nextHop}`
      : ` set ipv6 next-hop global ${nextHop}`
  return [`route-map ${routeMapName(nextHop)} permit 10`, set, 'exit']
}

/**
 * bgpd's configuration: the base Hydrazine's FRR starts with (no announcements), or,
 * given announcements, the whole intended configuration (what `frr-reload.py` would
 * apply).
 *
 * - `no bgp network import-check`: a public IP's /32 or /128 is in no RIB here; it is
 *   originated with a `network` statement whose route-map sets the next hop to the
 *   host's NAT IP.
 * - `bgp graceful-restart`: when bgpd restarts (or the controller with an embedded FRR),
 *   peers keep its routes, marked stale, for the restart time (120 s) and keep
 *   forwarding to the public IPs; bgpd starts from the configuration it saved, sends
 *   them again, and peers drop only what it no longer announces.
 * - `attribute-unchanged next-hop` towards every peer: eBGP would otherwise rewrite the
 *   next hop to bgpd's own address whenever the NAT IP is not on the peering subnet.
 *   (A fabric router that is not on the NAT IP's subnet needs a route to it and
 *   `neighbor … disable-connected-check` to accept such a next hop.)
 * - Routes learned from the fabric are refused (`HZ-IMPORT`): this speaker only
 *   announces; everything it originates is exported (`HZ-EXPORT`).
 * - IPv6 (MP-BGP over the same, usually IPv4, sessions): `address-family ipv6 unicast`
 *   activates every peer always, with or without /128s to announce. bgpd resets an
 *   established session when an address family is activated on it (FRR 8.4: the peer
 *   drops and reconnects), so it is there from the start and the first /128 goes out on
 *   the session as it is. A peer that does not activate IPv6 itself keeps its IPv4
 *   session and /32s.
 * - A /128's route-map sets `set ipv6 next-hop global <NAT address>`. To a peer on a
 *   shared subnet bgpd also sends its own interface's link-local address as a second
 *   next hop (RFC 2545), and FRR 8.4 cannot be told not to (`set ipv6 next-hop local`
 *   takes only a link-local address; `prefer-global` in an originating or outbound map
 *   changes nothing on the peer). A fabric router running FRR installs that link-local
 *   next hop — forwarding to this speaker, not the DPU — unless its inbound policy for
 *   this peer says `set ipv6 next-hop prefer-global` (check what other fabrics
 *   prefer when given both).
 *
 * `listenPort` is not part of the file: it is bgpd's `-p` flag.
 */
export function renderBgpdConfig(
  settings: BgpSettings,
  announcements: readonly Announcement[] = [],
): string {
  // Route-maps first: a `network … route-map` read before its route-map exists is held
  // back until bgpd's route-map delay timer (5 s) runs, after a restart too.
  const lines = [
    '! bgpd configuration rendered by Hydrazine',
    'frr defaults traditional',
    'route-map HZ-IMPORT deny 10',
    'exit',
    '!',
    'route-map HZ-EXPORT permit 10',
    'exit',
  ]
  for (const nextHop of new Set(sortByPrefix(announcements).map((a) => a.nextHop))) {
    lines.push('!', ...routeMapLines(nextHop))
  }
  lines.push(
    '!',
    `router bgp ${settings.localAs}`,
    ` bgp router-id ${settings.routerId}`,
    ' no bgp network import-check',
    ' bgp graceful-restart',
    ' bgp graceful-restart preserve-fw-state',
  )
  for (const peer of settings.peers) {
    lines.push(` neighbor ${peer.address} remote-as ${peer.remoteAs}`)
    if (peer.port !== undefined) lines.push(` neighbor ${peer.address} port ${peer.port}`)
    lines.push(` neighbor ${peer.address} timers connect ${settings.connectRetrySeconds}`)
  }
  for (const family of IP_FAMILIES) {
    lines.push(' !', ` address-family ${family} unicast`)
    for (const a of sortByPrefix(announcements)) {
      if (prefixFamily(a.prefix) === family)
        lines.push(`  network ${a.prefix} route-map ${routeMapName(a.nextHop)}`)
    }
    for (const peer of settings.peers) {
      // IPv4 unicast is active on every neighbor by default (`frr defaults traditional`).
      if (family !== 'ipv4') lines.push(`  neighbor ${peer.address} activate`)
      lines.push(
        `  neighbor ${peer.address} attribute-unchanged next-hop`,
        `  neighbor ${peer.address} route-map HZ-IMPORT in`,
        `  neighbor ${peer.address} route-map HZ-EXPORT out`,
      )
    }
    lines.push(' exit-address-family')
  }
  lines.push('exit', '!', '')
  return lines.join('\n')
}

/**
 * bgpd's saved configuration (`write file`) in an order it starts from without delay:
 * FRR writes route-maps after `router bgp`, and a `network … route-map` read before its
 * route-map exists is only announced when bgpd's route-map delay timer runs (5 s) — after
 * a peer holding it as stale (graceful restart) has already been told it is gone. Moves
 * every top-level `route-map` block ahead of the first `router bgp`; nothing else moves.
 *
 * @example
 * startupOrder('router bgp 1\n network 10.0.0.1/32 route-map M\nexit\nroute-map M permit 10\nexit\n')
 * // 'route-map M permit 10\nexit\nrouter bgp 1\n network 10.0.0.1/32 route-map M\nexit\n'
 */
export function startupOrder(config: string): string {
  const lines = config.split('\n')
  const routeMaps: string[] = []
  const rest: string[] = []
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? ''
    if (!line.startsWith('route-map ')) {
      rest.push(line)
      continue
    }
    // The block: its header, indented lines, and its closing `exit` if there is one.
    routeMaps.push(line)
    while (i + 1 < lines.length && /^\s/.test(lines[i + 1] ?? '')) routeMaps.push(lines[++i] ?? '')
    if (lines[i + 1] === 'exit') routeMaps.push(lines[++i] ?? '')
  }
  const at = rest.findIndex((line) => line.startsWith('router bgp '))
  if (at < 0 || routeMaps.length === 0) return config
  return [...rest.slice(0, at), ...routeMaps, ...rest.slice(at)].join('\n')
}

function sortByPrefix(announcements: readonly Announcement[]): Announcement[] {
  return [...announcements].sort((a, b) => (a.prefix < b.prefix ? -1 : a.prefix > b.prefix ? 1 : 0))
}
