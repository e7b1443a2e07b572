/**
 * The OpenAPI 3.1 description served at `GET /v1/openapi.json`. Its paths are written by
 * hand next to the routes in `v1.ts` and `events.ts`; the test checks that every route it
 * names answers, so the two cannot drift silently. Its shared pieces are in
 * `openapi-parts.ts`, the trace route's in `openapi-trace.ts`, the address map's in
 * `openapi-ipam.ts`. The schemas of the model (specs, statuses, the webhook's event) are
 * generated from its valibot schemas (`openapi-model.ts`), the few others written in
 * `openapi-schemas.ts`. Field rules (patterns, limits) live in `lib/model/objects.ts`; a
 * 400 names each field that breaks them.
 */

import { ipamPath, ipamSchemas } from './openapi-ipam.ts'
import { modelSchemas } from './openapi-model.ts'
import {
  dryRun,
  errors,
  eventsPath,
  json,
  list,
  objectPaths,
  pageParameters,
  planned,
  ref,
} from './openapi-parts.ts'
import { schemas } from './openapi-schemas.ts'
import { tracePath, traceSchemas } from './openapi-trace.ts'

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
      {
        put: "stores the host and each of its interfaces as a ManagedResource of its own (`<host>-<name>`, naming the host in interfaceOf); an interface the spec no longer lists is deleted. An interface's own ManagedResource is changed only through its host (409 otherwise); an interface whose `<host>-<name>` is another ManagedResource is refused (409)",
        delete:
          "deletes the host and each of its interfaces' own ManagedResources; an interface's own ManagedResource is deleted only through its host (409 otherwise)",
      },
    ),
    '/v1/public-ips': {
      get: {
        description: 'operator only',
        parameters: pageParameters,
        responses: {
          ...list('PublicIp', 'IPv4 addresses first, then IPv6 ones, each in address order'),
          ...errors(400, 401, 403),
        },
      },
    },
    '/v1/public-ips/{ip}': {
      parameters: [
        {
          name: 'ip',
          in: 'path',
          required: true,
          description:
            'an IPv4 or IPv6 address, any spelling (`2001:DB8:FF:0::5` is `2001:db8:ff::5`)',
          schema: { type: 'string' },
        },
      ],
      put: {
        description:
          "registers the address in its family's pool (idempotent), in canonical form; operator only. Loopback, link-local, multicast, reserved, IPv4-mapped and the transit ranges (169.254.0.0/16, fd00:a9fe::/64) are refused (400)",
        parameters: [dryRun],
        responses: {
          '200': {
            description: 'registered (with `dryRun`: the ChangePlan)',
            content: json({
              oneOf: [
                { type: 'object', properties: { object: ref('PublicIp') } },
                ref('ChangePlan'),
              ],
            }),
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
      delete: {
        parameters: [dryRun],
        responses: {
          ...planned,
          '204': { description: 'removed' },
          ...errors(400, 401, 403, 404, 409),
        },
      },
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
          'adds or changes a DPU in the inventory; operator only. Its fabric IPs and IPv6 NAT address (natIp6) are unique among DPUs (409); they and its tenant change only while it serves no host; a host port in use cannot be removed (409).',
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
                    cert: {
                      type: 'string',
                      description: "the DPU's identity (PEM), for clients only (clientAuth)",
                    },
                    serverCert: {
                      type: 'string',
                      description:
                        "the agent's server certificate (PEM) for its gRPC and metrics (serverAuth), same key",
                    },
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
    '/v1/resource-groups/{name}/ipam': ipamPath,
    '/v1/trace': tracePath,
    '/v1/openapi.json': {
      get: { security: [], responses: { '200': { description: 'this document' } } },
    },
  },
  components: {
    securitySchemes: { bearer: { type: 'http', scheme: 'bearer' } },
    schemas: { ...modelSchemas, ...schemas, ...traceSchemas, ...ipamSchemas },
  },
} as const
