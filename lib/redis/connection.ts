/**
 * How Hydrazine's Redis clients (ioredis, BullMQ connections) connect: from a URL that
 * may carry credentials (`redis://:PASSWORD@host:port/db`, `rediss://` for TLS) and, for a
 * server whose certificate a private CA signed, that CA's PEM file. Every client builds its
 * options here, so TLS and credentials are applied the same way everywhere.
 */
import { readFileSync } from 'node:fs'
import { Redis, type RedisOptions } from 'ioredis'
import { ConfigError } from '../errors.ts'

/** ioredis options as its constructor takes them (without RESP3 reply mapping). */
export type ClientOptions = Omit<RedisOptions, 'replyMapping'>

/** What a client needs to reach one Redis. */
export interface RedisEndpoint {
  /**
   * `redis://[[user]:password@]host:port[/db]` or `rediss://…` (TLS). The embedded stack
   * hands back `redis://:PASSWORD@127.0.0.1:PORT` on loopback, `rediss://…` elsewhere.
   */
  readonly url: string
  /** PEM file of the CA that signed the server's certificate (`rediss://` only). */
  readonly caFile?: string
}

/**
 * ioredis options for `endpoint`, merged with `extra`: usable as `new Redis(options)` and
 * as a BullMQ `connection`. A `rediss://` URL turns TLS on, trusting `caFile` (read now)
 * or else the system's CAs.
 *
 * @example
 * const worker = new Worker(name, handler, { connection: redisOptions(endpoint, { maxRetriesPerRequest: null }) })
 */
export function redisOptions(endpoint: RedisEndpoint, extra: ClientOptions = {}): ClientOptions {
  let url: URL
  try {
    url = new URL(endpoint.url)
  } catch {
    throw new ConfigError(`not a Redis URL: ${redactRedisUrl(endpoint.url)}`)
  }
  const tls = url.protocol === 'rediss:'
  if (!tls && url.protocol !== 'redis:') {
    throw new ConfigError(`not a redis:// or rediss:// URL: ${redactRedisUrl(endpoint.url)}`)
  }
  if (endpoint.caFile && !tls) {
    throw new ConfigError('a Redis CA is given but the URL is not rediss:// (TLS)')
  }
  const host = url.hostname.replace(/^\[|\]$/g, '')
  const db = url.pathname.length > 1 ? Number(url.pathname.slice(1)) : 0
  if (!Number.isInteger(db) || db < 0) {
    throw new ConfigError(
      `the Redis URL's database must be a number: ${redactRedisUrl(endpoint.url)}`,
    )
  }
  return {
    host,
    port: url.port ? Number(url.port) : 6379,
    ...(url.username ? { username: decodeURIComponent(url.username) } : {}),
    ...(url.password ? { password: decodeURIComponent(url.password) } : {}),
    db,
    ...(tls ? { tls: endpoint.caFile ? { ca: readCa(endpoint.caFile) } : {} } : {}),
    ...extra,
  }
}

/** A new ioredis client for `endpoint` (see `redisOptions`). */
export function createRedis(endpoint: RedisEndpoint, extra: ClientOptions = {}): Redis {
  return new Redis(redisOptions(endpoint, extra))
}

/** The URL with any password replaced by `***`: the form that may appear in logs and errors. */
export function redactRedisUrl(url: string): string {
  return url.replace(/^(rediss?:\/\/[^:@/]*:)[^@/]*@/, '$1***@')
}

function readCa(file: string): string {
  try {
    return readFileSync(file, 'utf8')
  } catch (error) {
    throw new ConfigError(`cannot read the Redis CA ${file}: ${(error as Error).message}`)
  }
}

/**
 * What a Redis error may carry of secrets, removed for a log: ioredis attaches the failed
 * command with its arguments (`AUTH default <password>`, `HELLO 3 AUTH …`, `ACL SETUSER …
 * ><password>`) to errors, and log serializers copy every property. Takes a serialized
 * error (a plain object, e.g. pino's) and returns a copy keeping only the command's name,
 * through its `cause` chain too.
 */
export function withoutCommandArgs(serialized: unknown): unknown {
  if (typeof serialized !== 'object' || serialized === null) return serialized
  const copy: Record<string, unknown> = { ...(serialized as Record<string, unknown>) }
  const command = copy.command as { name?: unknown } | undefined
  if (command && typeof command === 'object') {
    copy.command = { name: command.name, args: '[redacted]' }
  }
  if (copy.cause !== undefined) copy.cause = withoutCommandArgs(copy.cause)
  if (Array.isArray(copy.aggregateErrors)) {
    copy.aggregateErrors = copy.aggregateErrors.map(withoutCommandArgs)
  }
  return copy
}
