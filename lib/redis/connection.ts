/**
 * How Hydrazine's Redis clients (ioredis, BullMQ connections) connect: from a URL that
 * may carry credentials (`redis://:PASSWORD@host:port/db`, `rediss://` for TLS) and, for a
 * server whose certificate a private CA signed, that CA's PEM file. A Redis Cluster is
 * named by its seed nodes: `redis+cluster://[user:password@]h1:p1,h2:p2` (`rediss+cluster://`
 * for TLS). Every client builds its options here, so TLS, credentials and the cluster are
 * applied the same way everywhere.
 */
import { readFileSync } from 'node:fs'
import { Cluster, Redis, type RedisOptions } from 'ioredis'
import { ConfigError } from '../errors.ts'

/** A client of one Redis or of a Redis Cluster: every command Hydrazine sends works on both. */
export type RedisClient = Redis | Cluster

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
  /**
   * The client's certificate and key (PEM files, `rediss://` only), for a Redis that
   * requires one (`tls-auth-clients yes`, as the agents' Redis does).
   */
  readonly certFile?: string
  readonly keyFile?: string
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
  if ((endpoint.certFile || endpoint.keyFile) && !tls) {
    throw new ConfigError('a Redis client certificate is given but the URL is not rediss:// (TLS)')
  }
  if (!endpoint.certFile !== !endpoint.keyFile) {
    throw new ConfigError('a Redis client certificate needs both its certificate and its key')
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
    ...(tls
      ? {
          tls: {
            ...(endpoint.caFile ? { ca: readPem(endpoint.caFile, 'CA') } : {}),
            ...(endpoint.certFile && endpoint.keyFile
              ? {
                  cert: readPem(endpoint.certFile, 'client certificate'),
                  key: readPem(endpoint.keyFile, 'client key'),
                }
              : {}),
          },
        }
      : {}),
    ...extra,
  }
}

/** What the `Cluster` constructor takes besides its seed nodes. */
export type ClusterClientOptions = NonNullable<ConstructorParameters<typeof Cluster>[1]>

/** A seed node of a Redis Cluster. */
export interface ClusterNode {
  readonly host: string
  readonly port: number
}

const CLUSTER_URL = /^(rediss?)\+cluster:\/\/(?:([^@/]*)@)?([^/?#@]+)\/?$/

/**
 * The seed nodes of a `redis+cluster://` or `rediss+cluster://` URL, or undefined for a
 * single Redis's URL. A cluster has one database: a path is refused.
 *
 * @example
 * clusterNodes('redis+cluster://:pw@10.0.0.1:7000,10.0.0.2:7000') // [{host:'10.0.0.1',port:7000},…]
 */
export function clusterNodes(url: string): ClusterNode[] | undefined {
  if (!/^rediss?\+cluster:/.test(url)) return undefined
  const match = CLUSTER_URL.exec(url)
  if (!match) {
    throw new ConfigError(
      `a Redis Cluster URL is redis+cluster://[user:password@]host:port,host:port (no database): ${redactRedisUrl(url)}`,
    )
  }
  return (match[3] ?? '').split(',').map((part) => {
    let node: URL
    try {
      node = new URL(`redis://${part}`)
    } catch {
      throw new ConfigError(`not a host:port in the Redis Cluster URL: ${redactRedisUrl(url)}`)
    }
    if (!node.hostname || node.pathname.length > 1) {
      throw new ConfigError(`not a host:port in the Redis Cluster URL: ${redactRedisUrl(url)}`)
    }
    return {
      host: node.hostname.replace(/^\[|\]$/g, ''),
      port: node.port ? Number(node.port) : 6379,
    }
  })
}

/** True when `url` names a Redis Cluster (`redis+cluster://…`). */
export function isClusterUrl(url: string): boolean {
  return /^rediss?\+cluster:/.test(url)
}

/**
 * The options of a Redis Cluster client for `endpoint`: each node is reached with the
 * URL's credentials and TLS (and `extra`, e.g. `maxRetriesPerRequest: null` for BullMQ).
 */
export function clusterOptions(
  endpoint: RedisEndpoint,
  extra: ClientOptions = {},
): ClusterClientOptions {
  const nodes = clusterNodes(endpoint.url)
  if (!nodes) throw new ConfigError(`not a Redis Cluster URL: ${redactRedisUrl(endpoint.url)}`)
  const first = nodes[0] as ClusterNode
  // The credentials and TLS of one node are those of all: reuse the single-node parser.
  const auth = /^rediss?\+cluster:\/\/([^@/]*@)?/.exec(endpoint.url)?.[1] ?? ''
  const scheme = endpoint.url.startsWith('rediss') ? 'rediss' : 'redis'
  const host = first.host.includes(':') ? `[${first.host}]` : first.host
  const node = redisOptions({ ...endpoint, url: `${scheme}://${auth}${host}:${first.port}` }, extra)
  const { host: _h, port: _p, db: _db, enableOfflineQueue, lazyConnect, ...perNode } = node
  return {
    redisOptions: perNode,
    ...(enableOfflineQueue !== undefined ? { enableOfflineQueue } : {}),
    ...(lazyConnect !== undefined ? { lazyConnect } : {}),
    // A node's certificate names the host it was given as, not the IP the cluster reports.
    ...(perNode.tls ? { dnsLookup: (address, done) => done(null, address) } : {}),
    slotsRefreshTimeout: 2000,
  }
}

/**
 * A new ioredis client for `endpoint` (see `redisOptions`): a `Cluster` when the URL names
 * a Redis Cluster, else a `Redis`.
 */
export function createRedis(endpoint: RedisEndpoint, extra: ClientOptions = {}): RedisClient {
  const nodes = clusterNodes(endpoint.url)
  if (nodes) return new Cluster(nodes, clusterOptions(endpoint, extra))
  return new Redis(redisOptions(endpoint, extra))
}

/** A new connection like `redis` (same nodes, credentials and options). */
export function duplicateClient(redis: RedisClient): RedisClient {
  return redis instanceof Cluster ? redis.duplicate() : redis.duplicate()
}

/** The URL with any password replaced by `***`: the form that may appear in logs and errors. */
export function redactRedisUrl(url: string): string {
  return url.replace(/^(rediss?(?:\+cluster)?:\/\/[^:@/]*:)[^@/]*@/, '$1***@')
}

function readPem(file: string, what: string): string {
  try {
    return readFileSync(file, 'utf8')
  } catch (error) {
    throw new ConfigError(`cannot read the Redis ${what} ${file}: ${(error as Error).message}`)
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
