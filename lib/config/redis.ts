/**
 * `REDIS_URL` and `AGENTS_REDIS_URL`: one Redis (`redis://`, `rediss://` for TLS) or a Redis
 * Cluster named by its seed nodes (`redis+cluster://[user:password@]host:port,host:port`,
 * `rediss+cluster://`).
 */
import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import * as v from 'valibot'
import { clusterNodes, isClusterUrl } from '../redis/connection.ts'

export const RedisUrlVariable = v.optional(
  v.pipe(
    v.string(),
    v.regex(
      /^rediss?(\+cluster)?:\/\/\S+$/,
      'must be a redis:// or rediss:// URL, or redis+cluster://host:port,host:port',
    ),
    v.check(
      (url) => !isClusterUrl(url) || namesNodes(url),
      'a Redis Cluster URL is redis+cluster://[user:password@]host:port,host:port (no database)',
    ),
  ),
)

/** True when a cluster URL names its nodes well (the error itself could quote the URL). */
function namesNodes(url: string): boolean {
  try {
    clusterNodes(url)
    return true
  } catch {
    return false
  }
}

/** A bound in MB on what one party holds in the agents' Redis: 0 = off, default 64. */
const MegabytesBound = v.optional(
  v.pipe(
    v.string(),
    v.regex(/^\d+$/, 'must be a number of megabytes (0 = off)'),
    v.transform(Number),
    v.maxValue(1_048_576, 'must be at most 1048576 (1 TB)'),
  ),
  '64',
)

/**
 * `AGENTS_REDIS_URL` (absent: an embedded one) and, for a `rediss://` one, `AGENTS_REDIS_CA`
 * and the controller's client certificate `AGENTS_REDIS_CERT` / `AGENTS_REDIS_KEY`: the Redis
 * of the DPU agents' queues and heartbeats, apart from the store (`REDIS_URL`).
 */
export const AgentsRedisVariables = {
  AGENTS_REDIS_URL: RedisUrlVariable,
  AGENTS_REDIS_CA: v.optional(v.pipe(v.string(), v.minLength(1))),
  AGENTS_REDIS_CERT: v.optional(v.pipe(v.string(), v.minLength(1))),
  AGENTS_REDIS_KEY: v.optional(v.pipe(v.string(), v.minLength(1))),
  /**
   * The most one DPU may hold in the agents' Redis (its queue's keys and heartbeat), in MB;
   * over it, `dpu.health` revokes its credentials. 0 = not measured.
   */
  HYDRAZINE_DPU_REDIS_MAX_MB: MegabytesBound,
  /**
   * The most one queue producer may hold in the agents' Redis (its queue's keys), in MB;
   * over it, `dpu.health` revokes its Redis user. 0 = not measured.
   */
  HYDRAZINE_PRODUCER_REDIS_MAX_MB: MegabytesBound,
}

/** The agents' Redis as the configuration holds it (`Config.agentsRedis`). */
export interface AgentsRedisConfig {
  readonly url: string
  readonly caFile?: string
  readonly certFile?: string
  readonly keyFile?: string
}

type Checked =
  | { readonly ok: true; readonly agentsRedis?: AgentsRedisConfig }
  | { readonly ok: false; readonly path: string; readonly message: string }

/**
 * Checks the agents' Redis variables together: the CA and client certificate only with a
 * `rediss://` URL, certificate and key both or neither, every file a readable PEM of its
 * kind and the key the certificate's.
 */
export function agentsRedisConfig(c: {
  AGENTS_REDIS_URL?: string | undefined
  AGENTS_REDIS_CA?: string | undefined
  AGENTS_REDIS_CERT?: string | undefined
  AGENTS_REDIS_KEY?: string | undefined
}): Checked {
  const url = c.AGENTS_REDIS_URL
  const tls = url?.startsWith('rediss') ?? false
  for (const name of ['AGENTS_REDIS_CA', 'AGENTS_REDIS_CERT', 'AGENTS_REDIS_KEY'] as const) {
    if (c[name] !== undefined && !tls) {
      return { ok: false, path: name, message: 'needs a rediss:// (TLS) AGENTS_REDIS_URL' }
    }
  }
  if ((c.AGENTS_REDIS_CERT === undefined) !== (c.AGENTS_REDIS_KEY === undefined)) {
    const missing = c.AGENTS_REDIS_CERT === undefined ? 'AGENTS_REDIS_CERT' : 'AGENTS_REDIS_KEY'
    return {
      ok: false,
      path: missing,
      message: 'required when the other of AGENTS_REDIS_CERT / AGENTS_REDIS_KEY is set',
    }
  }
  const pems: [keyof typeof c, string, (pem: string) => unknown][] = [
    ['AGENTS_REDIS_CA', 'a PEM certificate', (pem) => new X509Certificate(pem)],
    ['AGENTS_REDIS_CERT', 'a PEM certificate', (pem) => new X509Certificate(pem)],
    ['AGENTS_REDIS_KEY', 'a PEM key', (pem) => createPrivateKey(pem)],
  ]
  const parsed = new Map<string, unknown>()
  for (const [name, what, parse] of pems) {
    const path = c[name]
    if (path === undefined) continue
    let pem: string
    try {
      pem = readFileSync(path, 'utf8')
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'error'
      return { ok: false, path: name, message: `cannot read ${path}: ${code}` }
    }
    try {
      parsed.set(name, parse(pem))
    } catch {
      return { ok: false, path: name, message: `${path} is not ${what}` }
    }
  }
  const cert = parsed.get('AGENTS_REDIS_CERT') as X509Certificate | undefined
  const key = parsed.get('AGENTS_REDIS_KEY') as KeyObject | undefined
  if (cert && key && !cert.checkPrivateKey(key)) {
    return {
      ok: false,
      path: 'AGENTS_REDIS_KEY',
      message: `${c.AGENTS_REDIS_KEY} is not the key of ${c.AGENTS_REDIS_CERT}`,
    }
  }
  if (url === undefined) return { ok: true }
  const file = (path: string | undefined) => (path === undefined ? undefined : resolve(path))
  const caFile = file(c.AGENTS_REDIS_CA)
  const certFile = file(c.AGENTS_REDIS_CERT)
  const keyFile = file(c.AGENTS_REDIS_KEY)
  return {
    ok: true,
    agentsRedis: {
      url,
      ...(caFile ? { caFile } : {}),
      ...(certFile ? { certFile } : {}),
      ...(keyFile ? { keyFile } : {}),
    },
  }
}
