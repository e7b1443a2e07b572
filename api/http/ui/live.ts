/**
 * Live updates for the admin UI: `GET /ui/events`, server-sent events of the objects the
 * signed-in principal may see, so that a page shows status changes without a reload.
 *
 * ONE subscription to the change log (`client.watchChanges`) per UI, opened when the
 * first browser listens and closed when the last leaves, is fanned out in process to
 * every open stream. Each stream reads a changed object through its principal's own
 * operations and tells a removal only as the gRPC Watch does (`api/change-visibility.ts`):
 * a tenant hears of its own objects only. A stream first sends the current state of the
 * objects its page shows (`?watch=host/h1&watch=group/g`, at most `MAX_WATCHED`), then
 * every change; a comment every `heartbeatMs` keeps proxies from closing it. Streams are
 * capped per session and in all (429), and one too far behind is ended (the browser's
 * EventSource reconnects and starts afresh).
 *
 * A DPU's state follows its heartbeats, which are not changes: an operator's stream reads
 * the inventory once every `dpuRefreshMs` and sends the DPUs it shows whose state changed,
 * so one going Stale or Lost shows too.
 *
 * Each event is `event: change` with `{kind: 'group'|'host'|'dpu', name, phase?, gone?}`.
 */
import type { Context } from 'hono'
import { streamSSE } from 'hono/streaming'
import type { Change, Subscription } from '../../../lib/state/changes.ts'
import type { HydrazineClient } from '../../../queues/producer.ts'
import { NotFoundError } from '../../../queues/producer.ts'
import { readVisible, removalVisibleTo } from '../../change-visibility.ts'
import type { Operations } from '../../operations.ts'
import { groupPhase, hostPhase } from './phase.ts'
import type { Session } from './session.ts'

/** One update as the browser receives it. */
export interface LiveEvent {
  readonly kind: 'group' | 'host' | 'dpu'
  readonly name: string
  readonly phase?: string
  readonly gone?: true
}

export interface LiveLimits {
  /** Streams one session may have open (tabs), default 6. */
  readonly perSession: number
  /** Streams open in all, default 256. */
  readonly total: number
  /** A keep-alive comment this often, default 15 s. */
  readonly heartbeatMs: number
  /** Changes a stream may have waiting before it is ended, default 1,000. */
  readonly backlog: number
  /**
   * A DPU's state (Online, Stale, Lost) follows its agent's heartbeats, which the change
   * log does not carry: the DPUs a page shows are read again this often, default 10 s.
   */
  readonly dpuRefreshMs: number
}

export const DEFAULT_LIVE_LIMITS: LiveLimits = {
  perSession: 6,
  total: 256,
  heartbeatMs: 15_000,
  backlog: 1000,
  dpuRefreshMs: 10_000,
}

/** Most DPUs one refresh reads (one page of the inventory). */
const DPU_REFRESH_LIMIT = 1000

/** Most objects a page may ask the current state of when its stream opens. */
export const MAX_WATCHED = 200

const KIND = { group: 'rg', host: 'mr', dpu: 'dpu' } as const
const SHOWN = { rg: 'group', mr: 'host', dpu: 'dpu' } as const

