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
  /** What to do about it, when the log tail says (one line), e.g. a permission problem. */
  readonly hint: string | undefined

  constructor(
    readonly daemon: string,
    reason: string,
    readonly logTail: string,
    /** True when the log says its listening address was already taken. */
    readonly addressInUse: boolean,
  ) {
    const hint = hintFor(logTail)
    super(
      'DAEMON_START_FAILED',
      `${daemon} failed to start: ${reason}${hint ? `; ${hint}` : ''}${
        logTail ? `\n--- last log lines ---\n${logTail}` : ''
      }`,
      { retryable: addressInUse },
    )
    this.hint = hint
  }
}

/** One line saying what to do about a failure the log tail explains, if it does. */
function hintFor(logTail: string): string | undefined {
  const line = logTail.split('\n').find((l) => /Permission denied|EACCES/.test(l))
  if (line === undefined) return undefined
  const path = /(?:^|\s)(\/[^\s:()'"]+)/.exec(line)?.[1]
  return (
    `it cannot reach ${path ?? 'its files'} (permission denied): the user it runs as cannot ` +
    'traverse a directory on the way; run Hydrazine as root, or point HYDRAZINE_DATA_DIR at a ' +
    'directory that user can reach'
  )
}
