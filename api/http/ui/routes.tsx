/**
 * The admin web UI at `/ui/`, served by Hydrazine itself: server-rendered pages (hono's
 * JSX) with a small client script for live updates, for operators and tenants.
 *
 * - `GET /ui/sign-in`, `POST /ui/sign-in` — a token (operator or tenant) posted once
 *   opens a session (`session.ts`); `POST /ui/sign-out` ends it.
 * - `GET /ui/` — overview: groups, hosts (and for operators DPUs and public IPs), counts,
 *   whatever is not Ready first; `GET /ui/reconcile` + `POST` — run reconcile now (operators).
 * - `GET /ui/groups/:name` — spec, status, topology picture (`topology.tsx`), hosts,
 *   address map (`ipam-map.tsx`), events; `…/redrive` re-drives a Failed group.
 * - `GET /ui/hosts/:name` — spec, status, conditions, events; `…/trace?to=` traces a
 *   packet; `…/delete` force-deletes; `…/redrive` re-drives a Failed host.
 * - `GET /ui/dpus`, `/ui/dpus/:id`, `/ui/public-ips` — operators only (a tenant gets 403).
 * - `GET /ui/events` — server-sent events of status changes (`live.ts`).
 *
 * Every read and write goes through the principal's operations (`app/operations.ts`), so
 * a tenant sees and changes only its own tenant's objects (another's is 404). Each action
 * is a confirmation page, then a POST carrying the session's CSRF token, then a redirect
 * with a flash message. Form inputs are checked with valibot: a bad one is a 400 page
 * naming the field. Answers carry a strict Content-Security-Policy (`assets.ts`).
 *
 * This file composes the UI and holds signing in and out; the overview and operators' pages
 * are `overview-routes.tsx`, groups' and hosts' `object-routes.tsx`, the guards every
 * request passes `guards.ts`, and what the routes share `route-kit.tsx`.
 *
 * @example
 * app.route(UI_PATH, uiRoutes({ client, tokens }))
 */
import { getConnInfo } from '@hono/node-server/conninfo'
import type { Context } from 'hono'
import { Hono } from 'hono'
import { deleteCookie, getCookie, setCookie } from 'hono/cookie'
import * as v from 'valibot'
import type { HydrazineClient } from '../../../app/index.ts'
import {
  createOperations,
  type Operations,
  type OperationsDeps,
  validate,
} from '../../../app/index.ts'
import { ApiError, type ErrorBody, errorHandler } from '../errors.ts'
import { createTokenLookup, principalsByDigest, samePrincipal, type Tokens } from '../tokens.ts'
import { CLIENT_JS, ICON_SVG, STYLE_CSS } from './assets.ts'
import { csrfProtection, formLimit, sameOriginPosts, uiHeaders } from './guards.ts'
import { DEFAULT_LIVE_LIMITS, LiveChanges, type LiveLimits, liveEvents, watchedOf } from './live.ts'
import { objectRoutes } from './object-routes.tsx'
import { overviewRoutes } from './overview-routes.tsx'
import { ProblemPage } from './pages/problem.tsx'
import { SignInPage } from './pages/sign-in.tsx'
import { type Env, frameOf, page, type RouteKit, UI_PATH } from './route-kit.tsx'
import {
  MemorySessions,
  SESSION_COOKIE,
  type Session,
  type SessionLimits,
  type Sessions,
  SignInLimiter,
  tokenDigest,
} from './session.ts'

/** What the admin UI needs from the rest of Hydrazine. */
export interface UiDeps {
  /** The client: reads and writes through the principal's operations, live changes, reconcile. */
  readonly client: OperationsDeps['client'] & Pick<HydrazineClient, 'watchChanges'>
  /** The same tokens as the API's: what signing in checks. */
  readonly tokens: Tokens
  /**
   * Where sessions live (default: this process's memory, `sessionLimits`). Hydrazine
   * passes `RedisSessions`, so that every replica knows every session.
   */
  readonly sessions?: Sessions
  readonly sessionLimits?: Partial<SessionLimits>
  readonly liveLimits?: Partial<LiveLimits>
  /**
   * The UI closes when aborted: every live stream ends and the shared subscription to the
   * change log stops (the server is closing: its connections must end).
   */
  readonly closing?: AbortSignal
  /** Sees every error that became a 500. */
  readonly logError?: (error: unknown) => void
}

const httpsOf = (c: Context) => new URL(c.req.url).protocol === 'https:'

/** The remote address of the request (`unknown` when served without a socket, as in tests). */
function remoteOf(c: Context): string {
  try {
    return getConnInfo(c).remote.address ?? 'unknown'
  } catch {
    return 'unknown'
  }
}

const SignInForm = v.object({
  token: v.pipe(
    v.string('is required'),
    v.minLength(1, 'is required'),
    v.maxLength(4096, 'is too long for a token'),
  ),
})

