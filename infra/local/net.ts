/**
 * Where the embedded daemons listen: ports, TLS or not, certificate addresses. Shared by
 * the local stack (`./stack.ts`) and every OVN central (`./ovn-central.ts`).
 */
import { networkInterfaces } from 'node:os'
import { HydrazineError } from '../../lib/errors.ts'
import { DaemonStartError } from '../../lib/process/errors.ts'
import { canConnect, freePort, isLoopback } from '../../lib/process/ports.ts'

/** How often a start is tried when its port was taken between pick and bind. */
const START_ATTEMPTS = 3

/** A daemon was asked to serve plaintext on an address other machines can reach. */
export class PlaintextRefusedError extends HydrazineError {
  constructor(
    readonly service: string,
    readonly address: string,
  ) {
    super(
      'PLAINTEXT_REFUSED',
      `${service} would serve plaintext on ${address}: plaintext is only allowed on loopback`,
    )
  }
}

/** A preferred port if it is free, else one the kernel says is free. */
export async function pickPort(
  preferred: number | undefined,
  log: (l: string) => void,
  what: string,
): Promise<number> {
  if (preferred && !(await canConnect({ port: preferred }))) return preferred
  if (preferred) log(`${what}: port ${preferred} is taken, using a free one`)
  return freePort()
}

/** Whether a daemon on `address` speaks TLS: asked for, or else off loopback; never plaintext off it. */
export function wantsTls(service: string, address: string, tls: boolean | undefined): boolean {
  if (tls === false && !isLoopback(address)) throw new PlaintextRefusedError(service, address)
  return tls ?? !isLoopback(address)
}

/** The IP SANs of a server on `address`: that address, or every local one for a wildcard. */
export function serverIps(address: string): string[] {
  if (address !== '0.0.0.0' && address !== '::') return [address]
  const all = Object.values(networkInterfaces())
    .flat()
    .map((i) => i?.address)
    .filter((a): a is string => a !== undefined && !a.startsWith('fe80'))
  return [...new Set(all)]
}

/** `host` as it goes before `:port` in a URL or OVSDB remote (IPv6 in brackets). */
export const hostPart = (host: string): string => (host.includes(':') ? `[${host}]` : host)

/** Retries a start that failed because its port was taken between pick and bind. */
export async function withPortRetry<T>(start: (attempt: number) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start(attempt)
    } catch (error) {
      if (!(error instanceof DaemonStartError && error.addressInUse) || attempt >= START_ATTEMPTS)
        throw error
    }
  }
}

/** True for an IPv4 or IPv6 literal (no TLS server name for those). */
export const isIpAddress = (host: string) => /^[0-9.]+$/.test(host) || host.includes(':')
