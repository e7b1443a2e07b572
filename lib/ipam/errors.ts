/**
 * Errors IPAM throws on purpose. Each names what an operator needs to act on: the
 * network, the pool, the address, the owner that holds it.
 */
import { HydrazineError } from '../errors.ts'

/**
 * No free address is left in the pool (or in any pool, when `pool` is `*`). `message`
 * replaces the default one when the pool says more (it was never filled).
 */
export class PoolExhausted extends HydrazineError {
  constructor(
    readonly network: string,
    readonly pool: string,
    message = `network ${network}: pool ${pool} has no free address; release one (detach a host) or widen the pool in the group's spec`,
  ) {
    super('POOL_EXHAUSTED', message)
  }
}

/**
 * The operator's public IP pool of a family is empty because no address was ever
 * registered (not because hosts hold them all): it names the call that fills it.
 */
export class PublicPoolEmpty extends PoolExhausted {
  constructor(readonly family: 4 | 6) {
    const pool = family === 6 ? 'public-ips-ipv6' : 'public-ips'
    const example = family === 6 ? '2001:db8::10' : '203.0.113.10'
    super(
      'public',
      pool,
      `no public IPv${family} address has been registered yet (pool ${pool} is empty): an operator adds them with PUT /v1/public-ips/${example} (hz apply {"kind": "PublicIp", "name": "${example}"})`,
    )
  }
}

/**
 * Every id of an operator's fabric pool (VNIs or VLAN ids) is held by a Fabric group: it
 * names the setting that widens the pool.
 */
export class FabricPoolExhausted extends PoolExhausted {
  constructor(
    readonly kind: string,
    readonly range: { readonly first: number; readonly last: number; readonly setting: string },
    held: number,
  ) {
    super(
      'fabric',
      range.setting,
      `no ${kind} is free for a Fabric group: all of ${range.setting} (${range.first}-${range.last}) is held (${held} Fabric groups); widen ${range.setting}, or delete a Fabric group`,
    )
  }
}

/** Every registered public IP of a family is held by a host. */
export function publicPoolExhausted(family: 4 | 6, registered: number): PoolExhausted {
  const pool = family === 6 ? 'public-ips-ipv6' : 'public-ips'
  return new PoolExhausted(
    'public',
    pool,
    `all ${registered} public IPv${family} addresses of pool ${pool} are allocated: register more with PUT /v1/public-ips/{ip}, or lower the access of a host that holds one (one allocated to dpu:<id>:isolates:… is held until that DPU confirms it isolated a force-detached host)`,
  )
}

/** The address is already held by another owner. */
export class AddressInUse extends HydrazineError {
  constructor(
    readonly network: string,
    readonly ip: string,
    readonly owner: string,
  ) {
    super('ADDRESS_IN_USE', `network ${network}: ${ip} is already held by ${owner}`)
  }
}

/** The address or range does not lie inside a subnet it must belong to. */
export class NotInSubnet extends HydrazineError {
  constructor(
    readonly network: string,
    readonly what: string,
    readonly subnet?: string,
  ) {
    super(
      'NOT_IN_SUBNET',
      subnet === undefined
        ? `network ${network}: ${what} lies in none of its subnets`
        : `network ${network}: ${what} is not inside subnet ${subnet}`,
    )
  }
}

/** Two subnets, two pools or two external ranges of one network would overlap. */
export class Overlap extends HydrazineError {
  constructor(
    readonly network: string,
    readonly a: string,
    readonly b: string,
  ) {
    super('OVERLAP', `network ${network}: ${a} overlaps ${b}`)
  }
}

/**
 * The request contradicts current state: a different definition under the same name,
 * an address that may not be handed out, a removal of something still in use.
 * `holder` names who is in the way, when someone is.
 */
export class Conflict extends HydrazineError {
  constructor(
    message: string,
    readonly holder?: string,
    options: { retryable?: boolean } = {},
  ) {
    super('CONFLICT', message, options)
  }
}

/** The network, subnet, pool or public IP named does not exist. */
export class NotFound extends HydrazineError {
  constructor(
    readonly kind: string,
    readonly id: string,
  ) {
    super('NOT_FOUND', `${kind} ${id} does not exist`)
  }
}

/** The request is malformed: not an IP, a bad CIDR, a range that ends before it starts. */
export class InvalidRequest extends HydrazineError {
  constructor(message: string) {
    super('IPAM_INVALID', message)
  }
}
