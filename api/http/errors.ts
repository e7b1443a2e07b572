/**
 * One place that turns errors into HTTP answers: `{error: {code, message, issues?}}`.
 * Hydrazine errors map by their stable `code`; anything unexpected is a 500 whose
 * message says nothing about internals.
 */
import type { Context } from 'hono'
import { HTTPException } from 'hono/http-exception'
import type { ContentfulStatusCode } from 'hono/utils/http-status'
import { HydrazineError } from '../../lib/errors.ts'

export interface ErrorBody {
  readonly error: {
    readonly code: string
    readonly message: string
    readonly issues?: readonly { path: string; message: string }[]
  }
}

/** An HTTP-level refusal (auth, media type, size) carrying a Hydrazine-style code. */
export class ApiError extends HydrazineError {
  constructor(
    readonly status: ContentfulStatusCode,
    code: string,
    message: string,
    readonly issues?: readonly { path: string; message: string }[],
  ) {
    super(code, message)
  }
}

const STATUS_BY_CODE: Readonly<Record<string, ContentfulStatusCode>> = {
  INVALID: 400,
  IPAM_INVALID: 400,
  NOT_IN_SUBNET: 400,
  NOT_FOUND: 404,
  CONFLICT: 409,
  ADDRESS_IN_USE: 409,
  OVERLAP: 409,
  POOL_EXHAUSTED: 409,
}

function issuesOf(error: HydrazineError): readonly { path: string; message: string }[] | undefined {
  const issues: unknown = (error as { issues?: unknown }).issues
  if (!Array.isArray(issues) || issues.length === 0) return undefined
  return issues as { path: string; message: string }[]
}

/** Hono `onError` handler. `log` sees only what became a 500. */
export function errorHandler(log: (error: unknown) => void = () => {}) {
  return function handleError(error: Error, c: Context) {
    if (error instanceof ApiError) {
      return c.json(body(error.code, error.message, error.issues), error.status)
    }
    if (error instanceof HydrazineError) {
      const status = STATUS_BY_CODE[error.code]
      if (status) return c.json(body(error.code, error.message, issuesOf(error)), status)
    }
    if (error instanceof HTTPException && error.status < 500) {
      return c.json(body(`HTTP_${error.status}`, error.message), error.status)
    }
    log(error)
    return c.json(body('INTERNAL', 'internal error'), 500)
  }
}

function body(
  code: string,
  message: string,
  issues?: readonly { path: string; message: string }[],
): ErrorBody {
  return { error: { code, message, ...(issues ? { issues } : {}) } }
}
