/**
 * What a DPU agent may do in Redis: its own queue's keys and its own heartbeat, through
 * the commands a BullMQ worker needs — nothing of the controller's queues, the desired
 * state, other DPUs' queues, and no command that lists, dumps or reconfigures the server.
 * Redis 7 checks key permissions inside Lua scripts too, so EVAL stays confined.
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
    '+@all',
    '-@dangerous',
    '-@admin',
    // BullMQ reads the server version and names its connections.
    '+info',
    '+client|setname',
    '+client|getname',
    '+client|id',
    // Key names of others are none of its business, nor are other databases.
    '-scan',
    '-randomkey',
    '-select',
    // Nor are the server's scripts and functions, which every client shares.
    '-script|flush',
    '-script|kill',
    '-function',
  ]
}

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
   * Makes the existing users of these DPUs reach the keys this version names (their
   * passwords untouched): after an upgrade renamed a queue or key, their agents keep
   * working. Returns the DPUs whose user it updated.
   */
  refreshKeys(dpuIds: readonly string[]): Promise<string[]>
}
