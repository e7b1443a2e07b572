/**
 * The controller's queue: job names, valibot payload schemas and job ids. Jobs carry an
 * object's identity and the spec version that prompted them; handlers re-read the
 * current desired state, so a stale or duplicate job converges to the same end state.
 */
import type { JobsOptions } from 'bullmq'
import * as v from 'valibot'
import { Ipv4, Ipv6, Rfc1123Label } from '../model/objects.ts'

/**
 * The controller's queue, its hash tag first (`lib/redis/slots.ts`). Agents have
 * `agentQueueName(dpuId)`, FRR has `FRR_QUEUE`.
 */
export const CONTROLLER_QUEUE = '{hz-controller}hydrazine'

const specVersion = v.pipe(v.number(), v.integer(), v.minValue(0))
/**
 * Which attempt at this spec version the job is (default 1): a Failed object re-driven
 * (re-PUT of the same spec, or the controller retrying a cause that went away) starts a
 * new attempt with its own job ids, so BullMQ does not take it for the old job.
 */
const attempt = v.optional(v.pipe(v.number(), v.integer(), v.minValue(1)))

export const GroupJob = v.strictObject({ group: Rfc1123Label, specVersion, attempt })
export const GroupDeleteJob = v.strictObject({
  group: Rfc1123Label,
  force: v.optional(v.boolean(), false),
})
export const HostJob = v.strictObject({ host: Rfc1123Label, specVersion, attempt })
export const HostDetachJob = v.strictObject({
  host: Rfc1123Label,
  specVersion,
  force: v.optional(v.boolean(), false),
})
/** Which of a host's public IPs a job is about: its IPv4 (4), its IPv6 (6), or both. */
const Families = v.pipe(
  v.array(v.picklist([4, 6])),
  v.minLength(1, 'families names at least one of 4 and 6'),
  v.maxLength(2),
)
/**
 * Jobs name objects, never facts their handler can read itself: the DPU NAT addresses a
 * host's public IPs go via are read from the store, never taken from a payload. An
 * earlier version put them in the payload (`natIp`, `natIp6`); a job of it still queued
 * at an upgrade is accepted, its addresses ignored but for the family each stands for.
 */
const LegacyNat = { natIp: v.optional(Ipv4), natIp6: v.optional(Ipv6) }
const legacyFamilies = (job: {
  natIp?: string | undefined
  natIp6?: string | undefined
}): (4 | 6)[] => [
  ...(job.natIp !== undefined ? [4 as const] : []),
  ...(job.natIp6 !== undefined ? [6 as const] : []),
]
/**
 * `publicip.allocate`: the host's public IPv4 (4) is taken and announced via its DPU's
 * NAT IP; its public IPv6 (6, when its IPv6 leaves its group) via its DPU's IPv6 NAT address.
 */
export const PublicIpJob = v.pipe(
  v.strictObject({
    host: Rfc1123Label,
    specVersion,
    families: v.optional(Families),
    ...LegacyNat,
    attempt,
  }),
  v.forward(
    v.check(
      (job) => job.families !== undefined || legacyFamilies(job).length > 0,
      'families is required',
    ),
    ['families'],
  ),
  v.transform(({ natIp, natIp6, families, ...job }) => ({
    ...job,
    families: families ?? legacyFamilies({ natIp, natIp6 }),
  })),
)
/** `publicip.release`: the host's public IPs of `families` (default both) withdrawn and given back. */
export const PublicIpReleaseJob = v.pipe(
  v.strictObject({ host: Rfc1123Label, specVersion, families: v.optional(Families), ...LegacyNat }),
  v.transform(({ natIp: _natIp, natIp6: _natIp6, ...job }) => job),
)
export const ReconcileJob = v.strictObject({})
/** `dpu.health` (repeatable): the DPUs' heartbeats against their hosts' status. */
export const DpuHealthJob = v.strictObject({})
/** `admin.sync` (repeatable): the admin network's ports against the inventory and its hosts. */
export const AdminSyncJob = v.strictObject({})
/**
 * `central.stop`: the group's last host left (`since`, ms); its central stops once it
 * has had none for the grace period (centrals on demand).
 */
export const CentralStopJob = v.strictObject({
  group: Rfc1123Label,
  since: v.pipe(v.number(), v.integer(), v.minValue(0)),
})

export const JobSchemas = {
  'group.create': GroupJob,
  'group.delete': GroupDeleteJob,
  'host.attach': HostJob,
  'host.detach': HostDetachJob,
  'publicip.allocate': PublicIpJob,
  'publicip.release': PublicIpReleaseJob,
  reconcile: ReconcileJob,
  'dpu.health': DpuHealthJob,
  'admin.sync': AdminSyncJob,
  'central.stop': CentralStopJob,
} as const

export type JobName = keyof typeof JobSchemas

/** How the controller's jobs retry, and how long their results are kept. */
export const JOB_OPTIONS: JobsOptions = {
  attempts: 12,
  backoff: { type: 'exponential', delay: 500 },
  removeOnComplete: { age: 24 * 3600, count: 10_000 },
  removeOnFail: { age: 7 * 24 * 3600, count: 10_000 },
}

/**
 * The job id for an object at a spec version (and attempt, when not the first): the
 * same request twice is one job. BullMQ 6 ids may not contain ':' nor be integers.
 *
 * @example
 * jobId('host.attach', 'host-a', 3) // 'host.attach-host-a-v3'
 * jobId('host.attach', 'host-a', 3, 2) // 'host.attach-host-a-v3-a2'
 */
export function jobId(
  name: JobName,
  object: string,
  version: number | string,
  attempt = 1,
): string {
  return `${name}-${object}-v${version}${attemptSuffix(attempt)}`
}

/**
 * The version part of a deletion job's id: a forced deletion is its own job, so that
 * forcing a deletion already under way is not taken for the same request.
 */
export function deletionVersion(specVersion: number, force: boolean): string {
  return `${specVersion}${force ? '-force' : ''}`
}

/** What an attempt adds to a job id: nothing for the first, `-aN` after. */
export function attemptSuffix(attempt = 1): string {
  return attempt > 1 ? `-a${attempt}` : ''
}

/** The result of `publicip.allocate` and `publicip.release`: the ack their parent reads. */
export const PublicIpResult = v.object({
  host: v.string(),
  /** The host's public IPv4; null when it has none (released, never allocated, IPv6 only). */
  publicIp: v.nullable(v.string()),
  /** The host's public IPv6 address; absent or null when it has none. */
  publicIp6: v.optional(v.nullable(v.string())),
  /** True when FRR's BGP table shows `publicIp/32` (and `publicIp6/128`, when it has one). */
  announced: v.boolean(),
})
export type PublicIpResult = v.InferOutput<typeof PublicIpResult>
