/**
 * The admin UI's sign-in sessions.
 *
 * Signing in presents a token (operator or tenant) once, in a form POST; the token is
 * never stored, put in a cookie or in a URL. The session is a random id (32 bytes) in an
 * `HttpOnly; SameSite=Strict` cookie scoped to `/ui`, mapped to the principal the token
 * authenticated and to a CSRF token every state-changing form carries, and to the flash
 * message the next page shows. Sessions end after `idleMs` without a request or on
 * sign-out, and their live streams with them (`live.ts`: an open stream is no request).
 *
 * Two stores: `RedisSessions` (what Hydrazine runs: every replica behind a load balancer
 * knows every session, and a restart signs no one out; Redis holds each session under a
 * SHA-256 of its id, never the id itself) and `MemorySessions` (one process; also caps
 * their count, the least recently used going first).
 *
 * @example
 * const sessions = new RedisSessions(redis)
 * const { id } = await sessions.create({ kind: 'operator' })
 * (await sessions.get(id))?.principal // { kind: 'operator' }
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import { isIPv4, isIPv6 } from 'node:net'
import * as v from 'valibot'
import type { RedisClient } from '../../../lib/redis/connection.ts'
import type { Principal } from '../tokens.ts'

/** One signed-in browser. */
export interface Session {
  readonly id: string
  readonly principal: Principal
  /**
   * SHA-256 (hex) of the token it was opened with: a session whose token is no longer
   * known (removed from the tokens file) is over (`tokenDigest`).
   */
  readonly token: string
  /** Sent back in every state-changing form (`csrf`), checked against this. */
  readonly csrf: string
}

/** What a session keeps of its token: its SHA-256, in hex. */
export { tokenDigest } from '../tokens.ts'

/** Where sessions live. */
export interface Sessions {
  /** A new session for `principal`, opened with the token of digest `token`. */
  create(principal: Principal, token: string): Promise<Session>
  /** The live session of that id (and marks it used), or undefined. */
  get(id: string | undefined): Promise<Session | undefined>
  /**
   * Whether the session is still signed in, without marking it used: what an open live
   * stream asks now and then (a stream left open is not a use; it ends with its session).
   */
  isLive(id: string): Promise<boolean>
  delete(id: string): Promise<void>
  /** A message for the session's next page (after an action). */
  flash(id: string, message: string): Promise<void>
  /** The message for this page, then forgotten. */
  takeFlash(id: string): Promise<string | undefined>
}

export interface SessionLimits {
  /** A session unused this long is gone (default 8 h). */
  readonly idleMs: number
  /** Most sessions kept at once in memory (default 1,000): the least recently used go first. */
  readonly maxSessions: number
}

export const DEFAULT_SESSION_LIMITS: SessionLimits = { idleMs: 8 * 3600_000, maxSessions: 1000 }

/** The session cookie's name (its path is `/ui`). */
export const SESSION_COOKIE = 'hz_ui_session'

const randomId = () => randomBytes(32).toString('base64url')

interface MemorySession extends Session {
  flash?: string | undefined
  lastSeen: number
}

/** Sessions in this process's memory: one replica only, and a restart signs everyone out. */
export class MemorySessions implements Sessions {
  // A Map keeps insertion order: re-inserting on use makes its first entry the least
  // recently used.
  readonly #sessions = new Map<string, MemorySession>()
  readonly #limits: SessionLimits
  readonly #now: () => number

  constructor(limits: Partial<SessionLimits> = {}, now: () => number = Date.now) {
    this.#limits = { ...DEFAULT_SESSION_LIMITS, ...limits }
    if (this.#limits.maxSessions < 1 || this.#limits.idleMs <= 0) {
      throw new RangeError('session limits must be positive')
    }
    this.#now = now
  }

