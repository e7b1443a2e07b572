/**
 * `REDIS_URL`: one Redis (`redis://`, `rediss://` for TLS) or a Redis Cluster named by its
 * seed nodes (`redis+cluster://[user:password@]host:port,host:port`, `rediss+cluster://`).
 */
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
