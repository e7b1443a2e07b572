/**
 * How often the lab DPUs' ovn-controllers recomputed all their logical flows, read from
 * ovn-controller itself (`inc-engine/show-stats`, node `logical_flow_output`): a full
 * recompute costs a DPU in proportion to its groups' size, an incremental change only
 * what changed. Sampled every `intervalMs` so a restart (a new chassis certificate
 * restarts ovn-controller; its counters start again) loses nothing but the last interval
 * of the process it replaced.
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { OvsdbClient } from '../../lib/ovn/index.ts'

/** A DPU's ovn-controller, by the agent's run directory (its pid file and control socket). */
export interface OvnControllerPlace {
  readonly dpu: string
  readonly runDir: string
}

/** `logical_flow_output`'s recompute count in an `inc-engine/show-stats` answer. */
export function lflowRecomputesOf(stats: string): number | undefined {
  const found = /Node: logical_flow_output\s*\n\s*- recompute:\s*(\d+)/.exec(stats)
  return found ? Number(found[1]) : undefined
}

/** ovn-controller's pid and its recompute count now; undefined while it does not run. */
export async function sampleLflowRecomputes(
  place: OvnControllerPlace,
): Promise<{ pid: number; count: number } | undefined> {
  const pid = Number(
    (await readFile(join(place.runDir, 'ovn-controller.pid'), 'utf8').catch(() => '')).trim(),
  )
  if (!Number.isInteger(pid) || pid <= 0) return undefined
  let client: OvsdbClient | undefined
  try {
    // unixctl speaks JSON-RPC: the OVSDB client carries it.
    client = await OvsdbClient.connect(`unix:${join(place.runDir, `ovn-controller.${pid}.ctl`)}`, {
      reconnect: false,
      echoIntervalMs: 0,
      connectTimeoutMs: 1000,
      requestTimeoutMs: 5000,
    })
    const count = lflowRecomputesOf(String(await client.request('inc-engine/show-stats', [])))
    return count === undefined ? undefined : { pid, count }
  } catch {
    return undefined
  } finally {
    await client?.close()
  }
}

/** Counts the recomputes of every DPU's ovn-controller from `start` to `stop`. */
export class LflowRecomputes {
  readonly #places: readonly OvnControllerPlace[]
  readonly #intervalMs: number
  readonly #last = new Map<string, { pid: number; count: number }>()
  #total = 0
  #restarts = 0
  #timer: NodeJS.Timeout | undefined
  #sampling: Promise<void> = Promise.resolve()

  constructor(places: readonly OvnControllerPlace[], intervalMs = 2000) {
    this.#places = places
    this.#intervalMs = intervalMs
  }

  /** Takes every DPU's count as the starting point. */
  async start(): Promise<void> {
    for (const place of this.#places) {
      const now = await sampleLflowRecomputes(place)
      if (now) this.#last.set(place.dpu, now)
    }
    this.#timer = setInterval(() => {
      this.#sampling = this.#sampling.then(() => this.#sampleAll())
    }, this.#intervalMs)
    this.#timer.unref()
  }

  /** The recomputes of every DPU since `start`, and how many of them were restarts. */
  async stop(): Promise<{ recomputes: number; restarts: number }> {
    clearInterval(this.#timer)
    await this.#sampling
    await this.#sampleAll()
    return { recomputes: this.#total, restarts: this.#restarts }
  }

  async #sampleAll(): Promise<void> {
    for (const place of this.#places) {
      const now = await sampleLflowRecomputes(place)
      if (!now) continue
      const last = this.#last.get(place.dpu)
      // A new process counts from its start (its first compute is a recompute too).
      this.#total += last?.pid === now.pid ? now.count - last.count : now.count
      if (last && last.pid !== now.pid) this.#restarts++
      this.#last.set(place.dpu, now)
    }
  }
}
