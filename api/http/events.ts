/**
 * `POST /v1/events`: the Carbide webhook receiver. Carbide signs each delivery instead
 * of sending a bearer token:
 *
 * - `X-Hydrazine-Signature: sha256=<hex>` — HMAC-SHA256 of `<timestamp>.<raw body>` with the
 *   shared secret;
 * - `X-Hydrazine-Timestamp: <unix seconds>` — refused when more than 5 minutes off;
 * - the event `id` is remembered for a day, so a redelivery does nothing twice;
 * - `generation` numbers each object's events (Carbide's own version of it, rising with
 *   every change): an event older than the newest one applied for its object (a retried
 *   `applied` arriving after the `deleted` that followed it) is answered 409 `STALE` and
 *   changes nothing.
 *
 * An event becomes the same producer call as the matching REST request (made as an
 * operator: Carbide also keeps the DPU inventory, `dpu.applied` / `dpu.deleted`).
 *
 * @example
 * { "type": "resource-group.applied", "id": "evt-1", "name": "group-a", "generation": 1,
 *   "spec": { "tenantId": "tenant-a", "network": { "cidr": "10.0.0.0/24", "gateway": "10.0.0.1" } } }
 */
import { createHmac, timingSafeEqual } from 'node:crypto'
import { Hono } from 'hono'
import { bodyLimit } from 'hono/body-limit'
import * as v from 'valibot'
import type { HydrazineClient } from '../../app/index.ts'
import type { EventObjectKind } from '../../lib/state/generations.ts'
import { ApiError } from './errors.ts'

export interface EventsDeps {
  /** The secret shared with Carbide; at least 32 characters. */
  readonly secret: string
  readonly client: Pick<
    HydrazineClient,
    | 'applyGroup'
    | 'deleteGroup'
    | 'applyHost'
    | 'deleteHost'
    | 'rememberDelivery'
    | 'forgetDelivery'
    | 'lastEventGeneration'
    | 'recordEventGeneration'
    | 'applyDpu'
    | 'deleteDpu'
  >
  /** Milliseconds since the epoch; tests move it. */
  readonly now?: () => number
}

export const MAX_CLOCK_SKEW_S = 5 * 60
/** How long an event id is remembered; far longer than the accepted clock skew. */
export const SEEN_TTL_S = 24 * 3600
const MAX_EVENT_BYTES = 64 * 1024

const Id = v.pipe(v.string(), v.minLength(1), v.maxLength(200))
const Name = v.pipe(v.string(), v.minLength(1), v.maxLength(63))
const Generation = v.pipe(
  v.number(),
  v.integer('must be an integer'),
  v.minValue(1, 'must be at least 1'),
  v.maxValue(Number.MAX_SAFE_INTEGER, 'is too large'),
  v.description(
    "the object's event number, rising with each change; an event older than the newest applied for its object is refused (409 STALE)",
  ),
)

export const CarbideEvent = v.variant('type', [
  v.object({
    type: v.picklist(['resource-group.applied', 'managed-resource.applied', 'dpu.applied']),
    id: Id,
    name: Name,
    generation: Generation,
    spec: v.pipe(
      v.record(v.string(), v.unknown()),
      v.description("the object's spec, as its PUT takes it"),
    ),
  }),
  v.object({
    type: v.picklist(['resource-group.deleted', 'managed-resource.deleted', 'dpu.deleted']),
    id: Id,
    name: Name,
    generation: Generation,
    force: v.optional(v.boolean()),
  }),
])
export type CarbideEvent = v.InferOutput<typeof CarbideEvent>

/**
 * The HMAC a sender puts in `X-Hydrazine-Signature`: over `<timestamp>.<body>`, so that a
 * captured delivery cannot be sent again later under a fresh `X-Hydrazine-Timestamp`.
 *
 * @example signEvent(secret, '1795300000', '{"type":"resource-group.deleted",…}')
 */
export function signEvent(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex')}`
}

