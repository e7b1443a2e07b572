/**
 * The OpenAPI 3.1 description served at `GET /v1/openapi.json`. Written by hand next to
 * the routes in `v1.ts` and `events.ts`; the test checks that every route it names
 * answers, so the two cannot drift silently. Field rules (patterns, limits) live in
 * `queues/objects.ts`; a 400 names each field that breaks them.
 */

const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` })
const json = (schema: object) => ({ 'application/json': { schema } })
const errors = (...codes: number[]) =>
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
}
const name = { name: 'name', in: 'path', required: true, schema: { type: 'string' } }
const force = { name: 'force', in: 'query', schema: { type: 'boolean' } }
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
    description: 'the spec was already stored; nothing enqueued',
    content: json({ type: 'object', required: ['object'], properties: { object: ref(schema) } }),
  },
})
/** `?limit=` and `?continue=` of every list (api/pagination.ts). */
const pageParameters = [
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
const list = (schema: string, order = 'by name') => ({
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
function eventsPath(id: object, description: string) {
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

function objectPaths(path: string, object: string, spec: string, listQuery: string) {
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
        requestBody: { required: true, content: json(ref(spec)) },
        responses: {
          ...unchanged(object),
          ...accepted(object),
          ...errors(400, 401, 403, 404, 409, 413, 415),
        },
      },
      get: {
        responses: {
          '200': { description: 'the object', content: json(ref(object)) },
          ...errors(401, 404),
        },
      },
      delete: {
        parameters: [force],
        responses: { ...accepted(object), ...errors(401, 404, 409) },
      },
    },
  }
}

const stored = (spec: string) => ({
  type: 'object',
  required: ['name', 'spec', 'specVersion', 'status'],
  properties: {
    name: { type: 'string' },
    spec: ref(spec),
    specVersion: { type: 'integer' },
    status: {
      type: 'object',
      properties: {
        phase: { type: 'string' },
        conditions: { type: 'array', items: { type: 'object' } },
        configsSynced: { type: 'boolean' },
        observedVersion: { type: 'integer' },
      },
    },
    deletion: {
      type: 'object',
      properties: { requestedAt: { type: 'string' }, force: { type: 'boolean' } },
    },
  },
})

const cidr = { type: 'string', examples: ['10.0.0.0/24'] }
const ip = { type: 'string', examples: ['10.0.0.1'] }

export const openApiDocument = {
  openapi: '3.1.0',
  info: { title: 'Hydrazine', version: '1' },
  servers: [{ url: '/' }],
  security: [{ bearer: [] }],
  paths: {
    ...objectPaths('/v1/resource-groups', 'ResourceGroup', 'ResourceGroupSpec', 'tenant'),
    ...objectPaths(
      '/v1/managed-resources',
      'ManagedResource',
      'ManagedResourceSpec',
      'resourceGroup',
    ),
    '/v1/public-ips': {
      get: {
        description: 'operator only',
        parameters: pageParameters,
        responses: { ...list('PublicIp', 'in address order'), ...errors(400, 401, 403) },
      },
    },
    '/v1/public-ips/{ip}': {
      parameters: [{ name: 'ip', in: 'path', required: true, schema: { type: 'string' } }],
      put: {
        description: 'registers the address in the pool (idempotent); operator only',
        responses: {
          '200': {
            description: 'registered',
            content: json({ type: 'object', properties: { object: ref('PublicIp') } }),
          },
          ...errors(400, 401, 403),
        },
      },
      get: {
        responses: {
          '200': { description: 'the address', content: json(ref('PublicIp')) },
          ...errors(401, 403, 404),
        },
      },
      delete: { responses: { '204': { description: 'removed' }, ...errors(401, 403, 404, 409) } },
    },
    '/v1/dpus': {
      get: {
        description:
          "every DPU the system has seen: the operator's inventory with each DPU's heartbeat state and its agent's last report (and, for operators, DPUs whose agents reported before they were added to it, silent ones included); a tenant sees the DPUs assigned to it",
        parameters: pageParameters,
        responses: { ...list('Dpu', 'by id'), ...errors(400, 401) },
      },
    },
    '/v1/dpus/{id}': {
      parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
      put: {
        description:
          'adds or changes a DPU in the inventory; operator only. Its fabric IPs and tenant change only while it serves no host; a host port in use cannot be removed (409).',
        requestBody: { required: true, content: json(ref('DpuSpec')) },
        responses: {
          '200': {
            description: 'unchanged',
            content: json({ type: 'object', properties: { object: ref('Dpu') } }),
          },
          '201': {
            description: 'stored',
            content: json({ type: 'object', properties: { object: ref('Dpu') } }),
          },
          ...errors(400, 401, 403, 409),
        },
      },
      get: {
        responses: {
          '200': { description: 'the DPU', content: json(ref('Dpu')) },
          ...errors(401, 404),
        },
      },
      delete: {
        description: 'operator only; refused (409) while the DPU serves a host',
        responses: { '204': { description: 'removed' }, ...errors(401, 403, 404, 409) },
      },
    },
    '/v1/dpus/{id}/events': eventsPath(
      { name: 'id', in: 'path', required: true, schema: { type: 'string' } },
      "the DPU's recent history, newest first: its heartbeat's state changes (HeartbeatStarted, HeartbeatStale, HeartbeatLost, HeartbeatResumed) and the repairs made from its reports (PortLost, StrayPortIsolated)",
    ),
    '/v1/dpus/{id}/credentials': {
      parameters: [{ name: 'id', in: 'path', required: true, schema: { type: 'string' } }],
      post: {
        description:
          "operator only: new credentials for the DPU's agent — a Redis user confined by ACL to its own queue and heartbeat, and its certificate (CN = the DPU id) when Hydrazine runs a PKI. The old ones stop working; this answer is the only place the secrets appear.",
        responses: {
          '201': {
            description: 'issued',
            content: json({
              type: 'object',
              properties: {
                dpuId: { type: 'string' },
                redis: {
                  type: 'object',
                  properties: {
                    username: { type: 'string' },
                    password: { type: 'string' },
                    persisted: { type: 'boolean' },
                  },
                },
                tls: {
                  type: 'object',
                  properties: {
                    cert: { type: 'string' },
                    key: { type: 'string' },
                    ca: { type: 'string' },
                  },
                },
              },
            }),
          },
          ...errors(401, 403, 404, 409),
        },
      },
    },
    '/v1/events': {
      post: {
        description:
          'Carbide webhook. Authenticated by X-Hydrazine-Signature (sha256=<hex HMAC-SHA256 of "<X-Hydrazine-Timestamp>.<raw body>">) and X-Hydrazine-Timestamp (unix seconds, ±5 min); event ids are deduplicated.',
        security: [],
        parameters: [
          {
            name: 'X-Hydrazine-Signature',
            in: 'header',
            required: true,
            schema: { type: 'string' },
          },
          {
            name: 'X-Hydrazine-Timestamp',
            in: 'header',
            required: true,
            schema: { type: 'string' },
          },
        ],
        requestBody: { required: true, content: json(ref('CarbideEvent')) },
        responses: {
          '200': { description: 'a duplicate, or nothing changed' },
          '202': { description: 'accepted; a job converges it' },
          ...errors(400, 401, 403, 404, 409, 413),
        },
      },
    },
    '/v1/openapi.json': {
      get: { security: [], responses: { '200': { description: 'this document' } } },
    },
  },
  components: {
    securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
    schemas: {
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
      ResourceGroupSpec: {
        type: 'object',
        required: ['tenantId', 'network'],
        additionalProperties: false,
        properties: {
          tenantId: { type: 'string' },
          network: {
            type: 'object',
            required: ['cidr', 'gateway'],
            properties: { cidr, gateway: ip },
          },
          extraSubnets: {
            type: 'array',
            maxItems: 16,
            items: {
              type: 'object',
              required: ['cidr'],
              properties: { cidr, gateway: ip, dhcp: { type: 'boolean' } },
            },
          },
          dhcpServer: ip,
          implementation: { enum: ['SharedCentral'] },
        },
      },
      ManagedResourceSpec: {
        type: 'object',
        required: ['resourceGroup', 'hostMAC', 'dpu'],
        additionalProperties: false,
        properties: {
          resourceGroup: { type: 'string' },
          type: { enum: ['BareMetal'] },
          hostMAC: { type: 'string', examples: ['52:54:00:12:34:56'] },
          hostIP: ip,
          dpu: {
            type: 'object',
            required: ['id'],
            properties: {
              id: { type: 'string', description: 'a DPU of the inventory assigned to the tenant' },
              ips: {
                type: 'array',
                minItems: 1,
                maxItems: 2,
                items: ip,
                description:
                  'operators only: [encapIp, natIp?]; a DPU missing from the inventory is added with them',
              },
            },
          },
          hostAccess: { enum: ['None', 'FabricAccess', 'PublicAccess'] },
          identifier: {
            type: 'string',
            maxLength: 15,
            description: "one of the DPU's host ports; may be left out when it has exactly one",
          },
        },
      },
      ResourceGroup: stored('ResourceGroupSpec'),
      ManagedResource: stored('ManagedResourceSpec'),
      PublicIp: {
        type: 'object',
        properties: { ip, allocated: { type: 'boolean' }, allocatedTo: { type: 'string' } },
      },
      DpuSpec: {
        type: 'object',
        required: ['fabricIps'],
        additionalProperties: false,
        properties: {
          tenantId: { type: 'string', description: 'the tenant whose hosts may use it' },
          fabricIps: {
            type: 'array',
            minItems: 1,
            maxItems: 2,
            items: ip,
            description: '[encapIp, natIp?]',
          },
          hostPorts: { type: 'array', maxItems: 256, items: { type: 'string', maxLength: 15 } },
        },
      },
      Dpu: {
        type: 'object',
        required: ['id', 'state', 'hosts'],
        properties: {
          id: { type: 'string' },
          spec: ref('DpuSpec'),
          specVersion: { type: 'integer' },
          state: {
            enum: ['Online', 'Stale', 'Lost', 'Unknown'],
            description:
              "from the age of its newest heartbeat, in the beat's own interval: Online under 1.5 intervals, Stale under 2, Lost after (its hosts then carry DpuHealthy=False HeartbeatLost); Unknown when its agent was never heard from",
          },
          lastHeartbeat: {
            type: 'string',
            format: 'date-time',
            description: 'when its agent last beat; kept after it went silent',
          },
          hosts: { type: 'array', items: { type: 'string' } },
          agent: {
            type: 'object',
            properties: {
              version: { type: 'string' },
              protocolVersions: { type: 'array', items: { type: 'string' } },
              lastHeartbeat: { type: 'string', format: 'date-time' },
              heartbeatIntervalMs: { type: 'integer' },
              observed: { type: 'object' },
            },
          },
        },
      },
      CarbideEvent: {
        type: 'object',
        required: ['type', 'id', 'name', 'generation'],
        properties: {
          type: {
            enum: [
              'resource-group.applied',
              'resource-group.deleted',
              'managed-resource.applied',
              'managed-resource.deleted',
              'dpu.applied',
              'dpu.deleted',
            ],
          },
          id: { type: 'string' },
          name: { type: 'string' },
          generation: {
            type: 'integer',
            minimum: 1,
            description:
              "the object's event number, rising with each change; an event older than the newest applied for its object is refused (409 STALE)",
          },
          spec: { type: 'object', description: 'for *.applied' },
          force: { type: 'boolean', description: 'for *.deleted' },
        },
      },
    },
  },
} as const
