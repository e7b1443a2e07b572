/**
 * One place that turns errors into HTTP answers: `{error: {code, message, issues?}}`.
 * Hydrazine errors map by their stable `code` (classes shared with gRPC in `api/errors.ts`); anything unexpected is a 500 whose
 * message says nothing about internals.
 */
import type { Context } from 'hono'
import { HTTPException } from 'hono/http-exception'
import type { ContentfulStatusCode } from 'hono/utils/http-status'
import { HydrazineError } from '../../lib/errors.ts'
import { classifyError, type ErrorClass } from '../errors.ts'

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

const STATUS_BY_CLASS: Readonly<Record<ErrorClass, ContentfulStatusCode>> = {
  invalid: 400,
  forbidden: 403,
  'not-found': 404,
  conflict: 409,
  // Not 429: waiting does not help; it takes a deletion or a higher quota.
  quota: 403,
  // The site is full, not the tenant: it may succeed later, once a group is gone.
  capacity: 503,
  // Kubernetes' answer to a watch from a resource version no longer kept.
  expired: 410,
  unavailable: 503,
}

/** Hono `onError` handler. `log` sees only what became a 500. */
export function errorHandler(log: (error: unknown) => void = () => {}) {
  return function handleError(error: Error, c: Context) {
    if (error instanceof ApiError) {
      return c.json(body(error.code, error.message, error.issues), error.status)
    }
    const known = classifyError(error)
    if (known) {
      return c.json(
        body(known.code, known.message, known.issues),
        STATUS_BY_CLASS[known.errorClass],
      )
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