/** A `?watch=` value: a group or host by its RFC 1123 name, a DPU by its id. */
const WATCHED =
  /^(?:(?:group|host)\/[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?|dpu\/[A-Za-z0-9][A-Za-z0-9._-]{0,62})$/

/**
 * The objects a `?watch=` list names (at most MAX_WATCHED): what is not an object's key is
 * left out, never the whole stream (a browser does not reconnect after a refusal).
 */
export function watchedOf(values: readonly string[]): string[] {
  return [...new Set(values)].filter((key) => WATCHED.test(key)).slice(0, MAX_WATCHED)
}

/**
 * The one shared subscription to the change log, fanned out to this UI's streams.
 *
 * @example
 * const live = new LiveChanges(client)
 * const stop = await live.listen((change) => …)
 */
export class LiveChanges {
  readonly #client: Pick<HydrazineClient, 'watchChanges'>
  readonly #listeners = new Set<(change: Change) => void>()
  #subscription: Promise<Subscription> | undefined
  /** Streams open now, all sessions together. */
  open = 0
  /** Streams open now per session id (this process's only: each replica bounds its own). */
  readonly perSession = new Map<string, number>()

  constructor(client: Pick<HydrazineClient, 'watchChanges'>) {
    this.#client = client
  }

  /** Hears every change from now on; resolves to what stops it. */
  async listen(listener: (change: Change) => void): Promise<() => void> {
    this.#listeners.add(listener)
    if (!this.#subscription) {
      const opened = this.#client.watchChanges((change) => {
        for (const l of [...this.#listeners]) l(change)
      })
      this.#subscription = opened
      opened.catch(() => {
        if (this.#subscription === opened) this.#subscription = undefined
      })
    }
    try {
      await this.#subscription
    } catch (error) {
      this.#listeners.delete(listener)
      throw error
    }
    return () => this.#leave(listener)
  }

  #leave(listener: (change: Change) => void): void {
    this.#listeners.delete(listener)
    if (this.#listeners.size > 0) return
    const subscription = this.#subscription
    this.#subscription = undefined
    void subscription?.then((s) => s.stop()).catch(() => {})
  }

  /** Stops the shared subscription (the UI is closing). */
  close(): void {
    this.#listeners.clear()
    this.#leave(() => {})
  }
}

/** The update one change makes for this caller, or undefined when it may not hear of it. */
async function eventOf(
  ops: Operations,
  tenant: string | undefined,
  kind: Change['kind'],
  name: string,
  removed?: Change['removed'],
): Promise<LiveEvent | undefined> {
  if (kind === 'dpu') {
    try {
      return { kind: 'dpu', name, phase: (await ops.getDpu(name)).state }
    } catch (error) {
      if (error instanceof NotFoundError) return undefined
      throw error
    }
  }
  const found = await readVisible(ops, kind, name)
  if (found?.kind === 'rg') return { kind: 'group', name, phase: groupPhase(found.object) }
  if (found?.kind === 'mr') return { kind: 'host', name, phase: hostPhase(found.object) }
  return removalVisibleTo(removed, tenant) ? { kind: SHOWN[kind], name, gone: true } : undefined
}

/**
 * Answers `GET /ui/events` for a signed-in session: the stream, or 429 when its session
 * or the UI has as many streams open as allowed.
 */
export function liveEvents(
  c: Context,
  deps: {
    readonly live: LiveChanges
    readonly session: Session
    readonly ops: Operations
    readonly limits: LiveLimits
    readonly watched: readonly string[]
    /** Ends the stream when aborted (the server is closing). */
    readonly closing?: AbortSignal
    readonly logError?: (error: unknown) => void
  },
): Response {
  const { live, session, ops, limits } = deps
  if ((live.perSession.get(session.id) ?? 0) >= limits.perSession || live.open >= limits.total) {
    return c.text('too many live streams open; close a tab', 429)
  }
  const tenant = session.principal.kind === 'tenant' ? session.principal.tenant : undefined
  live.perSession.set(session.id, (live.perSession.get(session.id) ?? 0) + 1)
  live.open++
  return streamSSE(c, async function liveStream(stream) {
    let waiting = 0
    let queue: Promise<void> = Promise.resolve()
    let ended = false
    let stop: (() => void) | undefined
    let heartbeat: ReturnType<typeof setInterval> | undefined
    let dpuRefresh: ReturnType<typeof setInterval> | undefined
    let done: () => void = () => {}
    const closed = new Promise<void>((resolve) => {
      done = resolve
    })
    const end = () => {
      if (ended) return
      ended = true
      const left = (live.perSession.get(session.id) ?? 1) - 1
      if (left > 0) live.perSession.set(session.id, left)
      else live.perSession.delete(session.id)
      live.open--
      stop?.()
      if (heartbeat) clearInterval(heartbeat)
      if (dpuRefresh) clearInterval(dpuRefresh)
      deps.closing?.removeEventListener('abort', end)
      done()
    }
    stream.onAbort(end)
    deps.closing?.addEventListener('abort', end, { once: true })

    const send = (kind: Change['kind'], name: string, removed?: Change['removed']) => {
      if (ended) return
      if (++waiting > limits.backlog) {
        end()
        return
      }
      queue = queue
        .then(async () => {
          if (ended) return
          const event = await eventOf(ops, tenant, kind, name, removed)
          if (event && !ended)
            await stream.writeSSE({ event: 'change', data: JSON.stringify(event) })
        })
        .catch((error: unknown) => deps.logError?.(error))
        .finally(() => {
          waiting--
        })
    }

    try {
      stop = await live.listen((change) => send(change.kind, change.name, change.removed))
    } catch (error) {
      deps.logError?.(error)
      end()
      return
    }
    if (ended) {
      stop()
      return
    }
    // Subscribed first, then read: a change made meanwhile is sent again, never lost.
    for (const key of deps.watched) {
      const [shown = '', name = ''] = key.split('/')
      const kind = KIND[shown as keyof typeof KIND]
      if (kind) send(kind, name)
    }
    // DPU pages are an operator's: a tenant's stream refreshes none.
    const dpus = new Set(
      tenant === undefined
        ? deps.watched.filter((key) => key.startsWith('dpu/')).map((key) => key.slice(4))
        : [],
    )
    if (dpus.size > 0) {
      const shown = new Map<string, string>()
      const refresh = async () => {
        // One read of the inventory and its heartbeats for all the page's DPUs; only a
        // state that changed is sent.
        const { items } = await ops.listDpus({ limit: DPU_REFRESH_LIMIT })
        for (const dpu of items) {
          if (!dpus.has(dpu.id) || shown.get(dpu.id) === dpu.state) continue
          shown.set(dpu.id, dpu.state)
          if (!ended) {
            const event: LiveEvent = { kind: 'dpu', name: dpu.id, phase: dpu.state }
            await stream.writeSSE({ event: 'change', data: JSON.stringify(event) })
          }
        }
      }
      dpuRefresh = setInterval(() => {
        // Only while the stream keeps up: a refresh never adds to a backlog.
        if (waiting === 0) {
          waiting++
          queue = queue
            .then(refresh)
            .catch((error: unknown) => deps.logError?.(error))
            .finally(() => {
              waiting--
            })
        }
      }, limits.dpuRefreshMs)
    }
    heartbeat = setInterval(() => {
      if (!ended) void stream.write(': keep-alive\n\n').catch(end)
    }, limits.heartbeatMs)
    await closed
  })
}
