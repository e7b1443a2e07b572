import { UnrecoverableError } from 'bullmq'
import * as v from 'valibot'
import { HydrazineError } from '../lib/errors.ts'
import { createAnnouncementBatcher, type FrrController } from '../lib/frr/index.ts'
import {
  AnnouncePayload,
  type FrrAck,
  type FrrJob,
  FrrJobName,
  publicPrefix,
  WithdrawPayload,
} from '../lib/jobs/frr.ts'

export interface FrrSyncDeps {
  /** Hydrazine's FRR instance. */
  readonly frr: FrrController
  /** Clock for `observedAt` (tests may fix it). */
  readonly now?: () => Date
}

/**
 * The FRR queue's handler: announces or withdraws `publicIp`'s prefix (`/32` for IPv4,
 * `/128` for IPv6: `publicPrefix`) and returns the ack once FRR's BGP table shows the
 * change. Concurrent jobs are applied together, one vtysh session per batch. Idempotent:
 * a change FRR already shows is acked without a command.
 *
 * A bad payload, an unknown job name or a prefix configured by an operator fails the
 * job at once (not retried); FRR being slow or unreachable fails it for a retry.
 */
export function createFrrSync({ frr, now = () => new Date() }: FrrSyncDeps) {
  const batcher = createAnnouncementBatcher(frr)

  return async function frrSync(job: FrrJob): Promise<FrrAck> {
    const payload = parsePayload(job)
    const prefix = publicPrefix(payload.publicIp)
    const wanted = job.name === FrrJobName.announce ? (payload.nextHop ?? null) : null
    const outcome = await batcher.submit(prefix, wanted)
    if (!outcome.ok) {
      const error = outcome.error
      if (error instanceof HydrazineError && !error.retryable) {
        throw new UnrecoverableError(`${error.code}: ${error.message}`)
      }
      throw error
    }
    return {
      publicIp: payload.publicIp,
      prefix,
      announced: outcome.nextHop !== null,
      nextHop: outcome.nextHop,
      owner: payload.owner,
      specVersion: payload.specVersion,
      observedAt: now().toISOString(),
    }
  }
}

function parsePayload(job: FrrJob) {
  const schema =
    job.name === FrrJobName.announce
      ? AnnouncePayload
      : job.name === FrrJobName.withdraw
        ? WithdrawPayload
        : undefined
  if (!schema) throw new UnrecoverableError(`unknown FRR job name '${job.name}'`)
  const result = v.safeParse(schema, job.data)
  if (!result.success) {
    const issues = result.issues.map((i) => `${v.getDotPath(i) ?? '(payload)'}: ${i.message}`)
    throw new UnrecoverableError(`invalid ${job.name} payload: ${issues.join('; ')}`)
  }
  return result.output
}