/** The admin UI's routes, to mount at `UI_PATH`. */
export function uiRoutes(deps: UiDeps): Hono<Env> {
  const app = new Hono<Env>()
  const sessions = deps.sessions ?? new MemorySessions(deps.sessionLimits)
  const limiter = new SignInLimiter()
  const lookup = createTokenLookup(deps.tokens)
  const principalNow = principalsByDigest(deps.tokens)
  const operationsFor = createOperations(deps)
  const live = new LiveChanges({
    client: deps.client,
    limits: { ...DEFAULT_LIVE_LIMITS, ...deps.liveLimits },
    sessionIsLive: (id) => sessions.isLive(id),
    ...(deps.logError ? { logError: deps.logError } : {}),
  })
  deps.closing?.addEventListener('abort', () => live.close(), { once: true })
  if (deps.closing?.aborted) live.close()
  const toJson = errorHandler(deps.logError)
  const ops = (c: Context<Env>): Operations => operationsFor(c.get('session').principal)
  /**
   * The request's session. A token taken out of the tokens file, or moved to another
   * principal (an operator's made a tenant's), ends the sessions it opened.
   */
  const sessionOf = async (c: Context): Promise<Session | undefined> => {
    const session = await sessions.get(getCookie(c, SESSION_COOKIE))
    const now = session && principalNow.get(session.token)
    if (!session || (now && samePrincipal(now, session.principal))) return session
    await sessions.delete(session.id)
    return undefined
  }

  app.onError(async function uiError(error, c) {
    // The API's one mapping from errors to statuses, rendered as a page.
    const answer = toJson(error, c)
    const { error: body } = (await answer.json()) as ErrorBody
    const session = c.get('session') as Session | undefined
    const status = answer.status as 400 | 403 | 404 | 409 | 429 | 503
    const title =
      status === 404
        ? 'Not found'
        : status === 403
          ? 'Not allowed'
          : status === 400
            ? 'Not valid'
            : status === 409
              ? 'Conflict'
              : status >= 500
                ? 'Something went wrong'
                : 'Refused'
    return page(
      c,
      <ProblemPage
        frame={session ? frameOf(c) : undefined}
        status={status}
        title={title}
        message={body.message}
        issues={body.issues}
      />,
      status,
    )
  })

  app.use('*', uiHeaders, sameOriginPosts, formLimit)

  // ── static assets and signing in: no session needed ───────────────────────
  app.get('/assets/app.css', (c) => {
    c.header('Cache-Control', 'public, max-age=300')
    return c.body(STYLE_CSS, 200, { 'Content-Type': 'text/css; charset=utf-8' })
  })
  app.get('/assets/app.js', (c) => {
    c.header('Cache-Control', 'public, max-age=300')
    return c.body(CLIENT_JS, 200, { 'Content-Type': 'text/javascript; charset=utf-8' })
  })
  app.get('/assets/icon.svg', (c) => {
    c.header('Cache-Control', 'public, max-age=86400')
    return c.body(ICON_SVG, 200, { 'Content-Type': 'image/svg+xml' })
  })

  app.get('/sign-in', async (c) => {
    if (await sessionOf(c)) return c.redirect(`${UI_PATH}/`, 303)
    return page(c, <SignInPage />)
  })
  app.post('/sign-in', async (c) => {
    const { token } = validate(SignInForm, await c.req.parseBody())
    const principal = lookup(token)
    if (!principal) {
      // Failures only, counted by where they come from: a valid token is never refused.
      const remote = remoteOf(c)
      if (!limiter.allowed(remote)) {
        return page(
          c,
          <SignInPage error="Too many failed sign-ins: wait a minute and try again." />,
          429,
        )
      }
      limiter.failed(remote)
      return page(c, <SignInPage error="That token is not known. Check it and try again." />, 403)
    }
    const session = await sessions.create(principal, tokenDigest(token))
    setCookie(c, SESSION_COOKIE, session.id, {
      path: UI_PATH,
      httpOnly: true,
      sameSite: 'Strict',
      secure: httpsOf(c),
    })
    return c.redirect(`${UI_PATH}/`, 303)
  })

  // ── everything else: a session first ─────────────────────────────────────
  app.use('*', async function requireSession(c, next) {
    const session = await sessionOf(c)
    if (!session) {
      if (c.req.path === `${UI_PATH}/events`) return c.text('sign in first', 401)
      return c.redirect(`${UI_PATH}/sign-in`, 303)
    }
    c.set('session', session)
    // A page shows the message the action before it left; the live stream takes none.
    const page = c.req.method === 'GET' && c.req.path !== `${UI_PATH}/events`
    c.set('flash', page ? await sessions.takeFlash(session.id) : undefined)
    await next()
  })
  app.use('*', csrfProtection)
  /** Remembers a message for the next page, and goes there. */
  const done = async (c: Context<Env>, flash: string, to: string) => {
    await sessions.flash(c.get('session').id, flash)
    return c.redirect(to, 303)
  }

  app.post('/sign-out', async (c) => {
    const { id } = c.get('session')
    await sessions.delete(id)
    live.endSession(id)
    deleteCookie(c, SESSION_COOKIE, { path: UI_PATH, secure: httpsOf(c) })
    return c.redirect(`${UI_PATH}/sign-in`, 303)
  })

  app.get('/events', (c) =>
    liveEvents(c, {
      live,
      session: c.get('session'),
      ops: ops(c),
      watched: watchedOf(c.req.queries('watch') ?? []),
      ...(deps.logError ? { logError: deps.logError } : {}),
    }),
  )

  const kit: RouteKit = { ops, done, toJson }
  overviewRoutes(app, kit)
  objectRoutes(app, kit)

  app.all('*', () => {
    throw new ApiError(404, 'NOT_FOUND', 'there is no such page')
  })
  return app
}
