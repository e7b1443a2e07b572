/**
 * How the gRPC ingress answers an error: each class of Hydrazine error (`api/errors.ts`)
 * as its gRPC status, with trailing metadata `hz-code` and, for invalid input,
 * `hz-issues` (`[{path, message}]` JSON); anything else is INTERNAL "internal error" and
 * logged. Trailers stay far below grpc-js's 8 KiB metadata limit whatever input they echo.
 */
import * as grpc from '@grpc/grpc-js'
import { type ClassifiedError, classifyError, type ErrorClass, type Issue } from '../errors.ts'

const STATUS_BY_CLASS: Readonly<Record<ErrorClass, grpc.status>> = {
  invalid: grpc.status.INVALID_ARGUMENT,
  forbidden: grpc.status.PERMISSION_DENIED,
  'not-found': grpc.status.NOT_FOUND,
  conflict: grpc.status.FAILED_PRECONDITION,
  quota: grpc.status.RESOURCE_EXHAUSTED,
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

function issuesTrailer(issues: readonly Issue[]): string {
  const clipped = issues.map((i) => ({ path: clip(i.path, 200), message: clip(i.message, 300) }))
  while (clipped.length > 1 && asciiJson(clipped).length > MAX_ISSUES_JSON) clipped.pop()
  return asciiJson(clipped)
}

function statusOf(known: ClassifiedError): Partial<grpc.StatusObject> {
  const metadata = new grpc.Metadata()
  metadata.set('hz-code', known.code)
  if (known.issues) metadata.set('hz-issues', issuesTrailer(known.issues))
  return {
    code: STATUS_BY_CLASS[known.errorClass],
    details: clip(known.message, MAX_DETAILS),
    metadata,
  }
}

/** A call without a valid bearer token. */
export const UNAUTHENTICATED: Partial<grpc.StatusObject> = {
  code: grpc.status.UNAUTHENTICATED,
  details: 'a valid bearer token is required in metadata "authorization"',
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
