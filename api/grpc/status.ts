/**
 * How the gRPC ingress answers an error: each class of Hydrazine error (`api/errors.ts`)
 * as its gRPC status, with the rich error model in trailer `grpc-status-details-bin`: a
 * `google.rpc.Status` whose details are a `google.rpc.ErrorInfo` (reason: Hydrazine's
 * code, domain `hydrazine.dev`) and, for invalid input, a `google.rpc.BadRequest` with a
 * field violation per bad field. The same code and issues also go in trailers `hz-code`
 * and `hz-issues` (`[{path, message}]` JSON) for clients that do not decode details.
 * Anything unexpected is INTERNAL "internal error", without details, and logged.
 * Trailers stay far below grpc-js's 8 KiB metadata limit whatever input they echo.
 */
import * as grpc from '@grpc/grpc-js'
import type { BadRequest__Output } from '../../proto/gen/google/rpc/BadRequest.ts'
import type { ErrorInfo__Output } from '../../proto/gen/google/rpc/ErrorInfo.ts'
import { protoRoot } from '../../proto/load.ts'
import { type ClassifiedError, classifyError, type ErrorClass, type Issue } from '../errors.ts'

/** `ErrorInfo.domain` of every error Hydrazine answers. */
export const ERROR_DOMAIN = 'hydrazine.dev'
/** The trailer gRPC's rich error model travels in. */
export const STATUS_DETAILS_KEY = 'grpc-status-details-bin'

const STATUS_BY_CLASS: Readonly<Record<ErrorClass, grpc.status>> = {
  invalid: grpc.status.INVALID_ARGUMENT,
  forbidden: grpc.status.PERMISSION_DENIED,
  'not-found': grpc.status.NOT_FOUND,
  conflict: grpc.status.FAILED_PRECONDITION,
  quota: grpc.status.RESOURCE_EXHAUSTED,
  capacity: grpc.status.RESOURCE_EXHAUSTED,
  expired: grpc.status.OUT_OF_RANGE,
  unavailable: grpc.status.UNAVAILABLE,
}

const ERROR_INFO_URL = 'type.googleapis.com/google.rpc.ErrorInfo'
const BAD_REQUEST_URL = 'type.googleapis.com/google.rpc.BadRequest'

let rpcTypes: ReturnType<typeof loadRpcTypes> | undefined
function loadRpcTypes() {
  const root = protoRoot('google/rpc/status.proto', 'google/rpc/error_details.proto')
  return {
    Status: root.lookupType('google.rpc.Status'),
    ErrorInfo: root.lookupType('google.rpc.ErrorInfo'),
    BadRequest: root.lookupType('google.rpc.BadRequest'),
  }
}
const types = () => {
  rpcTypes ??= loadRpcTypes()
  return rpcTypes
}

/** Keeps trailers far below grpc-js's 8 KiB metadata limit whatever the input echoed. */
const MAX_DETAILS = 2048
const MAX_ISSUES_JSON = 4096

const clip = (s: string, max: number) => (s.length > max ? `${s.slice(0, max - 1)}…` : s)
/** Metadata values must be printable ASCII; JSON stays valid with \u escapes. */
const asciiJson = (value: unknown) =>
  JSON.stringify(value).replace(
    /[^\x20-\x7e]/g,
    (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`,
  )

/** The issues, clipped and as few as fit the trailer budget (at least one). */
function clippedIssues(issues: readonly Issue[]): Issue[] {
  const clipped = issues.map((i) => ({ path: clip(i.path, 200), message: clip(i.message, 300) }))
  while (clipped.length > 1 && asciiJson(clipped).length > MAX_ISSUES_JSON) clipped.pop()
  return clipped
}

/** `google.rpc.Status` bytes: the code, message, ErrorInfo and (with issues) BadRequest. */
function statusDetails(code: grpc.status, message: string, reason: string, issues?: Issue[]) {
  const { Status, ErrorInfo, BadRequest } = types()
  const details = [
    {
      type_url: ERROR_INFO_URL,
      value: ErrorInfo.encode(ErrorInfo.fromObject({ reason, domain: ERROR_DOMAIN })).finish(),
    },
  ]
  if (issues) {
    const field_violations = issues.map((i) => ({ field: i.path, description: i.message }))
    details.push({
      type_url: BAD_REQUEST_URL,
      value: BadRequest.encode(BadRequest.fromObject({ field_violations })).finish(),
    })
  }
  return Buffer.from(Status.encode(Status.fromObject({ code, message, details })).finish())
}

/**
 * A status with Hydrazine's rich details: `reason` is its code (ErrorInfo, `hz-code`),
 * `issues` the bad fields (BadRequest, `hz-issues`).
 */
export function richStatus(
  code: grpc.status,
  message: string,
  reason: string,
  issues?: readonly Issue[],
): Partial<grpc.StatusObject> {
  const details = clip(message, MAX_DETAILS)
  const clipped = issues && issues.length > 0 ? clippedIssues(issues) : undefined
  const metadata = new grpc.Metadata()
  metadata.set('hz-code', reason)
  if (clipped) metadata.set('hz-issues', asciiJson(clipped))
  metadata.set(STATUS_DETAILS_KEY, statusDetails(code, details, reason, clipped))
  return { code, details, metadata }
}

function statusOf(known: ClassifiedError): Partial<grpc.StatusObject> {
  return richStatus(STATUS_BY_CLASS[known.errorClass], known.message, known.code, known.issues)
}

/** A call without a valid bearer token. */
export function unauthenticated(): Partial<grpc.StatusObject> {
  return richStatus(
    grpc.status.UNAUTHENTICATED,
    'a valid bearer token is required in metadata "authorization"',
    'UNAUTHENTICATED',
  )
}

/** The status a failed call ends with; `logError` sees every error that became INTERNAL. */
export function errorStatus(
  error: unknown,
  logError: (error: unknown) => void,
): Partial<grpc.StatusObject> {
  const known = classifyError(error)
  if (known) return statusOf(known)
  logError(error)
  return { code: grpc.status.INTERNAL, details: 'internal error' }
}

/** The rich details of a status a client received: its ErrorInfo and BadRequest, if any. */
export interface StatusDetails {
  readonly errorInfo?: ErrorInfo__Output
  readonly badRequest?: BadRequest__Output
}

/** Decodes trailer `grpc-status-details-bin` of a failed call (what a client does). */
export function statusDetailsOf(metadata: grpc.Metadata | undefined): StatusDetails {
  const [bytes] = metadata?.get(STATUS_DETAILS_KEY) ?? []
  if (!Buffer.isBuffer(bytes)) return {}
  const { Status, ErrorInfo, BadRequest } = types()
  const options = { longs: String, enums: String, defaults: true }
  const status = Status.toObject(Status.decode(bytes), options) as {
    details: { type_url: string; value: Uint8Array }[]
  }
  let found: { errorInfo?: ErrorInfo__Output; badRequest?: BadRequest__Output } = {}
  for (const any of status.details) {
    if (any.type_url === ERROR_INFO_URL) {
      const info = ErrorInfo.toObject(ErrorInfo.decode(any.value), options)
      found = { ...found, errorInfo: info as ErrorInfo__Output }
    } else if (any.type_url === BAD_REQUEST_URL) {
      const bad = BadRequest.toObject(BadRequest.decode(any.value), options) as {
        field_violations: { field: string; description: string }[]
      }
      found = { ...found, badRequest: { fieldViolations: bad.field_violations } }
    }
  }
  return found
}
