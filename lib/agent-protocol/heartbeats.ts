import * as v from 'valibot'
import type { RedisClient } from '../redis/connection.ts'
import { LuaScript } from '../redis/lua-script.ts'
import { scanKeys } from '../redis/slots.ts'
import { heartbeatKeyOf } from './credentials.ts'
import { Heartbeat } from './index.ts'

const recordBeatsScript = new LuaScript(new URL('./lua/record-beats.lua', import.meta.url))
const readBeatsScript = new LuaScript(new URL('./lua/read-beats.lua', import.meta.url))
const recordedBeatsScript = new LuaScript(new URL('./lua/recorded-beats.lua', import.meta.url))

/**
 * The controller's record of every DPU's newest beat (a hash: DPU id → beat JSON). Only
 * the controller writes it: an agent's Redis user may write its own heartbeat key alone.
 */
const LAST_BEATS_KEY = 'hz:{beats}:last-beat'

/** How long an agent's beat lives in Redis, in its own intervals (`write`'s usual TTL). */
export const HEARTBEAT_TTL_INTERVALS = 3

/**
 * The most bytes of a beat the controller reads: a real one is about 1 KB, plus ~150 bytes
 * per bound port. A longer one is not read at all (its size is asked first), so an agent
 * that writes 200 MB under its own key costs the controller nothing but that DPU's beat.
 */
export const MAX_HEARTBEAT_BYTES = 64 * 1024

/**
 * How far ahead of the controller's clock a beat's `at` may be: a beat stamped later is
 * refused (it would keep its DPU Online after it went silent). DPU clocks are synchronised
 * (NTP) to well under this.
 */
export const MAX_CLOCK_SKEW_MS = 5_000

/**
 * How the controller sees a DPU from the age of its newest beat, in the beat's own
 * `intervalMs`:
 *
 * - `Online`: younger than 1.5 intervals (the next beat may be half an interval late);
 * - `Stale`: younger than 2 intervals (one beat missed);
 * - `Lost`: 2 intervals or older (its agent is silent: dead, or cut off from Redis).
 *
 * With the controller's health run every `p` ms, a dead agent shows `Lost` at most
 * 2 intervals + `p` after its last beat: within 3 intervals while `p` stays under one.
 * Ages are read from the beat's `at` against the controller's clock, so DPU clocks must
 * be synchronised (NTP) to well under an interval.
 */
export type DpuState = 'Online' | 'Stale' | 'Lost'
export const STALE_AFTER_INTERVALS = 1.5
export const LOST_AFTER_INTERVALS = 2

/**
 * The state a beat puts its DPU in at `now` (see `DpuState`). A beat whose `at` does not
 * parse counts as Lost.
 *
 * @example dpuStateOf({ at: '2024-01-01T00:00:00.000Z', intervalMs: 1000 }, new Date('2024-01-01T00:00:01.600Z')) // 'Stale'
 */
export function dpuStateOf(
  beat: Pick<Heartbeat, 'at' | 'intervalMs'>,
  now: Date = new Date(),
): DpuState {
  const at = Date.parse(beat.at)
  if (Number.isNaN(at)) return 'Lost'
  const intervals = (now.getTime() - at) / Math.max(1, beat.intervalMs)
  if (intervals < STALE_AFTER_INTERVALS) return 'Online'
  if (intervals < LOST_AFTER_INTERVALS) return 'Stale'
  return 'Lost'
}

/**
 * DPU heartbeats in Redis: each agent writes its own (`write`, with a time to live of
 * `HEARTBEAT_TTL_INTERVALS` intervals), the controller and the API read them (`list`),
 * and the controller keeps the newest beat of every DPU it ever saw, so that a DPU whose
 * agent went silent is still listed, with when it was last heard of. The key layout is
 * this module's alone.
 *
 * @example
 * const beats = new Heartbeats(redis)
 * const beat = await beats.read('dpu-1') // undefined once the agent went silent
 * const seen = await beats.list() // every DPU ever seen, silent ones included
 */
export class Heartbeats {
  readonly #redis: RedisClient
  readonly #now: () => number

  /** @param now the controller's clock (tests), which a beat's `at` must not be ahead of */
  constructor(redis: RedisClient, now: () => number = Date.now) {
    this.#redis = redis
    this.#now = now
  }

  /** Writes a beat that expires after `ttlMs` unless the next one replaces it. */
  async write(beat: Heartbeat, ttlMs: number): Promise<void> {
    await this.#redis.set(heartbeatKeyOf(beat.dpuId), JSON.stringify(beat), 'PX', ttlMs)
  }

  /**
   * The DPU's live beat; undefined when it expired, is longer than `MAX_HEARTBEAT_BYTES`,
   * does not parse or is stamped in the future.
   */
  async read(dpuId: string): Promise<Heartbeat | undefined> {
    const [raw] = await this.#readBounded([heartbeatKeyOf(dpuId)])
    return this.#ownBeat(dpuId, raw)
  }

