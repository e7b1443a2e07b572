import { HydrazineError } from '../errors.ts'

/**
 * The CA under a directory cannot be used: a file is missing, unreadable or not what it
 * should be (e.g. `ca.key` does not belong to `ca.crt`). Not retryable: a person must
 * look at the directory.
 */
export class PkiError extends HydrazineError {
  constructor(
    readonly dir: string,
    message: string,
    cause?: unknown,
  ) {
    super('PKI_INVALID', `${dir}: ${message}`, { cause })
  }
}

/** A certificate request names something a certificate cannot carry (a bad IP, no name). */
export class CertificateRequestError extends HydrazineError {
  constructor(message: string) {
    super('PKI_BAD_REQUEST', message)
  }
}
