/**
 * The admin UI's sign-in sessions, kept in this process's memory only.
 *
 * Signing in presents a token (operator or tenant) once, in a form POST; the token is
 * never stored, put in a cookie or in a URL. The session is a random id (32 bytes) in an
 * `HttpOnly; SameSite=Strict` cookie scoped to `/ui`, mapped here to the principal the
 * token authenticated and to a CSRF token every state-changing form carries. Sessions end
 * after `idleMs` without a request, on sign-out, or when `maxSessions` is reached (the
 * least recently used goes first); a restart signs everyone out.
 *
 * @example
 * const sessions = new SessionStore()
 * const { id } = sessions.create({ kind: 'operator' })
 * sessions.get(id)?.principal // { kind: 'operator' }
 */
import { randomBytes, timingSafeEqual } from 'node:crypto'
import type { Principal } from '../tokens.ts'

/** One signed-in browser. */
export interface Session {
  readonly id: string
  readonly principal: Principal
  /** Sent back in every state-changing form (`csrf`), checked against this. */
  readonly csrf: string
  /** A message for the next page shown (after an action), then forgotten. */
  flash?: string | undefined
  /** Live event streams this session has open (`live.ts`). */
  streams: number
  lastSeen: number
}

export interface SessionLimits {
  /** A session unused this long is gone (default 8 h). */
  readonly idleMs: number
  /** Most sessions kept at once (default 1,000): the least recently used go first. */
  readonly maxSessions: number
}

export const DEFAULT_SESSION_LIMITS: SessionLimits = { idleMs: 8 * 3600_000, maxSessions: 1000 }

/** The session cookie's name (its path is `/ui`). */
export const SESSION_COOKIE = 'hz_ui_session'

const randomId = () => randomBytes(32).toString('base64url')

export class SessionStore {
  // A Map keeps insertion order: re-inserting on use makes its first entry the least
  // recently used.
  readonly #sessions = new Map<string, Session>()
  readonly #limits: SessionLimits
  readonly #now: () => number

  constructor(limits: Partial<SessionLimits> = {}, now: () => number = Date.now) {
    this.#limits = { ...DEFAULT_SESSION_LIMITS, ...limits }
    if (this.#limits.maxSessions < 1 || this.#limits.idleMs <= 0) {
      throw new RangeError('session limits must be positive')
    }
    this.#now = now
  }

  /** A new session for `principal`; the oldest is dropped when the store is full. */
  create(principal: Principal): Session {
    this.#sweep()
    while (this.#sessions.size >= this.#limits.maxSessions) {
      const oldest = this.#sessions.keys().next().value
      if (oldest === undefined) break
      this.#sessions.delete(oldest)
    }
    const session: Session = {
      id: randomId(),
      principal,
      csrf: randomId(),
      streams: 0,
      lastSeen: this.#now(),
    }
    this.#sessions.set(session.id, session)
    return session
  }

  /** The live session of that id (and marks it used), or undefined. */
  get(id: string | undefined): Session | undefined {
    if (!id) return undefined
    const session = this.#sessions.get(id)
    if (!session) return undefined
    const now = this.#now()
    if (now - session.lastSeen > this.#limits.idleMs) {
      this.#sessions.delete(id)
      return undefined
    }
    session.lastSeen = now
    this.#sessions.delete(id)
    this.#sessions.set(id, session)
    return session
  }

  delete(id: string): void {
    this.#sessions.delete(id)
  }

  get size(): number {
    return this.#sessions.size
  }

  /** Drops the sessions idle too long (they are least recently used: at the front). */
  #sweep(): void {
    const now = this.#now()
    for (const [id, session] of this.#sessions) {
      if (now - session.lastSeen <= this.#limits.idleMs) break
      this.#sessions.delete(id)
    }
  }
}

/** True when `presented` is the session's CSRF token (compared in constant time). */
export function csrfMatches(session: Session, presented: string): boolean {
  const a = Buffer.from(session.csrf)
  const b = Buffer.from(presented)
  return a.length === b.length && timingSafeEqual(a, b)
}

/**
 * Counts failed sign-ins per remote address over a sliding window, and in all: past
 * `perAddress` failures from one address (or `total` from all) in `windowMs`, sign-in is
 * refused until the window moves on. Successes are not counted.
 */
export class SignInLimiter {
  readonly #failures = new Map<string, number[]>()
  readonly #all: number[] = []

  constructor(
    readonly limits: { windowMs: number; perAddress: number; total: number } = {
      windowMs: 60_000,
      perAddress: 10,
      total: 100,
    },
    private readonly now: () => number = Date.now,
  ) {}

  /** True when `address` may try to sign in now. */
  allowed(address: string): boolean {
    const since = this.now() - this.limits.windowMs
    const mine = (this.#failures.get(address) ?? []).filter((t) => t > since)
    while ((this.#all[0] ?? Number.POSITIVE_INFINITY) <= since) this.#all.shift()
    if (mine.length === 0) this.#failures.delete(address)
    else this.#failures.set(address, mine)
    return mine.length < this.limits.perAddress && this.#all.length < this.limits.total
  }

  failed(address: string): void {
    const at = this.now()
    // Bounded: an address past its limit is refused before it gets here again.
    if (this.#failures.size >= 10_000 && !this.#failures.has(address)) this.#failures.clear()
    this.#failures.set(address, [...(this.#failures.get(address) ?? []), at])
    this.#all.push(at)
  }
}
