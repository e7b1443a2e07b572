import { HydrazineError } from '../../errors.ts'

/** The group spec handed to the compiler is malformed. Not retryable: fix the spec. */
export class InvalidTopologySpec extends HydrazineError {
  constructor(
    readonly group: string,
    message: string,
    readonly issues: readonly { path: string; message: string }[] = [],
  ) {
    super('TOPOLOGY_SPEC_INVALID', `group ${group}: ${message}`)
  }
}

/**
 * FabricAccess/PublicAccess of a host without IPv4 while its IPv6 does not leave the group
 * (the fabric has no IPv6, `dummyFabricIp6`): the DPU's NAT IP and public IPs are IPv4,
 * and an IPv6 address is not translated to them (no NAT64).
 */
export class Ipv6NatUnsupported extends HydrazineError {
  constructor(
    readonly group: string,
    readonly host: string,
    readonly access: string,
  ) {
    super(
      'IPV6_NAT_UNSUPPORTED',
      `group ${group}: host ${host} has no IPv4 address and the fabric no IPv6, and ${access} gives IPv4 fabric and public addresses (no NAT64)`,
    )
  }
}

/** Two members claim the same external address on a DPU, or a DPU has two NAT IPs. */
export class NatConflict extends HydrazineError {
  constructor(
    readonly group: string,
    readonly dpu: string,
    message: string,
  ) {
    super('TOPOLOGY_NAT_CONFLICT', `group ${group}, DPU ${dpu}: ${message}`)
  }
}

/** The read-diff-commit loop lost the race with other writers too many times. */
export class TopologyApplyContention extends HydrazineError {
  constructor(
    readonly group: string,
    readonly attempts: number,
  ) {
    super(
      'TOPOLOGY_APPLY_CONTENTION',
      `group ${group}: NB rows changed under ${attempts} consecutive applies`,
      { retryable: true },
    )
  }
}

/**
 * Two hosts of a group have the same DNS name (the store refuses the second; hosts stored
 * before DNS names existed may still): none of them gets a record, as none is the answer.
 */
export class DnsNameConflict extends HydrazineError {
  constructor(
    readonly group: string,
    readonly host: string,
    readonly dnsName: string,
    readonly others: readonly string[],
  ) {
    super(
      'DNS_NAME_CONFLICT',
      `group ${group}: host ${host} has the DNS name ${dnsName}, as ${others.join(', ')} has; none of them gets a DNS record`,
    )
  }
}
