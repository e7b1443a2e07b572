/**
 * The FRR queue's contract: jobs that make Hydrazine's FRR announce or withdraw a public
 * IP — an IPv4 address as its /32, an IPv6 address as its /128. The job's return value is
 * the ack (`FrrAck`), given once FRR's BGP table shows the change. Producers
 * (`queues/frr.ts`), the handler (`functions/frr-sync.ts`) and the handlers that wait on
 * the ack all read these schemas.
 */
import * as v from 'valibot'
import { canonicalIp, ipFamily, publicPrefix } from '../frr/prefix.ts'
import { Rfc1123Label } from '../model/objects.ts'

/** `203.0.113.7` → `203.0.113.7/32`, `2001:db8:ff::5` → `2001:db8:ff::5/128` (lib/frr). */
export { publicPrefix }

/** The FRR queue, its hash tag first (`lib/redis/slots.ts`). */
export const FRR_QUEUE = '{hz-frr}frr'

export const FrrJobName = { announce: 'announce', withdraw: 'withdraw' } as const
export type FrrJobName = (typeof FrrJobName)[keyof typeof FrrJobName]

/**
 * `resync` (repeatable, no payload): the FRR consumer's own periodic repair, produced by
 * its job scheduler of the same id; its result is a `ResyncResult` (`lib/frr`).
 */
export const FRR_RESYNC_JOB = 'resync'

/** An IPv4 or IPv6 address, re-printed in the canonical form FRR shows it in. */
const ip = v.pipe(
  v.string(),
  v.check((s) => canonicalIp(s) !== undefined, 'must be an IPv4 or IPv6 address'),
  v.transform((s) => canonicalIp(s) ?? s),
)
/** The object the prefix is for: a host name. */
const owner = Rfc1123Label
const specVersion = v.pipe(v.number(), v.integer(), v.minValue(0))

/** A /32 goes via an IPv4 NAT IP, a /128 via an IPv6 NAT address. */
const nextHopCheck = (p: { publicIp: string; nextHop?: string | undefined }) =>
  p.nextHop === undefined || ipFamily(p.nextHop) === ipFamily(p.publicIp)
const NEXT_HOP_FAMILY =
  'must be of the same address family as publicIp (IPv4 via IPv4, IPv6 via IPv6)'

/**
 * `announce`: announce `publicIp` (its /32 or /128) with next hop `nextHop`, the host's
 * DPU NAT address of the same family.
 */
export const AnnouncePayload = v.pipe(
  v.object({ publicIp: ip, nextHop: ip, owner, specVersion }),
  v.forward(v.partialCheck([['publicIp'], ['nextHop']], nextHopCheck, NEXT_HOP_FAMILY), [
    'nextHop',
  ]),
)
export type AnnouncePayload = v.InferOutput<typeof AnnouncePayload>

/** `withdraw`: stop announcing `publicIp` (its /32 or /128). `nextHop` is informational. */
export const WithdrawPayload = v.pipe(
  v.object({ publicIp: ip, nextHop: v.optional(ip), owner, specVersion }),
  v.forward(v.partialCheck([['publicIp'], ['nextHop']], nextHopCheck, NEXT_HOP_FAMILY), [
    'nextHop',
  ]),
)
export type WithdrawPayload = v.InferOutput<typeof WithdrawPayload>

export type FrrPayload = AnnouncePayload | WithdrawPayload

/** What the handler reads of a job (a BullMQ `Job` is one). */
export interface FrrJob {
  readonly name: string
  readonly data: unknown
}

/** The ack: what FRR's BGP table showed for the prefix when the job finished. */
export const FrrAck = v.object({
  publicIp: v.string(),
  /** `publicIp/32` or `publicIp/128` (`publicPrefix`). */
  prefix: v.string(),
  /** True when the table shows the prefix (via `nextHop`), false when it is gone. */
  announced: v.boolean(),
  /** The next hop the table shows (for a /128, the global one), null when withdrawn. */
  nextHop: v.nullable(v.string()),
  owner: v.string(),
  specVersion,
  /** ISO time the table was read. */
  observedAt: v.string(),
})
export type FrrAck = v.InferOutput<typeof FrrAck>

/**
 * A job id that makes duplicates harmless: the same change of the same owner at the same
 * spec version is one job. BullMQ ids may not contain ':', so an IPv6 address is written
 * canonically with '_' for each ':' (no IPv4 address or RFC 1123 owner has a '_', so no
 * two ids collide); IPv4 addresses are written as they are.
 *
 * @example
 * frrJobId('announce', p) // 'frr-announce-203.0.113.7-host-a-v3'
 * frrJobId('announce', p6) // 'frr-announce-2001_db8_ff__5-host-a-v3'
 */
export function frrJobId(
  name: FrrJobName,
  payload: Pick<FrrPayload, 'publicIp' | 'owner' | 'specVersion'>,
  attempt = 1,
): string {
  const address = (canonicalIp(payload.publicIp) ?? payload.publicIp).replaceAll(':', '_')
  return `frr-${name}-${address}-${payload.owner}-v${payload.specVersion}${attempt > 1 ? `-a${attempt}` : ''}`
}
