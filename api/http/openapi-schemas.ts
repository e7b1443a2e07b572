/**
 * The schemas of the OpenAPI description (`openapi.ts`) that are not the model's, written
 * by hand: the error body (`ErrorBody`, `errors.ts`) and a dry run's `ChangePlan`
 * (`lib/model/plans.ts`). Both are TypeScript types that Hydrazine writes and never
 * parses, so there is no valibot schema to generate them from; `openapi.test.ts` checks
 * that each names the fields of its type. The model's schemas are generated
 * (`openapi-model.ts`).
 */

/** `components.schemas` beside the model's. */
export const schemas = {
  Error: {
    type: 'object',
    required: ['error'],
    properties: {
      error: {
        type: 'object',
        required: ['code', 'message'],
        properties: {
          code: { type: 'string' },
          message: { type: 'string' },
          issues: {
            type: 'array',
            items: {
              type: 'object',
              properties: { path: { type: 'string' }, message: { type: 'string' } },
            },
          },
        },
      },
    },
  },
  ChangePlan: {
    type: 'object',
    description:
      'what a request would change (`?dryRun=true`); nothing was stored, enqueued, allocated or written',
    required: ['dryRun', 'nb', 'frr', 'agentJobs', 'addresses', 'notes'],
    properties: {
      dryRun: { const: true },
      nb: {
        type: 'object',
        description: "NB rows by id (`<table>/<key>`) in the group's central (null: none running)",
        properties: {
          central: { type: ['string', 'null'] },
          insert: { type: 'array', items: { type: 'string' } },
          update: { type: 'array', items: { type: 'string' } },
          delete: { type: 'array', items: { type: 'string' } },
        },
      },
      frr: {
        type: 'object',
        properties: {
          announce: { type: 'array', items: { $ref: '#/components/schemas/PlannedPrefix' } },
          withdraw: { type: 'array', items: { $ref: '#/components/schemas/PlannedPrefix' } },
        },
      },
      agentJobs: {
        type: 'array',
        items: {
          type: 'object',
          properties: {
            dpu: { type: 'string' },
            job: { enum: ['configure', 'isolate'] },
            host: { type: 'string' },
          },
        },
      },
      addresses: {
        type: 'object',
        properties: {
          allocate: { type: 'array', items: { $ref: '#/components/schemas/PlannedAddress' } },
          release: { type: 'array', items: { $ref: '#/components/schemas/PlannedAddress' } },
        },
      },
      notes: { type: 'array', items: { type: 'string' } },
    },
  },
  PlannedPrefix: {
    type: 'object',
    properties: {
      prefix: { type: ['string', 'null'], description: 'null: taken from the pool at apply time' },
      nextHop: { type: 'string' },
    },
  },
  PlannedAddress: {
    type: 'object',
    properties: {
      pool: { enum: ['group', 'public'] },
      owner: { type: 'string' },
      ip: { type: ['string', 'null'], description: 'null: the pool has none free' },
    },
  },
} as const
