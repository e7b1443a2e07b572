/**
 * The address arithmetic of a group's topology: which subnet an address lies in, the
 * link-local /30 of each DPU's transit link and the MAC of each router port. Pure.
 */
import { createHash } from 'node:crypto'
import { type Address, parseIp } from '../../ipam/address.ts'
import { InvalidRequest } from '../../ipam/errors.ts'

/** Where every group's IPv4 transit links live (link-local: no group subnet is there). */
export const TRANSIT_NETWORK = '169.254.0.0/16'
const LINK_LOCAL_SLOTS = 16_384 // /30s in TRANSIT_NETWORK

/** Link-local /30 per DPU: LR side `.1`, gateway router side `.2` of slot `n`. */
export function transitAddresses(slot: number): { lrSide: string; gwSide: string } {
  const base = slot * 4
  const at = (offset: number) => `169.254.${(base + offset) >> 8}.${(base + offset) & 255}`
  return { lrSide: at(1), gwSide: at(2) }
}

/**
 * The IPv6 transit link of slot `n` (dual-stack groups whose IPv6 leaves them): the /126
 * of `TRANSIT6_NETWORK` numbered like the IPv4 /30, LR side `…1`, gateway router `…2`.
 *
 * @example transitAddresses6(1) // { lrSide: 'fd00:a9fe::5', gwSide: 'fd00:a9fe::6' }
 */
export function transitAddresses6(slot: number): { lrSide: string; gwSide: string } {
  const at = (offset: number) => `fd00:a9fe::${(slot * 4 + offset).toString(16)}`
  return { lrSide: at(1), gwSide: at(2) }
}

/** Where every group's IPv6 transit links live; no group subnet may overlap it. */
export const TRANSIT6_NETWORK = 'fd00:a9fe::/64'

/**
 * Each DPU's transit slot: a hash of its id, probing on collision in DPU id order, so a
 * DPU joining or leaving does not renumber the others.
 */
export function linkLocalSlots(dpus: readonly string[]): Map<string, number> {
  const taken = new Set<number>()
  const out = new Map<string, number>()
  for (const dpu of [...dpus].sort()) {
    let slot = hashSlot(dpu)
    while (taken.has(slot)) slot = (slot + 1) % LINK_LOCAL_SLOTS
    taken.add(slot)
    out.set(dpu, slot)
  }
  return out
}

/** A DPU's preferred link-local slot (memoised: every compile asks for every DPU's). */
function hashSlot(dpu: string): number {
  let slot = slotOfDpu.get(dpu)
  if (slot === undefined) {
    if (slotOfDpu.size >= 100_000) slotOfDpu.clear()
    slot = createHash('sha256').update(dpu).digest().readUInt32BE(0) % LINK_LOCAL_SLOTS
    slotOfDpu.set(dpu, slot)
  }
  return slot
}
const slotOfDpu = new Map<string, number>()

/** A stable, locally administered unicast MAC for a router port. */
export function macFor(portName: string): string {
  const h = createHash('sha256').update(portName).digest()
  return ['0a', ...[0, 1, 2, 3, 4].map((i) => (h[i] ?? 0).toString(16).padStart(2, '0'))].join(':')
}

/** The prefix length of a CIDR, e.g. 24 for `10.10.10.0/24`. */
export function prefixLength(cidr: string): number {
  return Number(cidr.split('/')[1])
}

/**
 * True when `ip` lies inside `cidr` (same address family; host bits in `cidr` are
 * ignored, as OVN does for a NAT's `logical_ip`).
 *
 * @example inSubnet('fd00:10::5', 'fd00:10::/64') // true
 */
export function inSubnet(ip: string, cidr: string): boolean {
  const [base = '', length = ''] = cidr.split('/')
  const address = addressOf(ip)
  const network = addressOf(base)
  if (!address || !network || address.version !== network.version) return false
  const bits = address.version === 4 ? 32 : 128
  if (!/^\d{1,3}$/.test(length) || Number(length) > bits) return false
  const shift = BigInt(bits - Number(length))
  return address.value >> shift === network.value >> shift
}

/** The address `text` spells, or undefined when it spells none. */
function addressOf(text: string): Address | undefined {
  try {
    return parseIp(text)
  } catch (error) {
    if (error instanceof InvalidRequest) return undefined
    throw error
  }
}
