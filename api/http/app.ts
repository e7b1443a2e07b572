import { type Context, Hono } from 'hono'
import { checkReadiness, type ReadinessProbes } from '../readiness.ts'
import { DASHBOARD_PATH, type DashboardDeps, dashboardRoutes } from './dashboard.ts'
import { errorHandler } from './errors.ts'
import { type EventsDeps, eventRoutes } from './events.ts'
import { openApiDocument } from './openapi.ts'
import { type RequestSeen, requestMetrics } from './request-metrics.ts'
import { UI_PATH } from './ui/route-kit.tsx'
import { type UiDeps, uiRoutes } from './ui/routes.tsx'
import { type V1Deps, v1Routes } from './v1.ts'

/** What the HTTP API needs from the rest of Hydrazine. */
export interface ApiDeps {
  /** Named readiness probes; `/readyz` is 200 only when every one resolves true. */
  readonly readiness: ReadinessProbes
  /** The `/v1` resource API; without it only the probes are served. */
  readonly v1?: V1Deps
  /** `POST /v1/events`, the signed Carbide webhook; without it the route does not exist. */
  readonly events?: EventsDeps
  /** The queue dashboard at `/admin/queues` (operators only); without it the route does not exist. */
  readonly dashboard?: DashboardDeps
  /** The admin web UI at `/ui/` (sign-in with a token); without it the routes do not exist. */
  readonly ui?: UiDeps
  /** Told of every answered request: method, matched route and status (the metrics). */
  readonly observeRequest?: (request: RequestSeen) => void
  /** Sees every error that became a 500. */
  readonly logError?: (error: unknown) => void
}

/**
 * Hydrazine's HTTP API.
 *
 * - `GET /healthz` — 200 while the process is up.
 * - `GET /readyz` — 200 when Redis and the OVN NB answer, else 503 naming what does not.
 * - `/v1/…` — resource groups, managed resources, public IPs, DPUs (see `v1.ts`);
 *   bearer token required.
 * - `GET /v1/openapi.json` — this API described as OpenAPI 3.1 (no token needed).
 * - `POST /v1/events` — Carbide webhook, authenticated by its HMAC signature (`events.ts`).
 * - `/admin/queues` — the queue dashboard (bull-board), operator token only (`dashboard.ts`).
 * - `/ui/…` — the admin web UI, signed in with a token (`ui/routes.tsx`); `GET /` and
 *   `GET /ui` redirect to `/ui/` when it is on.
 */
export function createApp(deps: ApiDeps): Hono {
  const app = new Hono()
  if (deps.observeRequest) app.use('*', requestMetrics(deps.observeRequest))
  app.onError(errorHandler(deps.logError))
  app.notFound((c) => c.json({ error: { code: 'NOT_FOUND', message: 'no such route' } }, 404))

  app.get('/healthz', (c) => c.json({ status: 'ok' }))

  app.get('/readyz', async (c) => {
    const { ready, checks } = await checkReadiness(deps.readiness)
    return c.json({ status: ready ? 'ready' : 'not ready', checks }, ready ? 200 : 503)
  })

  app.get('/v1/openapi.json', (c) => c.json(openApiDocument))
  // Before `/v1`: the webhook is authenticated by its signature, not a bearer token.
  if (deps.events) app.route('/v1/events', eventRoutes(deps.events))
  if (deps.v1) app.route('/v1', v1Routes(deps.v1))
  if (deps.dashboard) app.route(DASHBOARD_PATH, dashboardRoutes(deps.dashboard))
  if (deps.ui) {
    const toUi = (c: Context) => c.redirect(`${UI_PATH}/`, 302)
    app.get('/', toUi)
    app.get(UI_PATH, toUi)
    app.route(`${UI_PATH}/`, uiRoutes(deps.ui))
  }

  return app
}
