/**
 * Which NAT rule of a gateway router applies to a packet, as OVN decides it: the source
 * address a host leaves as (its own `dnat_and_snat` first, else the `snat` of the longest
 * prefix holding it), and the host address a fabric address is DNATed to. Pure.
 */
import { inSubnet } from '../topology/addresses.ts'

/** A NAT row of a gateway router (NB `NAT`). */
export interface NatRule {
  readonly type: 'snat' | 'dnat' | 'dnat_and_snat'
  readonly external_ip: string
  /** An address, or for `snat` a network (`10.0.0.0/24`). */
  readonly logical_ip: string
}

const prefixOf = (logical: string) =>
  logical.includes('/') ? Number(logical.split('/')[1]) : logical.includes(':') ? 128 : 32

const holds = (logical: string, ip: string) =>
  logical.includes('/') ? inSubnet(ip, logical) : logical === ip

/**
 * The address a packet from `source` leaves as; undefined when no rule rewrites it.
 *
 * @example snatSourceOf([{ type: 'snat', external_ip: '172.18.0.5', logical_ip: '10.0.0.0/24' }], '10.0.0.2') // '172.18.0.5'
 */
export function snatSourceOf(rules: readonly NatRule[], source: string): string | undefined {
  const candidates = rules
    .filter((r) => r.type !== 'dnat' && holds(r.logical_ip, source))
    .sort((a, b) => prefixOf(b.logical_ip) - prefixOf(a.logical_ip))
  return candidates[0]?.external_ip
}

/** The host address `external` is DNATed to; undefined when no rule takes it in. */
export function dnatTargetOf(rules: readonly NatRule[], external: string): string | undefined {
  return rules.find((r) => r.type !== 'snat' && r.external_ip === external)?.logical_ip
}
