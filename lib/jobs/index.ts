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
/**
 * `natIp` set: a public IPv4 address is taken and announced via it; `natIp6` set (the
 * host's IPv6 leaves its group): a public IPv6 address via that. At least one is set.
 */
export const PublicIpJob = v.pipe(
  v.strictObject({
    host: Rfc1123Label,
    specVersion,
    natIp: v.optional(Ipv4),
    natIp6: v.optional(Ipv6),
    attempt,
  }),
  v.forward(
    v.check(
      (job) => job.natIp !== undefined || job.natIp6 !== undefined,
      'natIp or natIp6 is required',
    ),
    ['natIp'],
  ),
)
/** `natIp` is absent when the host no longer has one (its access was lowered to None). */
export const PublicIpReleaseJob = v.strictObject({
  host: Rfc1123Label,
  specVersion,
  natIp: v.optional(Ipv4),
  natIp6: v.optional(Ipv6),
  /** The families whose public IP goes (default both): 6 alone when IPv6 no longer leaves. */
  families: v.optional(v.array(v.picklist([4, 6]))),
})
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
