/**
 * What a DPU agent may do in Redis (the agents' Redis): its own queue's keys and its own
 * heartbeat, through exactly the commands its BullMQ worker and its heartbeat send — an
 * allow-list (`DPU_REDIS_COMMANDS`), so that a command Redis adds, or one nobody thought
 * of (`CLIENT TRACKING`, `DEBUG`, `OBJECT`, `KEYS`, `CONFIG`, …), is refused. Redis 7 checks
 * commands and keys inside Lua scripts too, so EVAL stays confined to both.
 */
import { agentQueueName } from './index.ts'

/** The Redis user of a DPU's agent. */
export function dpuRedisUser(dpuId: string): string {
  return `dpu-${dpuId}`
}

/**
 * The ACL rules (`ACL SETUSER <user> …`) of a DPU's agent, with its password.
 *
 * @param queuePrefix the BullMQ key prefix of the agent queues (default `bull`)
 * @example await redis.call('ACL', 'SETUSER', dpuRedisUser(id), ...dpuRedisAclRules(id, pw))
 */
export function dpuRedisAclRules(dpuId: string, password: string, queuePrefix = 'bull'): string[] {
  return [
    'reset',
    'on',
    `>${password}`,
    ...dpuRedisKeyPatterns(dpuId, queuePrefix),
    'resetchannels',
    '-@all',
    ...DPU_REDIS_COMMANDS.map((command) => `+${command}`),
  ]
}

/**
 * Every command a DPU's agent may send, as ACL names (`client|setname` a subcommand):
 *
 * - its connection: ioredis's `AUTH` (always allowed), its ready check (`INFO`, which
 *   BullMQ reads the server version from too), naming the connection, `PING`, `QUIT`;
 *   on a Redis Cluster the slot map (`CLUSTER SLOTS`), `CLUSTER INFO` and `ASKING`;
 * - BullMQ's worker: its scripts (`EVALSHA`, then `EVAL` when the server lost them), its
 *   pipelines (`MULTI`/`EXEC`), the blocking wait for a job (`BZPOPMIN` on the queue's
 *   marker) and what the scripts it runs call (`moveToActive`, `moveToFinished`,
 *   `moveToDelayed`, `retryJob`, `extendLock(s)`, `moveStalledJobsToWait`,
 *   `moveJobFromActiveToWait`, `releaseLock`, `updateProgress`, `updateData`, `addLog`,
 *   `saveStacktrace`, `getRateLimitTtl`, `isMaxed`: `credentials.test.ts` reads them from
 *   BullMQ's Lua, so an upgrade that needs another command fails there) and the queue
 *   metadata it reads directly;
 * - its heartbeat: `SET … PX`, and `DEL` when it stops.
 */
export const DPU_REDIS_COMMANDS: readonly string[] = [
  // The connection.
  'info',
  'ping',
  'quit',
  'client|setname',
  'client|getname',
  'client|id',
  // A Redis Cluster's map, ready check and redirects (ioredis's `Cluster`).
  'cluster|slots',
  'cluster|info',
  'asking',
  // BullMQ's scripts, pipelines and blocking wait.
  'evalsha',
  'eval',
  'multi',
  'exec',
  'discard',
  'bzpopmin',
  // Strings (job locks, counters, the heartbeat).
  'get',
  'set',
  'del',
  'exists',
  'incr',
  'pexpire',
  'pttl',
  // Hashes (jobs, queue metadata).
  'hget',
  'hmget',
  'hgetall',
  'hset',
  'hmset',
  'hdel',
  'hexists',
  'hincrby',
  // Lists (wait, active, paused; job logs).
  'llen',
  'lrange',
  'lpush',
  'rpush',
  'lrem',
  'ltrim',
  'rpoplpush',
  // Sets (stalled jobs).
  'sadd',
  'srem',
  'scard',
  'smembers',
  // Sorted sets (delayed, completed, failed, prioritized, the marker).
  'zadd',
  'zrem',
  'zcard',
  'zscore',
  'zrange',
  'zrangebyscore',
  'zrevrange',
  'zrevrangebyscore',
  'zremrangebyrank',
  'zremrangebyscore',
  'zpopmin',
  // The queue's event stream.
  'xadd',
  'xtrim',
]

/** The keys a DPU's agent may touch, as ACL key patterns: its queue's and its heartbeat. */
export function dpuRedisKeyPatterns(dpuId: string, queuePrefix = 'bull'): string[] {
  return [`~${queuePrefix}:${agentQueueName(dpuId)}:*`, `~${heartbeatKeyOf(dpuId)}`]
}

/**
 * The Redis key of a DPU's heartbeat (`Heartbeats` reads and writes it). Every DPU's is in
 * the `{beats}` slot, so the controller reads them all with one MGET.
 */
export function heartbeatKeyOf(dpuId: string): string {
  return `hz:{beats}:dpu:${dpuId}:heartbeat`
}

/** What a DPU's agent is given to reach the controller: handed out once, never stored in clear. */
export interface DpuCredentials {
  readonly dpuId: string
  readonly redis: {
    readonly username: string
    readonly password: string
    /** False when Redis keeps no ACL file: the user is lost on its restart. */
    readonly persisted: boolean
  }
  /**
   * The DPU's identity (CN = its id), when a PKI runs: `cert` is a client certificate
   * (clientAuth only: Redis, the Southbound's RBAC, gRPC clients' checks) and `serverCert`
   * a server certificate (serverAuth only: its agent's gRPC and metrics), both for `key`.
   */
  readonly tls?: {
    readonly cert: string
    readonly key: string
    readonly ca: string
    readonly serverCert?: string
  }
}

/** Issues and revokes DPU credentials (the composition root builds the real one). */
export interface DpuCredentialIssuer {
  /** New credentials for the DPU; the old ones stop working. */
  issue(dpuId: string): Promise<DpuCredentials>
  /** The DPU's credentials stop working (it left the inventory). */
  revoke(dpuId: string): Promise<void>
  /**
   * Makes the existing users of these DPUs reach the keys, through the commands, this
   * version names (their passwords untouched): after an upgrade renamed a queue or key, or
   * changed the command list, their agents keep working with no more than it allows.
   * Returns the DPUs whose user it updated.
   */
  refreshKeys(dpuIds: readonly string[]): Promise<string[]>
}