  async create(principal: Principal, token: string): Promise<Session> {
    this.#sweep()
    while (this.#sessions.size >= this.#limits.maxSessions) {
      const oldest = this.#sessions.keys().next().value
      if (oldest === undefined) break
      this.#sessions.delete(oldest)
    }
    const session: MemorySession = {
      id: randomId(),
      principal,
      token,
      csrf: randomId(),
      lastSeen: this.#now(),
    }
    this.#sessions.set(session.id, session)
    return { id: session.id, principal, token, csrf: session.csrf }
  }

  async get(id: string | undefined): Promise<Session | undefined> {
    const session = this.#live(id)
    return (
      session && {
        id: session.id,
        principal: session.principal,
        token: session.token,
        csrf: session.csrf,
      }
    )
  }

  async isLive(id: string): Promise<boolean> {
    const session = this.#sessions.get(id)
    return session !== undefined && this.#now() - session.lastSeen <= this.#limits.idleMs
  }

  async delete(id: string): Promise<void> {
    this.#sessions.delete(id)
  }

  async flash(id: string, message: string): Promise<void> {
    const session = this.#live(id)
    if (session) session.flash = message
  }

  async takeFlash(id: string): Promise<string | undefined> {
    const session = this.#live(id)
    const flash = session?.flash
    if (session) session.flash = undefined
    return flash
  }

  get size(): number {
    return this.#sessions.size
  }

  #live(id: string | undefined): MemorySession | undefined {
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

  /** Drops the sessions idle too long (they are least recently used: at the front). */
  #sweep(): void {
    const now = this.#now()
    for (const [id, session] of this.#sessions) {
      if (now - session.lastSeen <= this.#limits.idleMs) break
      this.#sessions.delete(id)
    }
  }
}

const StoredPrincipal = v.variant('kind', [
  v.object({ kind: v.literal('operator') }),
  v.object({ kind: v.literal('tenant'), tenant: v.string() }),
])

/**
 * Sessions in Redis, one hash per session (`principal`, `token`, `csrf`, `flash`) that expires
 * `idleMs` after its last use. The key holds a SHA-256 of the session id, so what Redis
 * holds (a dump, a replica) cannot be presented as a cookie. Every key shares the hash tag
 * `{ui}`.
 */
export class RedisSessions implements Sessions {
  readonly #redis: RedisClient
  readonly #idleMs: number
  readonly #prefix: string

  constructor(redis: RedisClient, options: { idleMs?: number; prefix?: string } = {}) {
    this.#redis = redis
    this.#idleMs = options.idleMs ?? DEFAULT_SESSION_LIMITS.idleMs
    if (this.#idleMs <= 0) throw new RangeError('session limits must be positive')
    this.#prefix = options.prefix ?? 'hz:{ui}:session:'
  }

  #key(id: string): string {
    return `${this.#prefix}${createHash('sha256').update(id).digest('hex')}`
  }

