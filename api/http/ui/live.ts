/**
 * Live updates for the admin UI: `GET /ui/events`, server-sent events of the objects the
 * signed-in principal may see, so that a page shows status changes without a reload.
 *
 * ONE subscription to the change log (`client.watchChanges`) per UI, opened when the
 * first browser listens and closed when the last leaves (or the UI closes), is fanned out
 * in process to every open stream. A changed object is read once per principal (all
 * operators are one; each tenant is one), through that principal's own operations, and
 * the update shared by all its streams; a removal is told only as the gRPC Watch tells it
 * (`api/change-visibility.ts`): a tenant hears of its own objects only. A stream first
 * sends the current state of the objects its page shows (`?watch=host/h1&watch=group/g`,
 * at most `MAX_WATCHED`), then every change; a comment every `heartbeatMs` keeps proxies
 * from closing it. Streams are capped per session, per principal (an operator, or one
 * tenant however many sessions it opens) and in all (429), the operator's by its own cap
 * only: one tenant's streams never keep another principal's out. One too far behind is
 * ended (the browser's EventSource reconnects and starts afresh).
 *
 * A stream lasts no longer than its session: signing out ends the session's streams at
 * once, and every `sessionCheckMs` the sessions of open streams are checked, so that one
 * that expired, or was signed out on another replica, ends its streams too.
 *
 * A DPU's state follows its heartbeats, which are not changes: an operator's stream reads
 * the DPUs it shows once every `dpuRefreshMs` and sends those whose state changed,
 * so one going Stale or Lost shows too.
 *
 * Each event is `event: change` with `{kind: 'group'|'host'|'dpu', name, phase?, gone?}`.
 */
import type { Context } from 'hono'
import { streamSSE } from 'hono/streaming'
import type { HydrazineClient, Operations } from '../../../app/index.ts'
import { NotFoundError } from '../../../app/index.ts'
import type { Change, Subscription } from '../../../lib/state/changes.ts'
import { readVisible, removalVisibleTo } from '../../change-visibility.ts'
import type { Principal } from '../tokens.ts'
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
  /** Streams one principal (the operator, or one tenant) may have open over all its sessions, default 32. */
  readonly perPrincipal: number
  /** Streams open in all, default 256; the operator's are bounded by `perPrincipal` only. */
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
  /**
   * The sessions of open streams are checked this often, default 5 s: a stream of one
   * that expired or was signed out on another replica ends within this.
   */
  readonly sessionCheckMs: number
}

export const DEFAULT_LIVE_LIMITS: LiveLimits = {
  perSession: 6,
  perPrincipal: 32,
  total: 256,
  heartbeatMs: 15_000,
  backlog: 1000,
  dpuRefreshMs: 10_000,
  sessionCheckMs: 5_000,
}

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

/** A stream's place among those open: `ended` aborts when the stream must end. */
export interface StreamSlot {
  /** Aborted when the stream's session ends (signed out, expired) or the UI closes. */
  readonly ended: AbortSignal
  /** Gives the place back (the stream has ended). */
  release(): void
}

/** One change as the streams of one principal hear it: read when first asked, then shared. */
type SharedRead = () => Promise<LiveEvent | undefined>

/** An open stream, as the shared subscription fans changes out to it. */
export interface LiveListener {
  /**
   * Streams of one audience see exactly the same objects and share each change's read:
   * `operator`, or `tenant:<name>` (`audienceOf`).
   */
  readonly audience: string
  /** The update a change makes for this audience (through its principal's operations). */
  readonly read: (change: Change) => Promise<LiveEvent | undefined>
  /** Takes the change's shared read, to be awaited in turn. */
  readonly hear: (read: SharedRead) => void
}

/** The audience of a principal's streams (see `LiveListener.audience`). */
function audienceOf(principal: Principal): string {
  return principal.kind === 'operator' ? 'operator' : `tenant:${principal.tenant}`
}

/** What the live streams of one UI share. */
export interface LiveDeps {
  readonly client: Pick<HydrazineClient, 'watchChanges'>
  readonly limits: LiveLimits
  /** Whether a session is still signed in, without marking it used (`Sessions.isLive`). */
  readonly sessionIsLive: (id: string) => Promise<boolean>
  readonly logError?: (error: unknown) => void
}

/**
 * What the live streams of one UI share: ONE subscription to the change log, fanned out
 * to every stream, each change read once per audience however many streams hear it; and
 * the streams open per session, so that a session's end ends them.
 *
 * @example
 * const live = new LiveChanges({ client, limits, sessionIsLive: (id) => sessions.isLive(id) })
 * live.endSession(session.id) // signed out: its streams end
 */
export class LiveChanges {
  readonly limits: LiveLimits
  readonly #deps: LiveDeps
  readonly #listeners = new Set<LiveListener>()
  #subscription: Promise<Subscription> | undefined
  /** The open streams of each session (this process's only: each replica bounds its own). */
  readonly #streams = new Map<string, Set<AbortController>>()
  #open = 0
  /** Open streams per audience (`audienceOf`). */
  readonly #perAudience = new Map<string, number>()
  /** Checks, while streams are open, that their sessions still are. */
  #sessionCheck: ReturnType<typeof setInterval> | undefined
  #checking = false
  #closed = false

  constructor(deps: LiveDeps) {
    this.#deps = deps
    this.limits = deps.limits
  }

