import { HydrazineError } from '../errors.ts'

/** vtysh could not be run, or FRR refused a command Hydrazine sent. */
export class VtyshError extends HydrazineError {
  constructor(
    readonly vtyDir: string,
    readonly detail: string,
    options: { retryable?: boolean; cause?: unknown } = {},
  ) {
    super('FRR_VTYSH_FAILED', `vtysh (${vtyDir}): ${detail}`, {
      retryable: options.retryable ?? true,
      cause: options.cause,
    })
  }
}

/**
 * The prefix is configured in FRR by someone else (an operator, by hand): Hydrazine
 * neither takes it over nor withdraws it.
 */
export class PrefixNotOwnedError extends HydrazineError {
  constructor(readonly prefix: string) {
    super(
      'FRR_PREFIX_NOT_OWNED',
      `${prefix} is configured in FRR without a Hydrazine route-map; remove it by hand first`,
      { retryable: false },
    )
  }
}

/** FRR's BGP table did not show the change in time. */
export class AckTimeoutError extends HydrazineError {
  constructor(
    readonly prefix: string,
    readonly expected: string,
    readonly timeoutMs: number,
  ) {
    super(
      'FRR_ACK_TIMEOUT',
      `FRR's BGP table did not show ${prefix} ${expected} within ${timeoutMs} ms`,
      { retryable: true },
    )
  }
}

/** FRR runs no default BGP instance (`router bgp N`), so there is nothing to announce from. */
export class NoBgpInstanceError extends HydrazineError {
  constructor(readonly vtyDir?: string) {
    super(
      'FRR_NO_BGP_INSTANCE',
      'FRR has no default BGP instance (router bgp N) to announce from',
      {
        retryable: true,
      },
    )
  }
}

/**
 * Hydrazine was asked for an announcement it cannot make: the prefix is not a public IP's
 * `/32` or `/128` in FRR's canonical form, or the next hop is not an address of the same
 * family (an IPv4 /32 goes via an IPv4 NAT IP, an IPv6 /128 via an IPv6 one). Retrying
 * the same request cannot succeed.
 */
export class InvalidAnnouncementError extends HydrazineError {
  constructor(
    readonly prefix: string,
    readonly nextHop: string | null,
    readonly reason: string,
  ) {
    super(
      'FRR_INVALID_ANNOUNCEMENT',
      `cannot ${nextHop === null ? `withdraw ${prefix}` : `announce ${prefix} via ${nextHop}`}: ${reason}`,
      { retryable: false },
    )
  }
}
