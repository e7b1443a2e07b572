/**
 * Issuing DPU credentials: a Redis user confined by ACL to the DPU's own queue and
 * heartbeat (`dpuRedisAclRules`), with a fresh random password each time, and — when a
 * PKI is given — a client certificate whose CN is the DPU id.
 */
import { randomBytes } from 'node:crypto'
import type { Redis } from 'ioredis'
import {
  type DpuCredentialIssuer,
  type DpuCredentials,
  dpuRedisAclRules,
  dpuRedisUser,
} from '../lib/agent-protocol/credentials.ts'

export interface CredentialIssuerOptions {
  /** An admin connection to the Redis the agents use. */
  readonly redis: Redis
  /** BullMQ key prefix of the agent queues (default `bull`). */
  readonly queuePrefix?: string
  /** Issues the DPU's certificate, when Hydrazine runs a PKI. */
  readonly certificates?: (dpuId: string) => Promise<NonNullable<DpuCredentials['tls']>>
}

export function createCredentialIssuer(options: CredentialIssuerOptions): DpuCredentialIssuer {
  const { redis } = options
  /** Writes the ACL file, so users survive a Redis restart; false when Redis keeps none. */
  const save = async () =>
    redis.call('ACL', 'SAVE').then(
      () => true,
      () => false,
    )
  return {
    async issue(dpuId) {
      const password = randomBytes(32).toString('hex')
      const username = dpuRedisUser(dpuId)
      await redis.call(
        'ACL',
        'SETUSER',
        username,
        ...dpuRedisAclRules(dpuId, password, options.queuePrefix),
      )
      // Connections already open with the old password keep working until they close;
      // the agent that held it is the one being replaced, so close them now.
      await redis.call('CLIENT', 'KILL', 'USER', username).catch(() => {})
      const persisted = await save()
      const tls = options.certificates ? await options.certificates(dpuId) : undefined
      return { dpuId, redis: { username, password, persisted }, ...(tls ? { tls } : {}) }
    },
    async revoke(dpuId) {
      await redis.call('ACL', 'DELUSER', dpuRedisUser(dpuId))
      await redis.call('CLIENT', 'KILL', 'USER', dpuRedisUser(dpuId)).catch(() => {})
      await save()
    },
  }
}
