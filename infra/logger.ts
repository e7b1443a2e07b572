/**
 * Hydrazine's process logger (pino, JSON lines). Errors are serialized without what they
 * may carry of secrets: a Redis command's arguments (passwords) never reach a log line.
 */
import { type Logger, pino } from 'pino'
import type { LogLevel } from '../lib/config/index.ts'
import { withoutCommandArgs } from '../lib/redis/connection.ts'

export function createLogger(level: LogLevel, destination?: NodeJS.WritableStream): Logger {
  const err = (error: unknown) =>
    error instanceof Error ? withoutCommandArgs(pino.stdSerializers.err(error)) : error
  const options = { level, base: { service: 'hydrazine' }, serializers: { err, error: err } }
  return destination
    ? pino(options, destination as unknown as pino.DestinationStream)
    : pino(options)
}
