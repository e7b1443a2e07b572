import { HydrazineError } from '../errors.ts'

/** A binary Hydrazine needs is not installed. */
export class MissingBinaryError extends HydrazineError {
  constructor(
    readonly binary: string,
    readonly debianPackage: string | undefined,
  ) {
    super(
      'MISSING_BINARY',
      debianPackage === undefined
        ? `${binary} is not installed`
        : `${binary} is not installed: apt-get install ${debianPackage}`,
    )
  }
}

/** A daemon exited, or never answered, while it was being started. */
export class DaemonStartError extends HydrazineError {
  constructor(
    readonly daemon: string,
    reason: string,
    readonly logTail: string,
    /** True when the log says its listening address was already taken. */
    readonly addressInUse: boolean,
  ) {
    super(
      'DAEMON_START_FAILED',
      `${daemon} failed to start: ${reason}${logTail ? `\n--- last log lines ---\n${logTail}` : ''}`,
      { retryable: addressInUse },
    )
  }
}
