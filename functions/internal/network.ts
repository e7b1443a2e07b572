/**
 * A group's network as the DPUs see it: what its members are sent, a host's SLAAC
 * address, and the address and MAC of its DHCP relay on each DPU. Pure. The IPAM network
 * spec of a group and its SLAAC owners are `lib/ipam/group-network.ts`.
 */
import { createHash } from 'node:crypto'
import { eui64Address } from '../../lib/ipam/address.ts'
import {
  cidrContains,
  type ManagedResourceSpec,
  type ResourceGroup,
  type ResourceGroupSpec,
} from '../../lib/model/objects.ts'

const RELAY_OWNER_PREFIX = 'relay/'

/**
 * An IPv6-only group's host that names no address or pool: its SLAAC address is its own
 * (held under its name), not a second one under `ipv6OwnerOf`.
 */
export function ownsSlaacAddress(
  group: Pick<ResourceGroupSpec, 'network' | 'network6'>,
  host: Pick<ManagedResourceSpec, 'hostIP' | 'pool'>,
): boolean {
  return (
    group.network === undefined &&
    group.network6 !== undefined &&
    !host.hostIP &&
    host.pool === undefined
  )
}

/** What a group's `network6` does to a member's second (SLAAC) address. */
export interface SlaacChange {
  /** The address it holds that the network6 no longer holds: given back. */
  readonly release?: string
  /** The address its MAC gives in the network6, when it holds none there: taken. */
  readonly allocate?: string
  /** The address it ends with, if any. */
  readonly ip6?: string
}

/**
 * What `network6` does to the SLAAC address `held` by a member with `mac` (`ipv6/<host>`):
 * one the network6 no longer holds is given back (as IPAM does, `IPV6_OWNERS`), and one in it is taken
 * from the MAC's EUI-64 identifier when the member holds none there. Pure.
 *
 * @example
 * slaacChangeOf('fd00:10::800:ff:fe00:1', '0a:00:00:00:00:01', { cidr: 'fd00:20::/64' })
 * // { release: 'fd00:10::800:ff:fe00:1', allocate: 'fd00:20::800:ff:fe00:1', ip6: 'fd00:20::800:ff:fe00:1' }
 */
export function slaacChangeOf(
  held: string | undefined,
  mac: string,
  network6: { readonly cidr: string } | undefined,
): SlaacChange {
  const kept = held !== undefined && network6 !== undefined && cidrContains(network6.cidr, held)
  if (kept) return { ip6: held }
  const allocate = network6 ? eui64Address(network6.cidr, mac) : undefined
  return {
    ...(held !== undefined ? { release: held } : {}),
    ...(allocate !== undefined ? { allocate, ip6: allocate } : {}),
  }
}

/**
 * What a group's members are sent of its spec, or report of it: its networks (their
 * addresses, the relay's prefix length, a dual-stack host's IPv6 address) and its DHCP
 * server. Its policies, DNS, pools and reservations are NB's alone: changing only them
 * reconfigures no member.
 */
export function memberSettingsOf(spec: ResourceGroup['spec']): string {
  return JSON.stringify([
    spec.network,
    spec.extraSubnets ?? [],
    spec.network6 ?? null,
    spec.dhcpServer ?? null,
  ])
}

/**
 * The IPAM owner of a group's relay address on one DPU. The `/` keeps it apart from host
 * names, which are RFC 1123 labels.
 */
export function relayOwnerOf(dpuId: string): string {
  return `${RELAY_OWNER_PREFIX}${dpuId}`
}

/** The DPU a relay owner names; undefined for a host's owner. */
export function relayDpuOf(owner: string): string | undefined {
  return owner.startsWith(RELAY_OWNER_PREFIX) ? owner.slice(RELAY_OWNER_PREFIX.length) : undefined
}

/**
 * The DPU interface of a group's DHCP relay, named from the group's relay id (unique for
 * ever: `StateStore.groups.relayIdOf`): `hzr` + 8 hex digits, a valid Linux interface name. The
 * name is the relay's circuit id (RFC 3046 option 82), which the DHCP server sees.
 *
 * @example relayPortNameOf(26) // 'hzr0000001a'
 */
export function relayPortNameOf(relayId: number): string {
  return `hzr${relayId.toString(16).padStart(8, '0')}`
}

/** A deterministic, locally administered unicast MAC for a relay port. */
export function relayMacOf(group: string, dpuId: string): string {
  const h = createHash('sha256').update(`${group}/${dpuId}/relay`).digest()
  const bytes = [0x0a, h[0] ?? 0, h[1] ?? 0, h[2] ?? 0, h[3] ?? 0, h[4] ?? 0]
  return bytes.map((b) => b.toString(16).padStart(2, '0')).join(':')
}
