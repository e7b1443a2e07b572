/**
 * The building blocks of the OpenAPI description (`openapi.ts`): schema references,
 * error and paging responses, and the paths every stored kind has alike (its list, its
 * object's PUT, GET and DELETE, its events).
 */

/** A reference to one of `components.schemas`. */
export const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` })
/** A JSON body of `schema`. */
export const json = (schema: object) => ({ 'application/json': { schema } })
/** The error responses of `codes`, each with the `Error` body. */
export const errors = (...codes: number[]) =>
  Object.fromEntries(
    codes.map((code) => [
      String(code),
      { description: ERROR_TEXT[code] ?? 'error', content: json(ref('Error')) },
    ]),
  )
const ERROR_TEXT: Record<number, string> = {
  400: 'invalid request; `issues` names every bad field',
  401: 'missing or unknown bearer token',
  403: "the token may not do this (FORBIDDEN), or a new object would pass its tenant's quota of groups, hosts or public IPs (QUOTA_EXCEEDED, naming the quota and its limit)",
  404: 'no such object (or not visible to this token)',
  409: 'conflicts with stored state',
  413: 'body over 64 KiB',
  415: 'body is not application/json',
  503: "a group's first host past the OVN centrals the site may run at once (CENTRALS_EXHAUSTED, naming HYDRAZINE_MAX_CENTRALS)",
}
const name = { name: 'name', in: 'path', required: true, schema: { type: 'string' } }
const force = { name: 'force', in: 'query', schema: { type: 'boolean' } }
/** `?dryRun=true` on PUT and DELETE: validated and planned (a `ChangePlan`), nothing changed. */
export const dryRun = {
  name: 'dryRun',
  in: 'query',
  description:
    'true: validate and answer 200 with the ChangePlan (NB rows, FRR prefixes, agent jobs, addresses) instead of changing anything',
  schema: { type: 'boolean' },
}
const accepted = (schema: string) => ({
  '202': {
    description: 'stored; `jobId` converges it',
    content: json({
      type: 'object',
      required: ['object', 'jobId'],
      properties: { object: ref(schema), jobId: { type: 'string' } },
    }),
  },
})
const unchanged = (schema: string) => ({
  '200': {
    description: 'the spec was already stored; nothing enqueued (with `dryRun`: the ChangePlan)',
    content: json({
      oneOf: [
        { type: 'object', required: ['object'], properties: { object: ref(schema) } },
        ref('ChangePlan'),
      ],
    }),
  },
})
/** The answer of a dry run. */
export const planned = {
  '200': { description: 'with `dryRun`: what would change', content: json(ref('ChangePlan')) },
}
/** `?limit=` and `?continue=` of every list (api/pagination.ts). */
export const pageParameters = [
  {
    name: 'limit',
    in: 'query',
    description: 'at most this many items (default 500)',
    schema: { type: 'integer', minimum: 1, maximum: 1000 },
  },
  {
    name: 'continue',
    in: 'query',
    description:
      "the previous page's `continue`: the next page starts after its last item (correct while objects change)",
    schema: { type: 'string' },
  },
]
/** One page of a list's answer. */
export const list = (schema: string, order = 'by name') => ({
  '200': {
    description: `one page of the visible objects, ${order}`,
    content: json({
      type: 'object',
      required: ['items'],
      properties: {
        items: { type: 'array', items: ref(schema) },
        continue: {
          type: 'string',
          description: 'an opaque token for the next page; absent on the last page',
        },
      },
    }),
  },
})

/** `GET …/events`: an object's recent history, newest first (at most `limit`, 50). */
export function eventsPath(id: object, description: string) {
  return {
    parameters: [
      id,
      { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 50 } },
    ],
    get: {
      description,
      responses: {
        '200': {
          description: 'its events',
          content: json({
            type: 'object',
            properties: {
              items: {
                type: 'array',
                items: {
                  type: 'object',
                  properties: {
                    at: { type: 'string', format: 'date-time' },
                    type: { enum: ['Normal', 'Warning'] },
                    reason: { type: 'string' },
                    message: { type: 'string' },
                  },
                },
              },
            },
          }),
        },
        ...errors(400, 401, 404),
      },
    },
  }
}

/**
 * The paths of a stored kind: its list, its object (PUT, GET, DELETE) and its events;
 * `descriptions`, what the kind's PUT and DELETE do beyond storing and deleting.
 */
export function objectPaths(
  path: string,
  object: string,
  spec: string,
  listQuery: string,
  descriptions: { readonly put?: string; readonly delete?: string } = {},
) {
  return {
    [`${path}/{name}/events`]: eventsPath(
      name,
      'its recent history, newest first: phase and condition changes, retries (Retrying, Stalled, RetriesExhausted) and reconcile repairs (Repaired)',
    ),
    [path]: {
      get: {
        parameters: [
          { name: listQuery, in: 'query', schema: { type: 'string' } },
          ...pageParameters,
        ],
        responses: { ...list(object), ...errors(400, 401) },
      },
    },
    [`${path}/{name}`]: {
      parameters: [name],
      put: {
        ...(descriptions.put ? { description: descriptions.put } : {}),
        parameters: [dryRun],
        requestBody: { required: true, content: json(ref(spec)) },
        responses: {
          ...unchanged(object),
          ...accepted(object),
          ...errors(400, 401, 403, 404, 409, 413, 415, 503),
        },
      },
      get: {
        responses: {
          '200': { description: 'the object', content: json(ref(object)) },
          ...errors(401, 404),
        },
      },
      delete: {
        ...(descriptions.delete ? { description: descriptions.delete } : {}),
        parameters: [force, dryRun],
        responses: { ...planned, ...accepted(object), ...errors(400, 401, 404, 409) },
      },
    },
  }
}
