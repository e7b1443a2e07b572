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
 * Every read and write goes through the principal's operations (`api/operations.ts`), so
 * a tenant sees and changes only its own tenant's objects (another's is 404). Each action
 * is a confirmation page, then a POST carrying the session's CSRF token, then a redirect
 * with a flash message. Form inputs are checked with valibot: a bad one is a 400 page
 * naming the field. Answers carry a strict Content-Security-Policy (`assets.ts`).
 *
 * @example
 * app.route(UI_PATH, uiRoutes({ client, tokens }))
 */
import { getConnInfo } from '@hono/node-server/conninfo'
import type { Context, MiddlewareHandler } from 'hono'
import { Hono } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import { deleteCookie, getCookie, setCookie } from 'hono/cookie'
import type { Child } from 'hono/jsx'
import * as v from 'valibot'
import type { Page, PageRequest } from '../../../lib/state/pages.ts'
import { validate } from '../../../queues/client-errors.ts'
import { type HydrazineClient, NotFoundError, type TraceAnswer } from '../../../queues/producer.ts'
import {
  createOperations,
  type DpuView,
  type Operations,
  type OperationsDeps,
} from '../../operations.ts'
import { ApiError, type ErrorBody, errorHandler } from '../errors.ts'
import { createTokenLookup, principalsByDigest, samePrincipal, type Tokens } from '../tokens.ts'
import { traceAnswer } from '../trace.ts'
import { CLIENT_JS, ICON_SVG, STYLE_CSS, UI_CSP } from './assets.ts'
import type { Frame } from './layout.tsx'
import { DEFAULT_LIVE_LIMITS, LiveChanges, type LiveLimits, liveEvents, watchedOf } from './live.ts'
import { ConfirmPage } from './pages/confirm.tsx'
import { DpuPage, DpusPage } from './pages/dpus.tsx'
import { GroupPage } from './pages/group.tsx'
import { HostPage, type TraceShown } from './pages/host.tsx'
import { type Bounded, OverviewPage } from './pages/overview.tsx'
import { ProblemPage } from './pages/problem.tsx'
import { PublicIpsPage } from './pages/public-ips.tsx'
import { SignInPage } from './pages/sign-in.tsx'
import {
  csrfMatches,
  MemorySessions,
  SESSION_COOKIE,
  type Session,
  type SessionLimits,
  type Sessions,
  SignInLimiter,
  tokenDigest,
} from './session.ts'
import { topologyModel } from './topology.tsx'

/** The largest form a POST may send (a token, a CSRF token, a name, a trace request). */
const MAX_FORM_BYTES = 16 * 1024

/** Where the UI is mounted on the HTTP API. */
export const UI_PATH = '/ui'

/** Most objects of one kind a page reads (in pages); it says so when there are more. */
export const MAX_LISTED = 1000

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

type Env = { Variables: { session: Session; flash: string | undefined } }

/** A page as the answer: `<!doctype html>` and the escaped markup. */
async function page(
  c: Context,
  node: Child,
  status: 200 | 400 | 403 | 404 | 409 | 429 | 503 = 200,
) {
  return c.html(`<!doctype html>${await node}`, status)
}

