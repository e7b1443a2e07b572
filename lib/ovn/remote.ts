/**
 * OVSDB remotes as OVS and OVN spell them (`unix:/path`, `tcp:host:port`), parsed once so
 * a bad one fails before any connection is tried.
 */
import { OvsdbConnectionError } from './errors.ts'

export type Remote =
  | { readonly kind: 'unix'; readonly path: string }
  | { readonly kind: 'tcp'; readonly host: string; readonly port: number }

/** Parses `unix:/path` or `tcp:host:port` (`tcp:[v6addr]:port` too). */
export function parseRemote(remote: string): Remote {
  if (remote.startsWith('unix:') && remote.length > 5)
    return { kind: 'unix', path: remote.slice(5) }
  const tcp = /^tcp:(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(remote)
  if (tcp) {
    const host = tcp[1] ?? tcp[2] ?? ''
    const port = Number(tcp[3])
    if (port > 0 && port < 65536) return { kind: 'tcp', host, port }
  }
  throw new OvsdbConnectionError(remote, 'remote must be unix:/path or tcp:host:port')
}
