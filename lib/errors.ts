/**
 * Base class for every error Hydrazine throws on purpose.
 *
 * `code` is stable and machine-readable (API responses, job failure reasons, logs);
 * `retryable` says whether a queue should try the same work again later. Subclasses
 * add the context an operator needs to act: which object, which DPU, which pool.
 *
 * @example
 * class PoolExhausted extends HydrazineError {
 *   constructor(readonly pool: string) {
 *     super('POOL_EXHAUSTED', `pool ${pool} has no free address`, { retryable: false })
 *   }
 * }
 */
export class HydrazineError extends Error {
  readonly code: string
  readonly retryable: boolean

  constructor(
    code: string,
    message: string,
    options: { retryable?: boolean; cause?: unknown } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = new.target.name
    this.code = code
    this.retryable = options.retryable ?? false
  }
}

/** Something in configuration (env, file, flags) is missing or invalid. */
export class ConfigError extends HydrazineError {
  constructor(
    message: string,
    readonly issues: readonly { path: string; message: string }[] = [],
  ) {
    super('CONFIG_INVALID', message)
  }
}
