/**
 * The `/v1` routes: resource groups, managed resources, public IPs and DPUs.
 *
 * Writes go through the producer client, which validates before anything is stored or
 * enqueued: a write that changed the spec answers 202 `{object, jobId}`, an unchanged
 * one 200 `{object}`. Tenant tokens see only their own tenant's objects (others' are
 * 404); public IPs and DPUs are for operators only.
 */
import type { Context, MiddlewareHandler } from 'hono'
import { Hono } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import type { Redis } from 'ioredis'
import * as v from 'valibot'
import { Heartbeat } from '../../lib/agent-protocol/index.ts'
import type { Ipam } from '../../lib/ipam/index.ts'
import type { ManagedResource, ResourceGroup } from '../../queues/objects.ts'
import { type HydrazineClient, NotFoundError } from '../../queues/producer.ts'
import type { StateStore } from '../../queues/store.ts'
import { ApiError } from './errors.ts'
import { createTokenLookup, type Principal, type Tokens } from './tokens.ts'

/** What the `/v1` routes need. */
export interface V1Deps {
  readonly client: Pick<
    HydrazineClient,
    | 'applyGroup'
    | 'deleteGroup'
    | 'applyHost'
    | 'deleteHost'
    | 'registerPublicIp'
    | 'unregisterPublicIp'
    | 'publicIp'
  >
  readonly store: Pick<StateStore, 'getGroup' | 'getHost' | 'listGroups' | 'listHosts'>
  readonly ipam: Pick<Ipam, 'listPublicIps'>
  /** The Redis the DPU agents write their heartbeats to. */
  readonly redis: Pick<Redis, 'scan' | 'mget'>
  readonly tokens: Tokens
}

export const MAX_BODY_BYTES = 64 * 1024

type Env = { Variables: { principal: Principal } }

/** Refuses a request without a known bearer token (401). */
export function bearerTokens(tokens: Tokens): MiddlewareHandler<Env> {
  const lookup = createTokenLookup(tokens)
  return async function bearerTokenAuth(c, next) {
    const header = c.req.header('authorization') ?? ''
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header)
    const principal = match?.[1] ? lookup(match[1]) : undefined
    if (!principal) {
      c.header('WWW-Authenticate', 'Bearer realm="hydrazine"')
      throw new ApiError(401, 'UNAUTHENTICATED', 'a valid bearer token is required')
    }
    c.set('principal', principal)
    await next()
  }
}

