/**
 * The `/v1` routes: resource groups (and their address map, `GET …/{name}/ipam`),
 * managed resources, public IPs, DPUs and traces (`GET /v1/trace`, `trace.ts`).
 *
 * Writes go through the producer client, which validates before anything is stored or
 * enqueued: a write that changed the spec answers 202 `{object, jobId}`, an unchanged
 * one 200 `{object}`. Tenant tokens see only their own tenant's objects (others' are
 * 404) and the DPUs assigned to them; public IPs and DPU changes are for operators only.
 * Lists are paged: `?limit=` (default 500, at most 1000) and `?continue=` from the
 * previous answer's `continue`, absent on the last page (`api/pagination.ts`).
 */
import type { Context, MiddlewareHandler } from 'hono'
import { Hono } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import type { HydrazineClient } from '../../app/index.ts'
import { createOperations, createPlanOperations, type OperationsDeps } from '../../app/index.ts'
import type { Page, PageRequest } from '../../lib/state/pages.ts'
import { bearerAuthenticator } from '../auth.ts'
import { encodeContinue, type ListName, limitParam, pageRequest } from '../pagination.ts'
import { ApiError } from './errors.ts'
import type { Principal, Tokens } from './tokens.ts'
import { traceAnswer } from './trace.ts'

/** What the `/v1` routes need. */
export interface V1Deps {
  readonly client: OperationsDeps['client'] & Pick<HydrazineClient, 'plans'>
  readonly tokens: Tokens
}

export const MAX_BODY_BYTES = 64 * 1024

type Env = { Variables: { principal: Principal } }

/** Refuses a request without a known bearer token (401). */
export function bearerTokens(tokens: Tokens): MiddlewareHandler<Env> {
  const authenticate = bearerAuthenticator(tokens)
  return async function bearerTokenAuth(c, next) {
    const principal = authenticate(c.req.header('authorization'))
    if (!principal) {
      c.header('WWW-Authenticate', 'Bearer realm="hydrazine"')
      throw new ApiError(401, 'UNAUTHENTICATED', 'a valid bearer token is required')
    }
    c.set('principal', principal)
    await next()
  }
}

/** Refuses a request whose token is not an operator's (403); after `bearerTokens`. */
export const operatorOnly: MiddlewareHandler<Env> = async function operatorOnly(c, next) {
  if (c.get('principal').kind !== 'operator') {
    throw new ApiError(403, 'FORBIDDEN', 'only an operator token may do this')
  }
  await next()
}

/** A JSON object body, or 415 / 400. Checked before anything is read from the store. */
async function jsonObject(c: Context): Promise<Record<string, unknown>> {
  const type = (c.req.header('content-type') ?? '').split(';')[0]?.trim().toLowerCase() ?? ''
  if (type !== 'application/json' && !/^application\/[a-z0-9.+-]+\+json$/.test(type)) {
    throw new ApiError(415, 'UNSUPPORTED_MEDIA_TYPE', 'the body must be application/json')
  }
  let body: unknown
  try {
    body = JSON.parse(await c.req.text())
  } catch {
    throw new ApiError(400, 'INVALID', 'the body is not valid JSON', [
      { path: '(body)', message: 'must be valid JSON' },
    ])
  }
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new ApiError(400, 'INVALID', 'the body must be a JSON object', [
      { path: '(body)', message: 'must be a JSON object' },
    ])
  }
  return body as Record<string, unknown>
}

/** A yes/no query parameter (`true`/`1`, `false`/`0`, absent = no), or 400 naming it. */
function flag(c: Context, name: string): boolean {
  const raw = c.req.query(name)
  if (raw === undefined || raw === 'false' || raw === '0') return false
  if (raw === 'true' || raw === '1') return true
  throw new ApiError(400, 'INVALID', `${name} must be true or false`, [
    { path: name, message: 'must be true or false' },
  ])
}

/** Most events one request may ask for (and the default). */
export const MAX_EVENTS = 50

/** `?limit=`: an integer from 1 to MAX_EVENTS, or 400 naming the parameter. */
function eventLimit(raw: string | undefined): number {
  if (raw === undefined) return MAX_EVENTS
  const n = Number(raw)
  if (!/^\d+$/.test(raw) || n < 1 || n > MAX_EVENTS) {
    throw new ApiError(400, 'INVALID', `limit must be an integer from 1 to ${MAX_EVENTS}`, [
      { path: 'limit', message: `must be an integer from 1 to ${MAX_EVENTS}` },
    ])
  }
  return n
}

/** The page `?limit=` and `?continue=` ask for, or 400 naming the bad one. */
function pageAsked(c: Context, list: ListName): PageRequest {
  return pageRequest(list, limitParam(c.req.query('limit')), c.req.query('continue'), 'continue')
}

/** A page as a list answer: `{items, continue?}`. */
function paged<T>(list: ListName, page: Page<T>) {
  return page.next === undefined
    ? { items: page.items }
    : { items: page.items, continue: encodeContinue(list, page.next) }
}

function present<T>(o: { object: T; jobId?: string }) {
  return o.jobId === undefined ? { object: o.object } : { object: o.object, jobId: o.jobId }
}

