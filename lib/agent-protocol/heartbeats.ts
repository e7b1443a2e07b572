import type { Redis } from 'ioredis'
import * as v from 'valibot'
import { heartbeatKeyOf } from './credentials.ts'
import { Heartbeat } from './index.ts'

/** The Redis commands heartbeats need (a plain ioredis client has them all). */
export type HeartbeatRedis = Pick<Redis, 'get' | 'set' | 'del' | 'scan' | 'mget'>

/**
 * DPU heartbeats in Redis: each agent writes its own (`write`, with a time to live of
 * three intervals), the controller and the API read them. The key layout is this
 * module's alone.
 *
 * @example
 * const beats = new Heartbeats(redis)
 * const beat = await beats.read('dpu-1') // undefined once the agent went silent
 */
export class Heartbeats {
  readonly #redis: HeartbeatRedis

  constructor(redis: HeartbeatRedis) {
    this.#redis = redis
  }

  /** Writes a beat that expires after `ttlMs` unless the next one replaces it. */
  async write(beat: Heartbeat, ttlMs: number): Promise<void> {
    await this.#redis.set(heartbeatKeyOf(beat.dpuId), JSON.stringify(beat), 'PX', ttlMs)
  }

  /** The DPU's live beat; undefined when it expired or does not parse. */
  async read(dpuId: string): Promise<Heartbeat | undefined> {
    return parse(await this.#redis.get(heartbeatKeyOf(dpuId)))
  }

  /** Every live beat, sorted by DPU id. */
  async list(): Promise<Heartbeat[]> {
    const keys = new Set<string>()
    let cursor = '0'
    do {
      const [next, batch] = await this.#redis.scan(
        cursor,
        'MATCH',
        heartbeatKeyOf('*'),
        'COUNT',
        500,
      )
      for (const k of batch) keys.add(k)
      cursor = next
    } while (cursor !== '0')
    if (keys.size === 0) return []
    const values = await this.#redis.mget(...[...keys].sort())
    return values
      .map(parse)
      .filter((b): b is Heartbeat => b !== undefined)
      .sort((a, b) => (a.dpuId < b.dpuId ? -1 : a.dpuId > b.dpuId ? 1 : 0))
  }

  /** Removes the DPU's beat (its agent stops cleanly). */
  async remove(dpuId: string): Promise<void> {
    await this.#redis.del(heartbeatKeyOf(dpuId))
  }
}

function parse(raw: string | null): Heartbeat | undefined {
  if (raw === null) return undefined
  let json: unknown
  try {
    json = JSON.parse(raw)
  } catch {
    return undefined
  }
  const beat = v.safeParse(Heartbeat, json)
  return beat.success ? beat.output : undefined
}