  /** Every live beat, sorted by DPU id. */
  async live(): Promise<Heartbeat[]> {
    const keys = (await scanKeys(this.#redis, heartbeatKeyOf('*'))).sort()
    if (keys.length === 0) return []
    const values = await this.#readBounded(keys)
    return byId(
      values
        .map((raw, i) => this.#ownBeat(dpuOfKey(keys[i] ?? ''), raw))
        .filter((b): b is Heartbeat => b !== undefined),
    )
  }

  /**
   * The newest beat of every DPU the controller has seen, sorted by DPU id: the live
   * ones, which it records as it reads them, and the recorded last beat of those whose
   * beat expired (their agent died or stopped). For the controller only: it writes.
   */
  async list(): Promise<Heartbeat[]> {
    const live = await this.live()
    if (live.length > 0) {
      await recordBeatsScript.run(
        this.#redis,
        [LAST_BEATS_KEY],
        live.flatMap((b) => [b.dpuId, b.at, JSON.stringify(b)]),
      )
    }
    const newest = new Map<string, Heartbeat>()
    for (const [dpuId, raw] of await this.#recorded([])) {
      const beat = this.#ownBeat(dpuId, raw)
      if (beat) newest.set(beat.dpuId, beat)
    }
    for (const beat of live) {
      const recorded = newest.get(beat.dpuId)
      if (!recorded || recorded.at < beat.at) newest.set(beat.dpuId, beat)
    }
    return byId([...newest.values()])
  }

  /**
   * The newest beat of one DPU: its live beat, which it records as `list` does, or the
   * controller's record of its last one (its beat expired). A few commands, whatever the
   * number of DPUs. For the controller only: it writes.
   */
  async newest(dpuId: string): Promise<Heartbeat | undefined> {
    const [live, recorded] = await Promise.all([
      this.read(dpuId),
      this.#recorded([dpuId]).then(([entry]) => this.#ownBeat(dpuId, entry?.[1])),
    ])
    if (!live) return recorded
    if (recorded && recorded.at >= live.at) return recorded
    await recordBeatsScript.run(
      this.#redis,
      [LAST_BEATS_KEY],
      [live.dpuId, live.at, JSON.stringify(live)],
    )
    return live
  }

  /** Removes the DPU's beat (its agent stops cleanly); the controller's record stays. */
  async remove(dpuId: string): Promise<void> {
    await this.#redis.del(heartbeatKeyOf(dpuId))
  }

  /** Forgets a DPU for good: its live beat and the controller's record (it left the inventory). */
  async forget(dpuId: string): Promise<void> {
    await this.#redis.multi().del(heartbeatKeyOf(dpuId)).hdel(LAST_BEATS_KEY, dpuId).exec()
  }

  /** The values of these heartbeat keys, each null unless a string of at most the bound. */
  async #readBounded(keys: readonly string[]): Promise<(string | null)[]> {
    // One slot (`{beats}`): one script, on a cluster too.
    const values = await readBeatsScript.run(this.#redis, keys, [MAX_HEARTBEAT_BYTES])
    return (values as (string | null)[]).map((v) => (typeof v === 'string' ? v : null))
  }

  /** The recorded last beats of these DPUs (none: all), each within the bound. */
  async #recorded(dpuIds: readonly string[]): Promise<[string, string][]> {
    const flat = (await recordedBeatsScript.run(
      this.#redis,
      [LAST_BEATS_KEY],
      [MAX_HEARTBEAT_BYTES, ...dpuIds],
    )) as string[]
    const entries: [string, string][] = []
    for (let i = 0; i + 1 < flat.length; i += 2) entries.push([flat[i] ?? '', flat[i + 1] ?? ''])
    return entries
  }

  /**
   * The beat stored for `dpuId`, if it is that DPU's and not stamped in the future: an
   * agent may write its own key only, but what it writes there is its own to choose, so a
   * beat naming another DPU is ignored rather than taken (or recorded) as that DPU's.
   */
  #ownBeat(dpuId: string, raw: string | null | undefined): Heartbeat | undefined {
    const beat = parse(raw)
    if (beat?.dpuId !== dpuId) return undefined
    return Date.parse(beat.at) <= this.#now() + MAX_CLOCK_SKEW_MS ? beat : undefined
  }
}

function byId(beats: Heartbeat[]): Heartbeat[] {
  return beats.sort((a, b) => (a.dpuId < b.dpuId ? -1 : a.dpuId > b.dpuId ? 1 : 0))
}

/** The DPU whose heartbeat key `key` is (`heartbeatKeyOf`). */
function dpuOfKey(key: string): string {
  const [before = '', after = ''] = heartbeatKeyOf('\n').split('\n')
  return key.slice(before.length, key.length - after.length)
}

function parse(raw: string | null | undefined): Heartbeat | undefined {
  if (raw === null || raw === undefined) return undefined
  let json: unknown
  try {
    json = JSON.parse(raw)
  } catch {
    return undefined
  }
  const beat = v.safeParse(Heartbeat, json)
  return beat.success ? beat.output : undefined
}
