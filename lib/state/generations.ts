/**
 * The generation of the newest webhook event applied per object. Carbide numbers each
 * object's events; one older than what was applied (a retried `applied` arriving after
 * the `deleted` that followed it) is stale and must not recreate or change anything.
 */
import type { RedisClient } from '../redis/connection.ts'
import { LuaScript } from '../redis/lua-script.ts'

const recordScript = new LuaScript(new URL('./lua/generation.lua', import.meta.url))

/** How long an object's last generation is kept after its last event: 30 days. */
export const GENERATION_KEPT_MS = 30 * 24 * 3600 * 1000

/** The kinds of object webhook events are about. */
export type EventObjectKind = 'resource-group' | 'managed-resource' | 'dpu'

export class EventGenerations {
  readonly #redis: RedisClient
  readonly #prefix: string

  constructor(redis: RedisClient, prefix: string) {
    this.#redis = redis
    this.#prefix = prefix
  }

  #key(kind: EventObjectKind, name: string): string {
    return `${this.#prefix}generation:${kind}:${name}`
  }

  /** The newest generation applied for the object (0: none yet). */
  async last(kind: EventObjectKind, name: string): Promise<number> {
    return Number((await this.#redis.get(this.#key(kind, name))) ?? '0')
  }

  /** Records that an event of `generation` was applied (never lowers what is recorded). */
  async record(kind: EventObjectKind, name: string, generation: number): Promise<void> {
    await recordScript.run(this.#redis, [this.#key(kind, name)], [generation, GENERATION_KEPT_MS])
  }
}
