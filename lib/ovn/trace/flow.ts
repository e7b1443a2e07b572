/**
 * The microflows Hydrazine hands to `ovn-trace`: a packet as it enters a logical port
 * (`inport == "…" && eth.src == … && ip4.src == … && …`), and the ARP request a host
 * sends for an on-link address. Pure: every field is checked, so nothing but a well-formed
 * expression reaches ovn-trace.
 *
 * @example
 * microflow({ inport: 'hz/g/h1', ethSrc: '0a:00:00:00:00:01', ethDst: '0a:00:00:00:00:02',
 *   ipSrc: '10.0.0.2', ipDst: '10.0.0.3', proto: 'tcp', port: 443 })
 * // 'inport == "hz/g/h1" && eth.src == 0a:00:00:00:00:01 && … && tcp.dst == 443 && tcp.flags == 2'
 */
import { isIP } from 'node:net'
import { HydrazineError } from '../../errors.ts'
import { inSubnet } from '../topology/addresses.ts'

export type TraceProtocol = 'icmp' | 'tcp' | 'udp'

/** The source port of traced TCP and UDP packets (the first ephemeral port). */
export const EPHEMERAL_PORT = 49152
/** The TTL (hop limit) a traced packet starts with. */
export const TRACE_TTL = 64

export interface PacketSpec {
  /** The logical port the packet enters through. */
  readonly inport: string
  readonly ethSrc: string
  readonly ethDst: string
  readonly ipSrc: string
  readonly ipDst: string
  /** Default `icmp`: an echo request. TCP is a SYN. */
  readonly proto?: TraceProtocol
  /** The destination port, for `tcp` and `udp` (required there). */
  readonly port?: number
  /** Default TRACE_TTL. */
  readonly ttl?: number
}

/** A microflow could not be built from what it was given (a bad address or name). */
export class InvalidMicroflow extends HydrazineError {
  constructor(message: string) {
    super('TRACE_FLOW_INVALID', `cannot build the traced packet: ${message}`)
  }
}

const MAC = /^([0-9a-f]{2}:){5}[0-9a-f]{2}$/

function mac(value: string, what: string): string {
  const lower = value.toLowerCase()
  if (!MAC.test(lower)) throw new InvalidMicroflow(`${what} ${JSON.stringify(value)} is not a MAC`)
  return lower
}

function port(name: string): string {
  if (name === '' || /["\\\n]/.test(name)) {
    throw new InvalidMicroflow(`${JSON.stringify(name)} is not a logical port name`)
  }
  return `"${name}"`
}

function family(ip: string, what: string): 4 | 6 {
  const f = isIP(ip)
  if (f === 0 || ip.includes('%')) {
    throw new InvalidMicroflow(`${what} ${JSON.stringify(ip)} is not an IP address`)
  }
  return f as 4 | 6
}

/** The microflow of one packet entering `inport` (ovn-trace's expression syntax). */
export function microflow(p: PacketSpec): string {
  const v = family(p.ipSrc, 'source')
  if (family(p.ipDst, 'destination') !== v) {
    throw new InvalidMicroflow(`${p.ipSrc} and ${p.ipDst} are not of one address family`)
  }
  const ttl = p.ttl ?? TRACE_TTL
  if (!Number.isInteger(ttl) || ttl < 1 || ttl > 255) {
    throw new InvalidMicroflow(`TTL ${ttl} is not from 1 to 255`)
  }
  const parts = [
    `inport == ${port(p.inport)}`,
    `eth.src == ${mac(p.ethSrc, 'source MAC')}`,
    `eth.dst == ${mac(p.ethDst, 'destination MAC')}`,
    `ip${v}.src == ${p.ipSrc}`,
    `ip${v}.dst == ${p.ipDst}`,
    `ip.ttl == ${ttl}`,
  ]
  const proto = p.proto ?? 'icmp'
  if (proto === 'icmp') {
    if (p.port !== undefined) throw new InvalidMicroflow('ICMP has no port')
    parts.push(
      v === 4
        ? 'icmp4 && icmp4.type == 8 && icmp4.code == 0'
        : 'icmp6 && icmp6.type == 128 && icmp6.code == 0',
    )
    return parts.join(' && ')
  }
  if (p.port === undefined || !Number.isInteger(p.port) || p.port < 1 || p.port > 65535) {
    throw new InvalidMicroflow(`${proto} needs a port from 1 to 65535`)
  }
  parts.push(proto, `${proto}.src == ${EPHEMERAL_PORT}`, `${proto}.dst == ${p.port}`)
  if (proto === 'tcp') parts.push('tcp.flags == 2')
  return parts.join(' && ')
}

/**
 * The broadcast ARP request a host sends for `target` on its own subnet, entering
 * `inport`: what the host does before it can send to an on-link address whose MAC it
 * does not know. IPv4 only (IPv6 asks with neighbour solicitations).
 */
export function arpRequest(p: {
  readonly inport: string
  readonly mac: string
  readonly ip: string
  readonly target: string
}): string {
  if (family(p.ip, 'source') !== 4 || family(p.target, 'target') !== 4) {
    throw new InvalidMicroflow('ARP asks for IPv4 addresses only')
  }
  const source = mac(p.mac, 'source MAC')
  return [
    `inport == ${port(p.inport)}`,
    `eth.src == ${source}`,
    'eth.dst == ff:ff:ff:ff:ff:ff',
    'arp.op == 1',
    `arp.sha == ${source}`,
    `arp.spa == ${p.ip}`,
    'arp.tha == 00:00:00:00:00:00',
    `arp.tpa == ${p.target}`,
  ].join(' && ')
}

/**
 * Whether a host at `source` sends to `destination` directly (both in one of `subnets`,
 * its own) or through its router. An address in none of them goes through the router.
 */
export function onLink(source: string, destination: string, subnets: readonly string[]): boolean {
  const own = subnets.find((cidr) => inSubnet(source, cidr))
  return own !== undefined && inSubnet(destination, own)
}

/**
 * The MAC and addresses a Southbound `Port_Binding.mac` entry names:
 * `"0a:00:00:00:00:02 10.0.0.3"`, `"0a:… 10.0.0.1/24 fd00::1/64"`, `"router"`, `"unknown"`.
 */
export function bindingAddresses(entry: string): { mac: string; ips: string[] } | undefined {
  const [first, ...rest] = entry.trim().split(/\s+/)
  if (!first || !MAC.test(first.toLowerCase())) return undefined
  return {
    mac: first.toLowerCase(),
    ips: rest.map((a) => a.split('/')[0] ?? '').filter((a) => isIP(a) !== 0),
  }
}