const operatorOnly: MiddlewareHandler<Env> = async function operatorOnly(c, next) {
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

const bool = (s: string | undefined) => s === 'true' || s === '1'

function present<T>(o: { object: T; jobId?: string }) {
  return o.jobId === undefined ? { object: o.object } : { object: o.object, jobId: o.jobId }
}

export function v1Routes(deps: V1Deps): Hono<Env> {
  const app = new Hono<Env>()
  const { client, store } = deps

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

  const tenantOf = (c: Context<Env>) => {
    const p = c.get('principal')
    return p.kind === 'tenant' ? p.tenant : undefined
  }

  /** The group as this caller may see it: undefined when missing or another tenant's. */
  const visibleGroup = async (c: Context<Env>, name: string) => {
    const group = await store.getGroup(name)
    const tenant = tenantOf(c)
    if (!group || (tenant !== undefined && group.spec.tenantId !== tenant)) return undefined
    return group
  }
  const visibleHost = async (c: Context<Env>, name: string) => {
    const host = await store.getHost(name)
    if (!host) return undefined
    if (tenantOf(c) !== undefined && !(await visibleGroup(c, host.spec.resourceGroup))) {
      return undefined
    }
    return host
  }

  // ── resource groups ────────────────────────────────────────────────────────
  app.put('/resource-groups/:name', async (c) => {
    const name = c.req.param('name')
    const body = await jsonObject(c)
    const tenant = tenantOf(c)
    if (tenant !== undefined) {
      if (typeof body.tenantId === 'string' && body.tenantId !== tenant) {
        throw new ApiError(403, 'FORBIDDEN', `a ${tenant} token cannot write for ${body.tenantId}`)
      }
      const existing = await store.getGroup(name)
      if (existing && existing.spec.tenantId !== tenant) {
        throw new NotFoundError('resource group', name)
      }
    }
    const accepted = await client.applyGroup(name, body)
    return c.json(present(accepted), accepted.jobId ? 202 : 200)
  })

  app.get('/resource-groups/:name', async (c) => {
    const name = c.req.param('name')
    const group = await visibleGroup(c, name)
    if (!group) throw new NotFoundError('resource group', name)
    return c.json(group)
  })

  app.get('/resource-groups', async (c) => {
    const tenant = tenantOf(c)
    const asked = c.req.query('tenant')
    if (tenant !== undefined && asked !== undefined && asked !== tenant) {
      return c.json({ items: [] as ResourceGroup[] })
    }
    const filter = tenant ?? asked
    return c.json({ items: await store.listGroups(filter ? { tenant: filter } : {}) })
  })

  app.delete('/resource-groups/:name', async (c) => {
    const name = c.req.param('name')
    if (!(await visibleGroup(c, name))) throw new NotFoundError('resource group', name)
    const accepted = await client.deleteGroup(name, { force: bool(c.req.query('force')) })
    return c.json(present(accepted), 202)
  })

  // ── managed resources ──────────────────────────────────────────────────────
  app.put('/managed-resources/:name', async (c) => {
    const name = c.req.param('name')
    const body = await jsonObject(c)
    if (tenantOf(c) !== undefined) {
      const existing = await store.getHost(name)
      if (existing && !(await visibleHost(c, name))) {
        throw new NotFoundError('managed resource', name)
      }
      // Another tenant's group looks exactly like one that does not exist.
      if (typeof body.resourceGroup === 'string' && !(await visibleGroup(c, body.resourceGroup))) {
        throw new ApiError(400, 'INVALID', `resource group ${body.resourceGroup} does not exist`, [
          {
            path: 'resourceGroup',
            message: `resource group ${body.resourceGroup} does not exist`,
          },
        ])
      }
    }
    const accepted = await client.applyHost(name, body)
    return c.json(present(accepted), accepted.jobId ? 202 : 200)
  })

  app.get('/managed-resources/:name', async (c) => {
    const name = c.req.param('name')
    const host = await visibleHost(c, name)
    if (!host) throw new NotFoundError('managed resource', name)
    return c.json(host)
  })

  app.get('/managed-resources', async (c) => {
    const group = c.req.query('resourceGroup')
    let hosts: ManagedResource[] = await store.listHosts(group ? { resourceGroup: group } : {})
    const tenant = tenantOf(c)
    if (tenant !== undefined) {
      const own = new Set((await store.listGroups({ tenant })).map((g) => g.name))
      hosts = hosts.filter((h) => own.has(h.spec.resourceGroup))
    }
    return c.json({ items: hosts })
  })

  app.delete('/managed-resources/:name', async (c) => {
    const name = c.req.param('name')
    if (!(await visibleHost(c, name))) throw new NotFoundError('managed resource', name)
    const accepted = await client.deleteHost(name, { force: bool(c.req.query('force')) })
    return c.json(present(accepted), 202)
  })

  // ── public IPs (operator) ──────────────────────────────────────────────────
  app.use('/public-ips/*', operatorOnly)
  app.use('/public-ips', operatorOnly)

  app.put('/public-ips/:ip', async (c) => {
    const ip = c.req.param('ip')
    const status = await client.registerPublicIp(ip)
    return c.json({ object: status })
  })
  app.get('/public-ips/:ip', async (c) => c.json(await client.publicIp(c.req.param('ip'))))
  app.get('/public-ips', async (c) => c.json({ items: await deps.ipam.listPublicIps() }))
  app.delete('/public-ips/:ip', async (c) => {
    await client.unregisterPublicIp(c.req.param('ip'))
    return c.body(null, 204)
  })

  // ── DPUs (operator) ────────────────────────────────────────────────────────
  app.get('/dpus', operatorOnly, async (c) => c.json({ items: await listDpus(deps.redis) }))

  return app
}

/** Every DPU whose agent has a live heartbeat (they expire after three intervals). */
async function listDpus(redis: Pick<Redis, 'scan' | 'mget'>) {
  const keys = new Set<string>()
  let cursor = '0'
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', 'hz:dpu:*:heartbeat', 'COUNT', 500)
    for (const k of batch) keys.add(k)
    cursor = next
  } while (cursor !== '0')
  if (keys.size === 0) return []
  const values = await redis.mget(...[...keys].sort())
  return values.flatMap((raw) => {
    if (raw === null) return []
    let json: unknown
    try {
      json = JSON.parse(raw)
    } catch {
      return []
    }
    const beat = v.safeParse(Heartbeat, json)
    if (!beat.success) return []
    const h = beat.output
    return [
      {
        id: h.dpuId,
        agentVersion: h.agentVersion,
        protocolVersions: h.protocolVersions,
        fabricIps: h.fabricIps,
        lastHeartbeat: h.at,
        heartbeatIntervalMs: h.intervalMs,
        observed: h.observed,
      },
    ]
  })
}
