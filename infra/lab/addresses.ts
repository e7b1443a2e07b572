/**
 * The lab fabric's address plan, one /24 (`base.0/24`): `.1` Hydrazine, `.2…` the DPUs'
 * encap IPs (handed out in order), `.101…` their NAT IPs, `.150…` their DHCP relays'
 * uplink addresses (`relaysPerDpu` each: one per group a DPU relays for), `.200` the fabric
 * router, `.250` the gateway routers' reserved address. Planned up front, so a lab too big
 * for its /24 is refused before anything starts instead of overlapping addresses.
 *
 * The fabric is dual-stack: `FABRIC6` (`fd00:fab::/64`, on the fabric's own namespaces
 * only, so labs side by side do not meet) numbers the same way in hex: the router
 * `::c8`, the gateway routers' reserved `::fa`, DPU `i`'s IPv6 NAT address `::(100+i)`.
 */

/** The fabric router's and the gateway routers' reserved host numbers. */
const ROUTER = 200
const RESERVED = 250
const FIRST_RELAY = 150

/** The fabric's IPv6 /64. */
export const FABRIC6 = 'fd00:fab::/64'
const at6 = (host: number) => `fd00:fab::${host.toString(16)}`
/** The fabric router's IPv6 address (the gateway routers' IPv6 next hop). */
export const ROUTER_IP6 = at6(ROUTER)
/** The gateway routers' reserved IPv6 address with prefix (`HYDRAZINE_FABRIC_DUMMY_IP6`). */
export const RESERVED_IP6 = `${at6(RESERVED)}/64`

export interface DpuAddresses {
  /** `base.(100+i)` */
  readonly natIp: string
  /** `fd00:fab::(100+i)`, in hex */
  readonly natIp6: string
  /** With the /24 prefix length, one per relay. */
  readonly relayUplinkIps: readonly string[]
}

/**
 * The addresses of DPU `i` (1-based) of `dpus`; throws when `dpus` DPUs with
 * `relaysPerDpu` relays each do not fit the /24.
 *
 * @example
 * labDpuAddresses('100.64.1', 3, 20, 1)
 * // { natIp: '100.64.1.103', natIp6: 'fd00:fab::67', relayUplinkIps: ['100.64.1.152/24'] }
 */
export function labDpuAddresses(
  base: string,
  i: number,
  dpus: number,
  relaysPerDpu: number,
): DpuAddresses {
  const fits = maxLabDpus(relaysPerDpu)
  if (!Number.isInteger(dpus) || dpus < 1 || dpus > fits) {
    throw new RangeError(
      `the lab's fabric /24 holds at most ${fits} DPUs with ${relaysPerDpu} relay(s) each, not ${dpus}`,
    )
  }
  const relayUplinkIps = Array.from({ length: relaysPerDpu }, (_, n) => {
    const index = (i - 1) * relaysPerDpu + n
    const host = FIRST_RELAY + index + (FIRST_RELAY + index >= ROUTER ? 1 : 0)
    return `${base}.${host}/24`
  })
  return { natIp: `${base}.${100 + i}`, natIp6: at6(100 + i), relayUplinkIps }
}

/** How many DPUs the /24 holds with `relaysPerDpu` relay addresses each. */
export function maxLabDpus(relaysPerDpu: number): number {
  // Relays: .150–.249 without the router's .200; NAT IPs: .101–.149.
  const relays = Math.floor((RESERVED - FIRST_RELAY - 1) / relaysPerDpu)
  return Math.min(relays, FIRST_RELAY - 101)
}