export function v1Routes(deps: V1Deps): Hono<Env> {
  const app = new Hono<Env>()
  const operationsFor = createOperations(deps)
  const ops = (c: Context<Env>) => operationsFor(c.get('principal'))
  const planOperationsFor = createPlanOperations(deps)
  /** The dry-run operations when `?dryRun=true` (nothing changes), else undefined. */
  const dryRun = (c: Context<Env>) =>
    flag(c, 'dryRun') ? planOperationsFor(ops(c), c.get('principal')) : undefined

  app.use('*', bearerTokens(deps.tokens))
  app.use(
    '*',
    bodyLimit({
      maxSize: MAX_BODY_BYTES,
      onError: () => {
        throw new ApiError(413, 'TOO_LARGE', `the body must not exceed ${MAX_BODY_BYTES} bytes`)
      },
    }),
  )

  // ── resource groups ────────────────────────────────────────────────────────
  app.put('/resource-groups/:name', async (c) => {
    const body = await jsonObject(c)
    const plan = dryRun(c)
    if (plan) return c.json(await plan.applyGroup(c.req.param('name'), body))
    const accepted = await ops(c).applyGroup(c.req.param('name'), body)
    return c.json(present(accepted), accepted.jobId ? 202 : 200)
  })
  app.get('/resource-groups/:name/events', async (c) =>
    c.json({
      items: await ops(c).groupEvents(c.req.param('name'), eventLimit(c.req.query('limit'))),
    }),
  )
  app.get('/resource-groups/:name/ipam', async (c) =>
    c.json(await ops(c).groupIpam(c.req.param('name'))),
  )
  app.get('/resource-groups/:name', async (c) => c.json(await ops(c).getGroup(c.req.param('name'))))
  app.get('/resource-groups', async (c) => {
    const page = pageAsked(c, 'resource-groups')
    return c.json(
      paged('resource-groups', await ops(c).listGroups({ tenant: c.req.query('tenant') }, page)),
    )
  })
  app.delete('/resource-groups/:name', async (c) => {
    const plan = dryRun(c)
    if (plan) return c.json(await plan.deleteGroup(c.req.param('name')))
    const accepted = await ops(c).deleteGroup(c.req.param('name'), flag(c, 'force'))
    return c.json(present(accepted), 202)
  })

  // ── managed resources ──────────────────────────────────────────────────────
  app.put('/managed-resources/:name', async (c) => {
    const body = await jsonObject(c)
    const plan = dryRun(c)
    if (plan) return c.json(await plan.applyHost(c.req.param('name'), body))
    const accepted = await ops(c).applyHost(c.req.param('name'), body)
    return c.json(present(accepted), accepted.jobId ? 202 : 200)
  })
  app.get('/managed-resources/:name/events', async (c) =>
    c.json({
      items: await ops(c).hostEvents(c.req.param('name'), eventLimit(c.req.query('limit'))),
    }),
  )
  app.get('/managed-resources/:name', async (c) =>
    c.json(await ops(c).getHost(c.req.param('name'))),
  )
  app.get('/managed-resources', async (c) => {
    const page = pageAsked(c, 'managed-resources')
    const filter = { resourceGroup: c.req.query('resourceGroup') }
    return c.json(paged('managed-resources', await ops(c).listHosts(filter, page)))
  })
  app.delete('/managed-resources/:name', async (c) => {
    const plan = dryRun(c)
    if (plan) return c.json(await plan.deleteHost(c.req.param('name')))
    const accepted = await ops(c).deleteHost(c.req.param('name'), flag(c, 'force'))
    return c.json(present(accepted), 202)
  })

  // ── public IPs (operator) ──────────────────────────────────────────────────
  app.use('/public-ips/*', operatorOnly)
  app.use('/public-ips', operatorOnly)

  app.put('/public-ips/:ip', async (c) => {
    const plan = dryRun(c)
    if (plan) return c.json(await plan.publicIp(c.req.param('ip'), 'register'))
    const status = await ops(c).registerPublicIp(c.req.param('ip'))
    return c.json({ object: status })
  })
  app.get('/public-ips/:ip', async (c) => c.json(await ops(c).getPublicIp(c.req.param('ip'))))
  app.get('/public-ips', async (c) =>
    c.json(paged('public-ips', await ops(c).listPublicIps(pageAsked(c, 'public-ips')))),
  )
  app.delete('/public-ips/:ip', async (c) => {
    const plan = dryRun(c)
    if (plan) return c.json(await plan.publicIp(c.req.param('ip'), 'unregister'))
    await ops(c).unregisterPublicIp(c.req.param('ip'))
    return c.body(null, 204)
  })

  // ── trace: where a packet goes, by ovn-trace in the source group's central ──
  app.get('/trace', async (c) => c.json(await traceAnswer(c.req.queries(), ops(c))))

  // ── DPUs: the operator's inventory and what each agent reports ─────────────
  app.get('/dpus', async (c) => c.json(paged('dpus', await ops(c).listDpus(pageAsked(c, 'dpus')))))
  app.get('/dpus/:id/events', async (c) =>
    c.json({ items: await ops(c).dpuEvents(c.req.param('id'), eventLimit(c.req.query('limit'))) }),
  )
  app.get('/dpus/:id', async (c) => c.json(await ops(c).getDpu(c.req.param('id'))))
  app.put('/dpus/:id', operatorOnly, async (c) => {
    const body = await jsonObject(c)
    const { object, changed } = await ops(c).applyDpu(c.req.param('id'), body)
    return c.json({ object }, changed ? 201 : 200)
  })
  // The answer holds the secrets; it is the only place they appear (never in a log).
  app.post('/dpus/:id/credentials', operatorOnly, async (c) =>
    c.json(await ops(c).issueDpuCredentials(c.req.param('id')), 201),
  )
  app.delete('/dpus/:id', operatorOnly, async (c) => {
    await ops(c).deleteDpu(c.req.param('id'))
    return c.body(null, 204)
  })

  return app
}
