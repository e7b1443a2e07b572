import { HydrazineError } from '../errors.ts'

/**
 * Errors of the OVSDB client. Every RFC 7047 transaction error is its own class, so a
 * caller can `instanceof` what it knows how to handle (e.g. retry on `OvsdbTimedOut`
 * after a failed `wait`) and report the rest with the failing operation named.
 */

/** The byte stream from the server is not JSON-RPC; the connection is dropped. */
export class JsonStreamError extends HydrazineError {
  constructor(message: string) {
    super('OVSDB_PROTOCOL', message, { retryable: true })
  }
}

/** The connection is down, was lost with the request in flight, or never came up. */
export class OvsdbConnectionError extends HydrazineError {
  constructor(
    readonly remote: string,
    message: string,
    cause?: unknown,
  ) {
    super('OVSDB_CONNECTION', `${remote}: ${message}`, { retryable: true, cause })
  }
}

/** A request got no answer in time. Whether it was applied is unknown. */
export class OvsdbRequestTimeout extends HydrazineError {
  constructor(
    readonly method: string,
    readonly timeoutMs: number,
  ) {
    super('OVSDB_REQUEST_TIMEOUT', `${method}: no reply within ${timeoutMs} ms`, {
      retryable: true,
    })
  }
}

/** The server rejected a whole request (e.g. `unknown database`, bad `monitor`). */
export class OvsdbRpcError extends HydrazineError {
  constructor(
    readonly method: string,
    readonly error: unknown,
  ) {
    super('OVSDB_RPC', `${method} failed: ${JSON.stringify(error)}`)
  }
}

/** The request was cancelled by the caller (RFC 7047 `cancel`). */
export class OvsdbCanceled extends HydrazineError {
  constructor(readonly method: string) {
    super('OVSDB_CANCELED', `${method} canceled`)
  }
}

/**
 * One operation of a `transact` failed and the whole transaction was rolled back.
 * `index` is the position of the failing operation in the request; `op` its name
 * (`insert`, `wait`, …), or `commit` when the database refused the commit itself
 * (constraint and referential integrity checks run at commit).
 */
export class OvsdbTransactError extends HydrazineError {
  constructor(
    code: string,
    readonly error: string,
    readonly index: number,
    readonly op: string,
    readonly details: string | undefined,
    options: { retryable?: boolean } = {},
  ) {
    super(
      code,
      `transact op #${index} (${op}) failed: ${error}${details ? `: ${details}` : ''}`,
      options,
    )
  }
}

/** RFC 7047 §4.1.3: a `referential integrity violation` at commit. */
export class OvsdbReferentialIntegrityViolation extends OvsdbTransactError {}
/** A column or index constraint failed (e.g. duplicate name in an indexed column). */
export class OvsdbConstraintViolation extends OvsdbTransactError {}
/** The operation's `timeout` expired (a `wait` that did not hold). Retry after a re-read. */
export class OvsdbTimedOut extends OvsdbTransactError {}
export class OvsdbResourcesExhausted extends OvsdbTransactError {}
export class OvsdbIoError extends OvsdbTransactError {}
export class OvsdbDuplicateUuidName extends OvsdbTransactError {}
export class OvsdbDomainError extends OvsdbTransactError {}
export class OvsdbRangeError extends OvsdbTransactError {}
export class OvsdbNotSupported extends OvsdbTransactError {}
export class OvsdbAborted extends OvsdbTransactError {}
export class OvsdbNotOwner extends OvsdbTransactError {}
/** Any other per-operation error (`syntax error`, `unknown column`, …). */
export class OvsdbOperationError extends OvsdbTransactError {}

type TransactErrorClass = new (
  code: string,
  error: string,
  index: number,
  op: string,
  details: string | undefined,
  options?: { retryable?: boolean },
) => OvsdbTransactError

const byRfcError: Record<string, [TransactErrorClass, string, boolean]> = {
  'referential integrity violation': [
    OvsdbReferentialIntegrityViolation,
    'OVSDB_REFERENTIAL_INTEGRITY',
    false,
  ],
  'constraint violation': [OvsdbConstraintViolation, 'OVSDB_CONSTRAINT_VIOLATION', false],
  'timed out': [OvsdbTimedOut, 'OVSDB_TIMED_OUT', true],
  'resources exhausted': [OvsdbResourcesExhausted, 'OVSDB_RESOURCES_EXHAUSTED', true],
  'I/O error': [OvsdbIoError, 'OVSDB_IO_ERROR', true],
  'duplicate uuid-name': [OvsdbDuplicateUuidName, 'OVSDB_DUPLICATE_UUID_NAME', false],
  'domain error': [OvsdbDomainError, 'OVSDB_DOMAIN_ERROR', false],
  'range error': [OvsdbRangeError, 'OVSDB_RANGE_ERROR', false],
  'not supported': [OvsdbNotSupported, 'OVSDB_NOT_SUPPORTED', false],
  aborted: [OvsdbAborted, 'OVSDB_ABORTED', false],
  'not owner': [OvsdbNotOwner, 'OVSDB_NOT_OWNER', false],
}

/** Builds the typed error for one failed operation result. */
export function transactError(
  error: string,
  details: string | undefined,
  index: number,
  op: string,
): OvsdbTransactError {
  const known = byRfcError[error]
  if (known) {
    const [Cls, code, retryable] = known
    return new Cls(code, error, index, op, details, { retryable })
  }
  return new OvsdbOperationError('OVSDB_OPERATION_ERROR', error, index, op, details)
}

/**
 * TLS codes that say a certificate was refused: by this side (the server's does not verify
 * against the CA given) or by the server (its alert, e.g. `ERR_SSL_TLSV1_ALERT_UNKNOWN_CA`).
 */
const CERTIFICATE_REFUSED = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'CERT_SIGNATURE_FAILURE',
  'CERT_UNTRUSTED',
  'CERT_REJECTED',
  'CERT_HAS_EXPIRED',
  'CERT_NOT_YET_VALID',
  'ERR_TLS_CERT_ALTNAME_INVALID',
])

/**
 * The TLS code when `error` (or what caused it) says one side refused the other's
 * certificate; undefined for anything else (refused connections, timeouts, lost peers):
 * credentials that will not do, as opposed to a server that may come back. Pure.
 *
 * @example certificateRefused(new OvsdbConnectionError('ssl:…', 'could not connect', tlsError)) // 'UNABLE_TO_VERIFY_LEAF_SIGNATURE'
 */
export function certificateRefused(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 8; depth++) {
    const code = (e as { code?: unknown }).code
    if (
      typeof code === 'string' &&
      (CERTIFICATE_REFUSED.has(code) || /^ERR_SSL_.*ALERT/.test(code))
    )
      return code
    e = e.cause
  }
  return undefined
}
