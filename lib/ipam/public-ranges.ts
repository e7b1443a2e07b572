/**
 * The address ranges that can never be a public IP, kept apart from the pool (no I/O) so that
 * the model's schemas refuse them before anything is stored.
 */
import { TRANSIT_NETWORK, TRANSIT6_NETWORK } from '../ovn/topology/addresses.ts'
import { type Address, containsAddress, parseCidr } from './address.ts'

/**
 * Ranges no host can be reached at from the internet or the data centre: an address there
 * would be announced over BGP and NATed to a host, and either never arrive or capture
 * traffic meant for something else (this machine, a link, a multicast group, the transit
 * links between a group's routers).
 */
const NOT_PUBLIC = [
  ['0.0.0.0/8', 'this network'],
  ['127.0.0.0/8', 'loopback'],
  [TRANSIT_NETWORK, "link-local, and Hydrazine's transit links"],
  ['224.0.0.0/4', 'multicast'],
  ['240.0.0.0/4', 'reserved (and broadcast)'],
  ['::/127', 'unspecified or loopback'],
  ['::ffff:0:0/96', 'IPv4-mapped'],
  ['fe80::/10', 'link-local'],
  ['ff00::/8', 'multicast'],
  [TRANSIT6_NETWORK, "Hydrazine's transit links"],
].map(([cidr = '', what = '']) => ({ cidr, what, span: parseCidr(cidr) }))

/** Why `address` can never be a public IP (e.g. `127.0.0.0/8 is loopback`), or undefined. */
export function notPublic(address: Address): string | undefined {
  const hit = NOT_PUBLIC.find((r) => containsAddress(r.span, address))
  return hit && `${hit.cidr} is ${hit.what}`
}
