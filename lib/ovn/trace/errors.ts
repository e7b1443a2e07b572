import { HydrazineError } from '../../errors.ts'

/**
 * A trace cannot run now: `ovn-trace` did not run, failed, timed out or printed something
 * other than a trace, or the central does not answer. Retryable: a central that is
 * restarting answers again later.
 */
export class TraceUnavailable extends HydrazineError {
  constructor(
    message: string,
    options: { readonly output?: string; readonly cause?: unknown } = {},
  ) {
    super('TRACE_UNAVAILABLE', message, {
      retryable: true,
      ...(options.cause === undefined ? {} : { cause: options.cause }),
    })
    this.output = options.output ?? ''
  }

  /** What ovn-trace printed, if anything. */
  readonly output: string
}

/** The text is not `ovn-trace --detailed` output (ovn-trace printed an error instead). */
export class TraceOutputError extends HydrazineError {
  constructor(readonly output: string) {
    super(
      'TRACE_OUTPUT_INVALID',
      `not an ovn-trace detailed output: ${output.trim().split('\n')[0] ?? ''}`,
    )
  }
}