  /**
   * A place for one more stream of `sessionId`, opened by `principal`: `busy` when its
   * session, its principal or (but for the operator) the UI has as many open as allowed,
   * `closed` once the UI is closing.
   */
  admit(sessionId: string, principal: Principal): StreamSlot | 'busy' | 'closed' {
    if (this.#closed) return 'closed'
    const { limits } = this
    const mine = this.#streams.get(sessionId) ?? new Set<AbortController>()
    const audience = audienceOf(principal)
    const theirs = this.#perAudience.get(audience) ?? 0
    if (
      mine.size >= limits.perSession ||
      theirs >= limits.perPrincipal ||
      (principal.kind !== 'operator' && this.#open >= limits.total)
    ) {
      return 'busy'
    }
    const ended = new AbortController()
    mine.add(ended)
    this.#streams.set(sessionId, mine)
    this.#perAudience.set(audience, theirs + 1)
    this.#open++
    this.#sessionCheck ??= setInterval(() => void this.#checkSessions(), this.limits.sessionCheckMs)
    let released = false
    return {
      ended: ended.signal,
      release: () => {
        if (released) return
        released = true
        mine.delete(ended)
        if (mine.size === 0) this.#streams.delete(sessionId)
        const left = (this.#perAudience.get(audience) ?? 1) - 1
        if (left > 0) this.#perAudience.set(audience, left)
        else this.#perAudience.delete(audience)
        if (--this.#open === 0) this.#stopSessionCheck()
      },
    }
  }

  /** Ends every stream of the session open here (it signed out, or is over). */
  endSession(sessionId: string): void {
    for (const stream of [...(this.#streams.get(sessionId) ?? [])]) stream.abort()
  }

  /** Hears every change from now on; resolves to what stops it. */
  async listen(listener: LiveListener): Promise<() => void> {
    if (this.#closed) return () => {}
    this.#listeners.add(listener)
    if (!this.#subscription) {
      const opened = this.#deps.client.watchChanges((change) => this.#fanOut(change))
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

  /** The UI is closing: ends every stream and stops the shared subscription. */
  close(): void {
    this.#closed = true
    for (const streams of [...this.#streams.values()]) for (const s of [...streams]) s.abort()
    this.#listeners.clear()
    this.#leave(undefined)
    this.#stopSessionCheck()
  }

  /** Hands each listener the change's read, one per audience, made when first awaited. */
  #fanOut(change: Change): void {
    const reads = new Map<string, SharedRead>()
    for (const listener of [...this.#listeners]) {
      let read = reads.get(listener.audience)
      if (!read) {
        let made: Promise<LiveEvent | undefined> | undefined
        read = () =>
          (made ??= listener.read(change).catch((error: unknown) => {
            this.#deps.logError?.(error)
            return undefined
          }))
        reads.set(listener.audience, read)
      }
      listener.hear(read)
    }
  }

  #leave(listener: LiveListener | undefined): void {
    if (listener) this.#listeners.delete(listener)
    if (this.#listeners.size > 0) return
    const subscription = this.#subscription
    this.#subscription = undefined
    void subscription?.then((s) => s.stop()).catch(() => {})
  }

  /** Ends the streams of each session that is no longer signed in (on any replica). */
  async #checkSessions(): Promise<void> {
    if (this.#checking) return
    this.#checking = true
    try {
      await Promise.all(
        [...this.#streams.keys()].map(async (id) => {
          if (!(await this.#deps.sessionIsLive(id))) this.endSession(id)
        }),
      )
    } catch (error) {
      this.#deps.logError?.(error)
    } finally {
      this.#checking = false
    }
  }

  #stopSessionCheck(): void {
    clearInterval(this.#sessionCheck)
    this.#sessionCheck = undefined
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
 * Answers `GET /ui/events` for a signed-in session: the stream; 429 when its session, its
 * principal or the UI has as many streams open as allowed, 503 once the UI is closing.
 */
export function liveEvents(
  c: Context,
  deps: {
    readonly live: LiveChanges
    readonly session: Session
    readonly ops: Operations
    readonly watched: readonly string[]
    readonly logError?: (error: unknown) => void
  },
): Response {
  const { live, session, ops } = deps
  const { limits } = live
  const slot = live.admit(session.id, session.principal)
  if (slot === 'closed') return c.text('closing', 503)
  if (slot === 'busy') return c.text('too many live streams open; close a tab', 429)
  const tenant = session.principal.kind === 'tenant' ? session.principal.tenant : undefined
  const read = (kind: Change['kind'], name: string, removed?: Change['removed']) =>
    eventOf(ops, tenant, kind, name, removed)
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
      slot.release()
      stop?.()
      if (heartbeat) clearInterval(heartbeat)
      if (dpuRefresh) clearInterval(dpuRefresh)
      slot.ended.removeEventListener('abort', end)
      done()
    }
    stream.onAbort(end)
    slot.ended.addEventListener('abort', end, { once: true })
    if (slot.ended.aborted) end()

    /** Sends, in turn, the update a read makes (nothing when the caller may not hear of it). */
    const send = (next: SharedRead) => {
      if (ended) return
      if (++waiting > limits.backlog) {
        end()
        return
      }
      queue = queue
        .then(async () => {
          if (ended) return
          const event = await next()
          if (event && !ended)
            await stream.writeSSE({ event: 'change', data: JSON.stringify(event) })
        })
        .catch((error: unknown) => deps.logError?.(error))
        .finally(() => {
          waiting--
        })
    }

    try {
      stop = await live.listen({
        audience: audienceOf(session.principal),
        read: (change) => read(change.kind, change.name, change.removed),
        hear: send,
      })
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
      if (kind) send(() => read(kind, name))
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
        // The page's DPUs each (its newest beat is one key), wherever they sort in the
        // inventory; only a state that changed is sent.
        for (const id of dpus) {
          const dpu = await ops.getDpu(id).catch((error: unknown) => {
            if (error instanceof NotFoundError) return undefined
            throw error
          })
          if (!dpu || shown.get(dpu.id) === dpu.state) continue
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
