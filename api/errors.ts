/**
 * How Hydrazine's error codes read at the API edge, shared by HTTP and gRPC so that a
 * request refused on one is refused the same way on the other. Each ingress maps the
 * class to its own status (HTTP 400/403/404/409, gRPC INVALID_ARGUMENT/…); anything
 * without a class here is unexpected and answered without details. A full quota is its
 * own class: HTTP says 403 (the tenant may not have more), gRPC RESOURCE_EXHAUSTED; a full
 * site (every central the operator allows running) another: HTTP 503, gRPC
 * RESOURCE_EXHAUSTED; so is
 * a watch's resource version the change log no longer keeps (gRPC OUT_OF_RANGE), and so
 * is a part of the system that cannot answer now (HTTP 503, gRPC UNAVAILABLE).
 */
import { HydrazineError } from '../lib/errors.ts'

export type ErrorClass =
  | 'invalid'
  | 'forbidden'
  | 'not-found'
  | 'conflict'
  | 'quota'
  | 'capacity'
  | 'expired'
  | 'unavailable'

export const ERROR_CLASS_BY_CODE: Readonly<Record<string, ErrorClass>> = {
  INVALID: 'invalid',
  IPAM_INVALID: 'invalid',
  NOT_IN_SUBNET: 'invalid',
  FORBIDDEN: 'forbidden',
  NAME_TAKEN: 'conflict',
  CREDENTIALS_UNAVAILABLE: 'conflict',
  NOT_FOUND: 'not-found',
  CONFLICT: 'conflict',
  ADDRESS_IN_USE: 'conflict',
  OVERLAP: 'conflict',
  POOL_EXHAUSTED: 'conflict',
  QUOTA_EXCEEDED: 'quota',
  CENTRALS_EXHAUSTED: 'capacity',
  RESOURCE_VERSION_TOO_OLD: 'expired',
  TRACE_UNKNOWN_HOST: 'not-found',
  TRACE_UNKNOWN_ADDRESS: 'not-found',
  TRACE_NOT_ATTACHED: 'conflict',
  // Something the answer needs cannot answer now (a group's central for ovn-trace), or
  // this instance was built without it (dry runs): try again later, or elsewhere.
  TRACE_UNAVAILABLE: 'unavailable',
  DRY_RUN_UNAVAILABLE: 'unavailable',
}

export interface Issue {
  readonly path: string
  readonly message: string
}

/** A refusal a caller may see: its class, stable code, message and bad fields. */
export interface ClassifiedError {
  readonly errorClass: ErrorClass
  readonly code: string
  readonly message: string
  readonly issues?: readonly Issue[]
}

/** The issues a Hydrazine error carries (ValidationError, IPAM errors), if any. */
export function issuesOf(error: HydrazineError): readonly Issue[] | undefined {
  const issues: unknown = (error as { issues?: unknown }).issues
  if (!Array.isArray(issues) || issues.length === 0) return undefined
  return issues as Issue[]
}

/** Classifies an error; undefined when it is not one a caller should see. */
export function classifyError(error: unknown): ClassifiedError | undefined {
  if (!(error instanceof HydrazineError)) return undefined
  const errorClass = ERROR_CLASS_BY_CODE[error.code]
  if (!errorClass) return undefined
  const issues = issuesOf(error)
  return { errorClass, code: error.code, message: error.message, ...(issues ? { issues } : {}) }
}