  async create(principal: Principal, token: string): Promise<Session> {
    const session = { id: randomId(), principal, token, csrf: randomId() }
    const key = this.#key(session.id)
    await this.#redis
      .multi()
      .hset(key, 'principal', JSON.stringify(principal), 'token', token, 'csrf', session.csrf)
      .pexpire(key, this.#idleMs)
      .exec()
    return session
  }

  async get(id: string | undefined): Promise<Session | undefined> {
    if (!id) return undefined
    const key = this.#key(id)
    const [[, fields] = [], [, kept] = []] =
      (await this.#redis.multi().hgetall(key).pexpire(key, this.#idleMs).exec()) ?? []
    const { principal, token, csrf } = (fields ?? {}) as Record<string, string>
    if (kept !== 1 || !principal || !token || !csrf) return undefined
    const parsed = v.safeParse(StoredPrincipal, JSON.parse(principal))
    return parsed.success ? { id, principal: parsed.output, token, csrf } : undefined
  }

  async isLive(id: string): Promise<boolean> {
    // A flash written after sign-out leaves a hash without a principal: not a session.
    return (await this.#redis.hexists(this.#key(id), 'principal')) === 1
  }

  async delete(id: string): Promise<void> {
    await this.#redis.del(this.#key(id))
  }

  async flash(id: string, message: string): Promise<void> {
    const key = this.#key(id)
    // A session signed out meanwhile gets a hash without a principal, which no `get`
    // accepts and which expires like any session.
    await this.#redis.multi().hset(key, 'flash', message).pexpire(key, this.#idleMs).exec()
  }

  async takeFlash(id: string): Promise<string | undefined> {
    const key = this.#key(id)
    const [[, flash] = []] =
      (await this.#redis.multi().hget(key, 'flash').hdel(key, 'flash').exec()) ?? []
    return typeof flash === 'string' ? flash : undefined
  }
}

/** True when `presented` is the session's CSRF token (compared in constant time). */
export function csrfMatches(session: Session, presented: string): boolean {
  const a = Buffer.from(session.csrf)
  const b = Buffer.from(presented)
  return a.length === b.length && timingSafeEqual(a, b)
}

/**
 * Counts failed sign-ins over a sliding window, per remote address and per network (its
 * /24, or /64 for IPv6): past `perAddress` failures from one address, or `perNetwork` from
 * its network, in `windowMs`, a failed sign-in from there is refused (429) until the window
 * moves on. Nothing is counted in all: failures elsewhere refuse no one. Only failures are
 * counted, and the sign-in checks a token before asking here, so a valid token always
 * signs in (tokens are long and random: guessing one is not what this slows).
 */
export class SignInLimiter {
  /** Failure times per `address:<a>` and `network:<n>`. */
  readonly #failures = new Map<string, number[]>()

  constructor(
    readonly limits: { windowMs: number; perAddress: number; perNetwork: number } = {
      windowMs: 60_000,
      perAddress: 10,
      perNetwork: 50,
    },
    private readonly now: () => number = Date.now,
  ) {}

  /** True when a failed sign-in from `address` may still be answered as one (not 429). */
  allowed(address: string): boolean {
    return (
      this.#recent(`address:${address}`) < this.limits.perAddress &&
      this.#recent(`network:${networkOf(address)}`) < this.limits.perNetwork
    )
  }

  failed(address: string): void {
    const at = this.now()
    // Bounded: a source past its limit is refused before it gets here again.
    if (this.#failures.size >= 10_000) this.#failures.clear()
    for (const key of [`address:${address}`, `network:${networkOf(address)}`]) {
      this.#failures.set(key, [...(this.#failures.get(key) ?? []), at])
    }
  }

  /** The failures of `key` in the window (older ones are forgotten). */
  #recent(key: string): number {
    const since = this.now() - this.limits.windowMs
    const recent = (this.#failures.get(key) ?? []).filter((t) => t > since)
    if (recent.length === 0) this.#failures.delete(key)
    else this.#failures.set(key, recent)
    return recent.length
  }
}

/**
 * The network an address counts in for sign-in failures: its /24 (IPv4, IPv4-mapped IPv6
 * too) or its /64 (IPv6); anything else is its own.
 *
 * @example networkOf('192.0.2.7') // '192.0.2.0/24'
 * @example networkOf('2001:db8:1:2::7') // '2001:db8:1:2::/64'
 */
export function networkOf(address: string): string {
  const v4 = address.replace(/^::ffff:/i, '')
  if (isIPv4(v4)) return `${v4.split('.').slice(0, 3).join('.')}.0/24`
  if (!isIPv6(address)) return address
  const [head = '', tail] = address.toLowerCase().split('::')
  const groups = head === '' ? [] : head.split(':')
  if (tail !== undefined) {
    const after = tail === '' ? [] : tail.split(':')
    // An embedded IPv4 tail is two groups; it is past the first four either way.
    groups.push(...Array<string>(Math.max(0, 8 - groups.length - after.length)).fill('0'))
  }
  const first = [...groups, '0', '0', '0', '0'].slice(0, 4).map((g) => g.replace(/^0+(?=.)/, ''))
  return `${first.join(':')}::/64`
}