export function eventRoutes(deps: EventsDeps): Hono {
  if (deps.secret.length < 32) throw new Error('the events secret must have at least 32 characters')
  const now = deps.now ?? Date.now
  const app = new Hono()

  app.post(
    '/',
    bodyLimit({
      maxSize: MAX_EVENT_BYTES,
      onError: () => {
        throw new ApiError(413, 'TOO_LARGE', `an event must not exceed ${MAX_EVENT_BYTES} bytes`)
      },
    }),
    async function receiveEvent(c) {
      const raw = await c.req.text()
      const timestamp = c.req.header('x-hydrazine-timestamp') ?? ''
      const stamp = /^\d{1,12}$/.test(timestamp) ? Number(timestamp) : Number.NaN
      if (!Number.isFinite(stamp) || Math.abs(now() / 1000 - stamp) > MAX_CLOCK_SKEW_S) {
        throw new ApiError(
          401,
          'STALE_EVENT',
          `X-Hydrazine-Timestamp must be unix seconds within ${MAX_CLOCK_SKEW_S}s of now`,
        )
      }
      const expected = Buffer.from(signEvent(deps.secret, timestamp, raw))
      const given = Buffer.from(c.req.header('x-hydrazine-signature') ?? '')
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
        throw new ApiError(
          401,
          'BAD_SIGNATURE',
          'X-Hydrazine-Signature does not match the timestamp and body',
        )
      }
      let json: unknown
      try {
        json = JSON.parse(raw)
      } catch {
        throw new ApiError(400, 'INVALID', 'the event is not valid JSON')
      }
      const parsed = v.safeParse(CarbideEvent, json)
      if (!parsed.success) {
        throw new ApiError(
          400,
          'INVALID',
          'invalid event',
          parsed.issues.map((i) => ({ path: v.getDotPath(i) ?? '(body)', message: i.message })),
        )
      }
      const event = parsed.output
      if (!(await deps.client.rememberDelivery(event.id, SEEN_TTL_S))) {
        return c.json({ duplicate: true, id: event.id }, 200)
      }
      const kind = kindOf(event)
      try {
        const last = await deps.client.lastEventGeneration(kind, event.name)
        if (event.generation < last) {
          throw new ApiError(
            409,
            'STALE',
            `${kind} ${event.name}: generation ${event.generation} is older than ${last}, already applied`,
            [{ path: 'generation', message: `must not be older than ${last}` }],
          )
        }
        const accepted = await apply(deps.client, event)
        await deps.client.recordEventGeneration(kind, event.name, event.generation)
        const result =
          accepted.jobId === undefined
            ? { id: event.id, object: accepted.object }
            : { id: event.id, object: accepted.object, jobId: accepted.jobId }
        return c.json(result, accepted.jobId ? 202 : 200)
      } catch (error) {
        // Forget the id so that a corrected or retried delivery is processed.
        await deps.client.forgetDelivery(event.id)
        throw error
      }
    },
  )
  return app
}

/** The kind of object an event is about: its type up to the dot. */
function kindOf(event: CarbideEvent): EventObjectKind {
  const [kind] = event.type.split('.') as [EventObjectKind]
  return kind
}

/**
 * The producer call an event stands for. Carbide is trusted as an operator is: its DPU
 * events feed the inventory.
 */
async function apply(
  client: EventsDeps['client'],
  event: CarbideEvent,
): Promise<{ object: unknown; jobId?: string }> {
  switch (event.type) {
    case 'resource-group.applied':
      return client.applyGroup(event.name, event.spec)
    case 'managed-resource.applied':
      return client.applyHost(event.name, event.spec)
    case 'resource-group.deleted':
      return client.deleteGroup(event.name, { force: event.force ?? false })
    case 'managed-resource.deleted':
      return client.deleteHost(event.name, { force: event.force ?? false })
    case 'dpu.applied':
      return { object: (await client.applyDpu(event.name, event.spec)).object }
    case 'dpu.deleted':
      await client.deleteDpu(event.name)
      return { object: { id: event.name, deleted: true } }
  }
}
