/**
 * The gRPC ingress's messages and the operations' values: a spec arrives as JSON text
 * (`specJson`, checked as HTTP checks its body), objects leave as JSON text, public IPs as
 * their own message.
 */
import type { PublicIpStatus } from '../../lib/ipam/index.ts'
import type { ApplyResponse } from '../../proto/gen/hydrazine/v1/ApplyResponse.ts'
import type { PublicIp } from '../../proto/gen/hydrazine/v1/PublicIp.ts'
import { type Accepted, ValidationError } from '../../queues/producer.ts'

/** Same limit as the HTTP body. */
export const MAX_SPEC_BYTES = 64 * 1024

/** A spec's JSON text as an object, or a ValidationError as HTTP gives for its body. */
export function specObject(text: string): Record<string, unknown> {
  const refuse = (message: string): never => {
    throw new ValidationError([{ path: '(specJson)', message }])
  }
  if (Buffer.byteLength(text) > MAX_SPEC_BYTES) refuse(`must not exceed ${MAX_SPEC_BYTES} bytes`)
  let spec: unknown
  try {
    spec = JSON.parse(text)
  } catch {
    refuse('must be valid JSON')
  }
  if (typeof spec !== 'object' || spec === null || Array.isArray(spec)) {
    refuse('must be a JSON object')
  }
  return spec as Record<string, unknown>
}

/** An accepted write: the object, and the job that converges it when one was enqueued. */
export function applied(accepted: Accepted<unknown>): ApplyResponse {
  return {
    objectJson: JSON.stringify(accepted.object),
    ...(accepted.jobId === undefined ? {} : { jobId: accepted.jobId }),
  }
}

export function publicIp(status: PublicIpStatus): PublicIp {
  return {
    ip: status.ip,
    allocated: status.allocated,
    ...(status.allocatedTo === undefined ? {} : { allocatedTo: status.allocatedTo }),
  }
}
