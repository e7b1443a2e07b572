/**
 * The FRR queue's contract: jobs that make Hydrazine's FRR announce or withdraw a public
 * IP /32. The job's return value is the ack (`FrrAck`), given once FRR's BGP table shows
 * the change. Producers (`queues/frr.ts`), the handler (`functions/frr-sync.ts`) and the
 * handlers that wait on the ack all read these schemas.
 */
import { isIPv4 } from 'node:net'
import * as v from 'valibot'
import { Rfc1123Label } from '../state/objects.ts'

/** The FRR queue, its hash tag first (`lib/redis/slots.ts`). */
export const FRR_QUEUE = '{hz-frr}frr'

export const FrrJobName = { announce: 'announce', withdraw: 'withdraw' } as const
export type FrrJobName = (typeof FrrJobName)[keyof typeof FrrJobName]

/**
 * `resync` (repeatable, no payload): the FRR consumer's own periodic repair, produced by
 * its job scheduler of the same id; its result is a `ResyncResult` (`lib/frr`).
 */
export const FRR_RESYNC_JOB = 'resync'

const ipv4 = v.pipe(
  v.string(),
  v.check(isIPv4, 'must be an IPv4 address (IPv6 NAT is not supported)'),
)
/** The object the prefix is for: a host name. */
const owner = Rfc1123Label
const specVersion = v.pipe(v.number(), v.integer(), v.minValue(0))

/** `announce`: announce `publicIp/32` with next hop `nextHop` (the host's DPU NAT IP). */
export const AnnouncePayload = v.object({ publicIp: ipv4, nextHop: ipv4, owner, specVersion })
export type AnnouncePayload = v.InferOutput<typeof AnnouncePayload>

/** `withdraw`: stop announcing `publicIp/32`. `nextHop` is informational. */
export const WithdrawPayload = v.object({
  publicIp: ipv4,
  nextHop: v.optional(ipv4),
  owner,
  specVersion,
})
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
  prefix: v.string(),
  /** True when the table shows the prefix (via `nextHop`), false when it is gone. */
  announced: v.boolean(),
  nextHop: v.nullable(v.string()),
  owner: v.string(),
  specVersion,
  /** ISO time the table was read. */
  observedAt: v.string(),
})
export type FrrAck = v.InferOutput<typeof FrrAck>

/**
 * A job id that makes duplicates harmless: the same change of the same owner at the same
 * spec version is one job. (BullMQ ids may not contain ':'; owners are RFC 1123 labels.)
 *
 * @example frrJobId('announce', p) // 'frr-announce-203.0.113.7-host-a-v3'
 */
export function frrJobId(
  name: FrrJobName,
  payload: Pick<FrrPayload, 'publicIp' | 'owner' | 'specVersion'>,
  attempt = 1,
): string {
  return `frr-${name}-${payload.publicIp}-${payload.owner}-v${payload.specVersion}${attempt > 1 ? `-a${attempt}` : ''}`
}
