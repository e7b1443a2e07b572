/**
 * What the controller's DPU health monitor (`functions/dpu-health.ts`) remembers between
 * runs, per DPU: the state it last reported (so that each change is one event), and the
 * stray ports it saw — ports the DPU's heartbeat shows bound to a logical port nothing
 * wants there — with the repairs it sent for each. One hash, next to the store's keys.
 */

import type { DpuState } from '../agent-protocol/heartbeats.ts'
import type { RedisClient } from '../redis/connection.ts'

/** A port a DPU holds bound that nothing wants there, as the monitor tracks it. */
export interface Stray {
  /** When the monitor first saw it (its clock): it must persist before it is repaired. */
  readonly since: string
  /** How many `isolate` jobs were sent for it. */
  readonly repairs: number
  /** The last one: its job id on the DPU's queue, and when it was sent. */
  readonly lastJobId?: string
  readonly lastSentAt?: string
}

export interface DpuHealthRecord {
  /** The state last reported for the DPU (absent: none yet). */
  readonly state?: DpuState
  /** Stray ports by logical port. */
  readonly strays: Readonly<Record<string, Stray>>
  /**
   * Set when the DPU's credentials were revoked for holding more than its bound in the
   * agents' Redis: when, and how many bytes it held. Cleared when they are issued again.
   */
  readonly revoked?: { readonly at: string; readonly bytes: number }
}

const EMPTY: DpuHealthRecord = { strays: {} }

/**
 * @example
 * const records = new DpuHealthRecords(redis)
 * const all = await records.readAll() // Map: DPU id → record
 * await records.write('dpu-1', { state: 'Lost', strays: {} })
 */
export class DpuHealthRecords {
  readonly #redis: Pick<RedisClient, 'hgetall' | 'hget' | 'hset' | 'hdel'>
  readonly #key: string

  /** @param prefix the store's key prefix (default `hz:{store}:`). */
  constructor(
    redis: Pick<RedisClient, 'hgetall' | 'hget' | 'hset' | 'hdel'>,
    prefix = 'hz:{store}:',
  ) {
    this.#redis = redis
    this.#key = `${prefix}dpu-health`
  }

  /** Every DPU's record. */
  async readAll(): Promise<Map<string, DpuHealthRecord>> {
    const records = new Map<string, DpuHealthRecord>()
    for (const [id, raw] of Object.entries(await this.#redis.hgetall(this.#key))) {
      try {
        const parsed = JSON.parse(raw) as Partial<DpuHealthRecord>
        records.set(id, {
          ...(parsed.state ? { state: parsed.state } : {}),
          strays: parsed.strays ?? {},
          ...(parsed.revoked ? { revoked: parsed.revoked } : {}),
        })
      } catch {
        records.set(id, EMPTY)
      }
    }
    return records
  }

  async write(dpuId: string, record: DpuHealthRecord): Promise<void> {
    await this.#redis.hset(this.#key, dpuId, JSON.stringify(record))
  }

  /** Forgets that a DPU's credentials were revoked (new ones were issued). */
  async clearRevoked(dpuId: string): Promise<void> {
    const raw = await this.#redis.hget(this.#key, dpuId)
    if (!raw) return
    try {
      const { revoked: _gone, ...rest } = JSON.parse(raw) as DpuHealthRecord
      if (_gone) await this.#redis.hset(this.#key, dpuId, JSON.stringify(rest))
    } catch {
      // An unreadable record reads as empty already.
    }
  }

  /** Forgets a DPU (it left the inventory and its agent is gone). */
  async remove(dpuId: string): Promise<void> {
    await this.#redis.hdel(this.#key, dpuId)
  }
}
