/**
 * Webhook deliveries already applied, remembered for a while so that a redelivery is
 * ignored (one key per delivery id, expiring on its own).
 */
import type { RedisClient } from '../redis/connection.ts'
import type { StoreKeys } from './store-keys.ts'

export class DeliveryRepository {
  readonly #redis: RedisClient
  readonly #keys: StoreKeys

  constructor(redis: RedisClient, keys: StoreKeys) {
    this.#redis = redis
    this.#keys = keys
  }

  /**
   * Remembers a webhook delivery id for `ttlS` seconds; false when it was already
   * remembered (a redelivery, to be ignored).
   */
  async remember(id: string, ttlS: number): Promise<boolean> {
    return (await this.#redis.set(this.#keys.delivery(id), '1', 'EX', ttlS, 'NX')) === 'OK'
  }

  /** Forgets a delivery id, so that a corrected or retried delivery is processed. */
  async forget(id: string): Promise<void> {
    await this.#redis.del(this.#keys.delivery(id))
  }
}
