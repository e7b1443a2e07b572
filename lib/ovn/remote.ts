/**
 * OVSDB remotes as OVS and OVN spell them (`unix:/path`, `tcp:host:port`,
 * `ssl:host:port`), parsed once so a bad one fails before any connection is tried.
 */
import { OvsdbConnectionError } from './errors.ts'

export type Remote =
  | { readonly kind: 'unix'; readonly path: string }
  | { readonly kind: 'tcp' | 'ssl'; readonly host: string; readonly port: number }

/** Parses `unix:/path`, `tcp:host:port` or `ssl:host:port` (`tcp:[v6addr]:port` too). */
export function parseRemote(remote: string): Remote {
  if (remote.startsWith('unix:') && remote.length > 5)
    return { kind: 'unix', path: remote.slice(5) }
  const inet = /^(tcp|ssl):(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(remote)
  if (inet) {
    const kind = inet[1] === 'ssl' ? 'ssl' : 'tcp'
    const host = inet[2] ?? inet[3] ?? ''
    const port = Number(inet[4])
    if (port > 0 && port < 65536) return { kind, host, port }
  }
  throw new OvsdbConnectionError(
    remote,
    'remote must be unix:/path, tcp:host:port or ssl:host:port',
  )
}
