/**
 * What the lab bench watches a host with: a ping to its gateway from inside its namespace
 * (`GatewayProbe`), the host list polled to learn a host is Ready (`pollReady`; its
 * moment is read from the host's events), and its clock and waits.
 */
import { type ChildProcess, spawn } from 'node:child_process'
import { readFileSync } from 'node:fs'
import type { Lab } from '../../infra/lab/lab.ts'

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms))
/** Wall-clock milliseconds with sub-millisecond precision (ping -D prints the same clock). */
export const now = () => performance.timeOrigin + performance.now()

/**
 * `ping -i 0.01` to `gateway` from inside a host's namespace, recording when each reply
 * arrived (wall clock, from `-D`). It is started once, paused (SIGSTOP), and resumed
 * (SIGCONT) for each measurement: starting a process from this one blocks its event loop
 * until the child has run `exec`, which took 0.1–1.3 s each on the 2-core machine with 20
 * DPUs busy, and stalled this process up to 6 s in a round (every moment it measures
 * late, its requests held back). Sending a signal costs nothing of the kind.
 */
export class GatewayProbe {
  readonly #replies: number[] = []
  readonly #child: ChildProcess
  readonly #exited: Promise<void>

  /** Starts the ping, paused. */
  constructor(netns: string, gateway: string) {
    this.#child = spawn(
      'ip',
      ['netns', 'exec', netns, 'ping', '-n', '-D', '-i', '0.01', '-W', '1', gateway],
      { stdio: ['ignore', 'pipe', 'ignore'] },
    )
    this.pause()
    this.#exited = new Promise((r) => this.#child.once('exit', () => r()))
    let buffered = ''
    this.#child.stdout?.on('data', (chunk: Buffer) => {
      buffered += chunk.toString()
      const lines = buffered.split('\n')
      buffered = lines.pop() ?? ''
      for (const line of lines) {
        const m = /^\[(\d+\.\d+)\] \d+ bytes from /.exec(line)
        if (m) this.#replies.push(Number(m[1]) * 1000)
      }
    })
  }

  /** Pings again from now on; returns the moment it was told to. */
  resume(): number {
    const at = now()
    this.#child.kill('SIGCONT')
    return at
  }

  /** Stops sending (and reading) until `resume`. */
  pause(): void {
    this.#child.kill('SIGSTOP')
  }

  /** The first reply at or after `since`, if any. */
  firstAfter(since: number): number | undefined {
    return this.#replies.find((t) => t >= since)
  }

  /** The last reply, if it came at or after `since`. */
  lastAfter(since: number): number | undefined {
    const last = this.#replies.at(-1)
    return last !== undefined && last >= since ? last : undefined
  }

  /** The probe's own state since `since`: replies, the last one, the ping process's state. */
  describe(since: number): string {
    const last = this.#replies.at(-1)
    let state = 'exited'
    try {
      if (this.#child.pid !== undefined && this.#child.exitCode === null)
        state = readFileSync(`/proc/${this.#child.pid}/stat`, 'utf8').split(') ')[1]?.[0] ?? '?'
    } catch {
      state = 'gone'
    }
    return (
      `${this.#replies.length} replies, ${this.#replies.filter((t) => t >= since).length} since resumed, ` +
      `last ${last === undefined ? 'never' : `${Math.round(now() - last)} ms ago`}, ping state ${state}`
    )
  }

  async stop(): Promise<void> {
    if (this.#child.exitCode === null && this.#child.signalCode === null) {
      this.#child.kill('SIGKILL')
    }
    await this.#exited
  }
}

interface HostItem {
  name?: string
  specVersion?: number
  status?: { phase?: string; observedVersion?: number; configsSynced?: boolean }
}

/**
 * Polls the host list every ~`intervalMs` and records, per host name, the start of the
 * first poll that saw it Ready with its configuration synced at its spec version.
 */
export function pollReady(
  lab: Lab,
  readyAt: Map<string, number>,
  intervalMs = 10,
): { stop(): Promise<void> } {
  let running = true
  const loop = (async () => {
    while (running) {
      const began = now()
      const answer = await lab.api('GET', '/v1/managed-resources?limit=1000').catch(() => undefined)
      const items = (answer?.body as { items?: HostItem[] } | undefined)?.items ?? []
      for (const h of items) {
        if (!h.name || readyAt.has(h.name)) continue
        if (
          h.status?.phase === 'Ready' &&
          h.status.configsSynced === true &&
          h.status.observedVersion === h.specVersion
        )
          readyAt.set(h.name, began)
      }
      await sleep(Math.max(0, intervalMs - (now() - began)))
    }
  })()
  return {
    async stop() {
      running = false
      await loop
    },
  }
}

/** Resolves once `check` holds (polled every 10 ms), or false after `timeoutMs`. */
export async function until(check: () => boolean, timeoutMs: number): Promise<boolean> {
  const deadline = now() + timeoutMs
  while (!check()) {
    if (now() > deadline) return false
    await sleep(10)
  }
  return true
}

/** Runs `task(i)` for i in 0..count-1, starting one every 1000/rate ms; awaits them all. */
export async function offered<T>(count: number, rate: number, task: (i: number) => Promise<T>) {
  const first = now()
  const running: Promise<T>[] = []
  for (let i = 0; i < count; i++) {
    const wait = first + (i * 1000) / rate - now()
    if (wait > 0) await sleep(wait)
    running.push(task(i))
  }
  return Promise.all(running)
}