/** The session's frame for a page, with the flash message its request took. */
function frameOf(c: Context<Env>): Frame {
  const session = c.get('session')
  return { principal: session.principal, csrf: session.csrf, flash: c.get('flash') }
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

/** Security headers on every UI answer; pages are never cached. */
const uiHeaders: MiddlewareHandler = async function uiHeaders(c, next) {
  await next()
  c.header('Content-Security-Policy', UI_CSP)
  c.header('X-Content-Type-Options', 'nosniff')
  c.header('X-Frame-Options', 'DENY')
  c.header('Referrer-Policy', 'same-origin')
  if (!c.req.path.startsWith(`${UI_PATH}/assets/`)) c.header('Cache-Control', 'no-store')
}

/**
 * Refuses a POST sent from another origin (a browser always says where from). `null` is
 * another origin too: browsers send it from sandboxed frames and after a cross-origin
 * redirect, as a page elsewhere could arrange to sign a visitor in to its own tenant.
 */
const sameOriginPosts: MiddlewareHandler = async function sameOriginPosts(c, next) {
  const origin = c.req.header('origin')
  if (c.req.method === 'POST' && origin !== undefined) {
    let host: string | undefined
    try {
      host = origin === 'null' ? undefined : new URL(origin).host
    } catch {
      host = undefined
    }
    if (host !== c.req.header('host')) {
      throw new ApiError(403, 'FORBIDDEN', 'a form of this UI must be sent from this UI')
    }
  }
  await next()
}

/** The form fields an action sends. */
const ActionForm = v.object({
  csrf: v.pipe(v.string('is required'), v.maxLength(100, 'is too long')),
  confirm: v.pipe(v.string('is required'), v.maxLength(253, 'is too long')),
})

const SignInForm = v.object({
  token: v.pipe(
    v.string('is required'),
    v.minLength(1, 'is required'),
    v.maxLength(4096, 'is too long for a token'),
  ),
})

/** Reads up to MAX_LISTED items, a page at a time. */
async function bounded<T>(
  read: (page: PageRequest) => Promise<Page<T>>,
  max = MAX_LISTED,
): Promise<Bounded<T>> {
  const items: T[] = []
  let after: string | undefined
  do {
    const limit = Math.min(500, max - items.length)
    const got = await read(after === undefined ? { limit } : { limit, after })
    items.push(...got.items)
    after = got.next
  } while (after !== undefined && items.length < max)
  return { items, more: after !== undefined }
}

/**
 * The state of each of `ids` (a group's DPUs, to colour their gateway routers), read one
 * by one: a DPU this caller may not see, or that no longer exists, is left out (Unknown).
 */
async function dpuStates(
  o: Operations,
  ids: ReadonlySet<string>,
): Promise<Pick<DpuView, 'id' | 'state'>[]> {
  const read = await Promise.all(
    [...ids].map((id) =>
      o.getDpu(id).catch((error: unknown) => {
        if (error instanceof NotFoundError) return undefined
        throw error
      }),
    ),
  )
  return read.flatMap((dpu) => (dpu ? [{ id: dpu.id, state: dpu.state }] : []))
}

/** The request a re-drive applies again: the stored spec, the DPU by id only. */
function redriveSpec<S extends { dpu: { id: string } }>(spec: S): Record<string, unknown> {
  return { ...spec, dpu: { id: spec.dpu.id } }
}

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

  app.use(
    '*',
    uiHeaders,
    sameOriginPosts,
    bodyLimit({
      maxSize: MAX_FORM_BYTES,
      onError: () => {
        throw new ApiError(413, 'TOO_LARGE', `a form must not exceed ${MAX_FORM_BYTES} bytes`)
      },
    }),
  )

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
  app.use('*', async function csrfProtection(c, next) {
    if (c.req.method === 'POST') {
      const body = await c.req.parseBody()
      const csrf = typeof body.csrf === 'string' ? body.csrf : ''
      if (!csrfMatches(c.get('session'), csrf)) {
        throw new ApiError(
          403,
          'FORBIDDEN',
          'this form has expired or was not sent from this session: go back, reload and try again',
          [{ path: 'csrf', message: 'does not match this session' }],
        )
      }
    }
    await next()
  })
  const operatorOnly: MiddlewareHandler<Env> = async function operatorOnly(c, next) {
    if (c.get('session').principal.kind !== 'operator') {
      throw new ApiError(403, 'FORBIDDEN', 'only an operator may see this page')
    }
    await next()
  }
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

  // ── overview ─────────────────────────────────────────────────────────────
  app.get('/', async (c) => {
    const o = ops(c)
    const operator = c.get('session').principal.kind === 'operator'
    const [groups, hosts, dpus, publicIps] = await Promise.all([
      bounded((p) => o.listGroups({}, p)),
      bounded((p) => o.listHosts({}, p)),
      operator ? bounded((p) => o.listDpus(p)) : undefined,
      operator ? bounded((p) => o.listPublicIps(p)) : undefined,
    ])
    return page(
      c,
      <OverviewPage
        frame={frameOf(c)}
        data={{ groups, hosts, ...(dpus ? { dpus } : {}), ...(publicIps ? { publicIps } : {}) }}
      />,
    )
  })

  app.get('/reconcile', operatorOnly, (c) =>
    page(
      c,
      <ConfirmPage
        frame={frameOf(c)}
        title="Run reconcile now"
        message="Reconcile compares every group's OVN rows with what Hydrazine wants and repairs the difference (repairs are listed in each object's events). It runs on its own every 30 seconds; this runs it once now, after any run under way."
        action={`${UI_PATH}/reconcile`}
        button="Run reconcile now"
        back={`${UI_PATH}/`}
      />,
    ),
  )
  app.post('/reconcile', operatorOnly, async (c) => {
    validate(ActionForm, await c.req.parseBody())
    const job = await ops(c).reconcileNow()
    return done(c, `Reconcile queued (job ${job}).`, `${UI_PATH}/`)
  })

  // ── groups ───────────────────────────────────────────────────────────────
  app.get('/groups/:name', async (c) => {
    const o = ops(c)
    const name = c.req.param('name')
    const group = await o.getGroup(name)
    const [hosts, events, ipam] = await Promise.all([
      bounded((p) => o.listHosts({ resourceGroup: name }, p)),
      o.groupEvents(name),
      o.groupIpam(name).catch((error: unknown) => {
        if (error instanceof NotFoundError) {
          return { unavailable: 'The network is not made yet: no address map.' }
        }
        throw error
      }),
    ])
    const dpus = await dpuStates(o, new Set(hosts.items.map((h) => h.spec.dpu.id)))
    return page(
      c,
      <GroupPage
        frame={frameOf(c)}
        data={{
          group,
          hosts: hosts.items,
          moreHosts: hosts.more,
          topology: topologyModel(group, hosts.items, dpus),
          ipam,
          events,
        }}
      />,
    )
  })
  app.get('/groups/:name/redrive', async (c) => {
    const group = await ops(c).getGroup(c.req.param('name'))
    const path = `${UI_PATH}/groups/${encodeURIComponent(group.name)}`
    return page(
      c,
      <ConfirmPage
        frame={frameOf(c)}
        title={`Re-drive group ${group.name}`}
        message={`Group ${group.name} is ${group.status.phase}. Re-driving applies its spec (version ${group.specVersion}) again: a Failed group starts a new attempt.`}
        action={`${path}/redrive`}
        button="Re-drive the group"
        back={path}
      />,
    )
  })
  app.post('/groups/:name/redrive', async (c) => {
    validate(ActionForm, await c.req.parseBody())
    const o = ops(c)
    const group = await o.getGroup(c.req.param('name'))
    const path = `${UI_PATH}/groups/${encodeURIComponent(group.name)}`
    if (group.status.phase !== 'Failed' || group.deletion) {
      throw new ApiError(
        409,
        'CONFLICT',
        `only a Failed group is re-driven; ${group.name} is ${group.status.phase}`,
      )
    }
    const accepted = await o.applyGroup(group.name, { ...group.spec })
    return done(
      c,
      accepted.jobId
        ? `Group ${group.name} re-driven: attempt ${accepted.object.status.attempt ?? 1} started (job ${accepted.jobId}).`
        : `Group ${group.name} needed nothing: it is ${accepted.object.status.phase}.`,
      path,
    )
  })

  // ── hosts ────────────────────────────────────────────────────────────────
  const hostPage = async (
    c: Context<Env>,
    trace?: TraceShown,
    status: 200 | 400 | 404 | 409 | 503 = 200,
  ) => {
    const o = ops(c)
    const name = c.req.param('name') ?? ''
    const host = await o.getHost(name)
    const events = await o.hostEvents(name)
    return page(
      c,
      <HostPage frame={frameOf(c)} host={host} events={events} {...(trace ? { trace } : {})} />,
      status,
    )
  }
  app.get('/hosts/:name', (c) => hostPage(c))
  app.get('/hosts/:name/trace', async (c) => {
    const shown = {
      to: c.req.query('to') ?? '',
      proto: c.req.query('proto') ?? 'icmp',
      port: c.req.query('port') ?? '',
    }
    // The form's fields as `GET /v1/trace` takes them (a blank port: none), checked as the
    // API checks them: a bad one is named in the page, as the API names it.
    const port = shown.port.trim()
    const query = {
      from: [c.req.param('name')],
      to: [shown.to.trim()],
      proto: [shown.proto],
      ...(port ? { port: [port] } : {}),
    }
    let answer: TraceAnswer
    try {
      answer = await traceAnswer(query, ops(c))
    } catch (error) {
      const answered = toJson(error instanceof Error ? error : new Error(String(error)), c)
      if (answered.status >= 500 && answered.status !== 503) throw error
      const { error: body } = (await answered.json()) as ErrorBody
      const fields = body.issues?.map((i) => `${i.path}: ${i.message}`).join('; ')
      return hostPage(
        c,
        { ...shown, error: `Not traced: ${fields ?? body.message}` },
        answered.status as 400 | 404 | 409 | 503,
      )
    }
    return hostPage(c, { ...shown, answer })
  })
  app.get('/hosts/:name/delete', async (c) => {
    const host = await ops(c).getHost(c.req.param('name'))
    const path = `${UI_PATH}/hosts/${encodeURIComponent(host.name)}`
    return page(
      c,
      <ConfirmPage
        frame={frameOf(c)}
        title={`Force-delete host ${host.name}`}
        message={`Host ${host.name} (group ${host.spec.resourceGroup}, DPU ${host.spec.dpu.id}) is ${host.status.phase}. A forced deletion detaches it without waiting for its DPU's agent to acknowledge: its port is removed from OVN and its addresses are released even if the DPU does not answer.`}
        action={`${path}/delete`}
        button="Force-delete the host"
        back={path}
        danger
        typeName={host.name}
      />,
    )
  })
  app.post('/hosts/:name/delete', async (c) => {
    const form = validate(ActionForm, await c.req.parseBody())
    const o = ops(c)
    const host = await o.getHost(c.req.param('name'))
    if (form.confirm !== host.name) {
      throw new ApiError(400, 'INVALID', `type the host's name, ${host.name}, to force-delete it`, [
        { path: 'confirm', message: `must be ${host.name}` },
      ])
    }
    const accepted = await o.deleteHost(host.name, true)
    return done(
      c,
      `Host ${host.name} is being force-deleted${accepted.jobId ? ` (job ${accepted.jobId})` : ''}.`,
      `${UI_PATH}/groups/${encodeURIComponent(host.spec.resourceGroup)}`,
    )
  })
  app.get('/hosts/:name/redrive', async (c) => {
    const host = await ops(c).getHost(c.req.param('name'))
    const path = `${UI_PATH}/hosts/${encodeURIComponent(host.name)}`
    return page(
      c,
      <ConfirmPage
        frame={frameOf(c)}
        title={`Re-drive host ${host.name}`}
        message={`Host ${host.name} is ${host.status.phase}. Re-driving applies its spec (version ${host.specVersion}) again: a Failed host starts a new attempt.`}
        action={`${path}/redrive`}
        button="Re-drive the host"
        back={path}
      />,
    )
  })
  app.post('/hosts/:name/redrive', async (c) => {
    validate(ActionForm, await c.req.parseBody())
    const o = ops(c)
    const host = await o.getHost(c.req.param('name'))
    const path = `${UI_PATH}/hosts/${encodeURIComponent(host.name)}`
    if (host.status.phase !== 'Failed' || host.deletion) {
      throw new ApiError(
        409,
        'CONFLICT',
        `only a Failed host is re-driven; ${host.name} is ${host.status.phase}`,
      )
    }
    const accepted = await o.applyHost(host.name, redriveSpec(host.spec))
    return done(
      c,
      accepted.jobId
        ? `Host ${host.name} re-driven: attempt ${accepted.object.status.attempt ?? 1} started (job ${accepted.jobId}).`
        : `Host ${host.name} needed nothing: it is ${accepted.object.status.phase}.`,
      path,
    )
  })

  // ── operators only: DPUs and the public IP pool ──────────────────────────
  app.get('/dpus', operatorOnly, async (c) => {
    const o = ops(c)
    const dpus = await bounded((p) => o.listDpus(p))
    return page(c, <DpusPage frame={frameOf(c)} dpus={dpus} />)
  })
  app.get('/dpus/:id', operatorOnly, async (c) => {
    const o = ops(c)
    const id = c.req.param('id')
    const [dpu, events] = await Promise.all([o.getDpu(id), o.dpuEvents(id)])
    return page(c, <DpuPage frame={frameOf(c)} dpu={dpu} events={events} />)
  })
  app.get('/public-ips', operatorOnly, async (c) => {
    const o = ops(c)
    const ips = await bounded((p) => o.listPublicIps(p))
    return page(c, <PublicIpsPage frame={frameOf(c)} ips={ips} />)
  })

  app.all('*', () => {
    throw new ApiError(404, 'NOT_FOUND', 'there is no such page')
  })
  return app
}
