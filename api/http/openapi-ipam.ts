/**
 * `GET /v1/resource-groups/{name}/ipam` in the OpenAPI description (`openapi.ts`): the
 * group's address map, and the `NetworkUsage` schema (`lib/ipam/usage.ts` is the type
 * it describes).
 */
import { errors, json, ref } from './openapi-parts.ts'

const count = { type: 'integer', minimum: 0 }
const range = {
  type: 'object',
  required: ['start', 'end'],
  properties: { start: { type: 'string' }, end: { type: 'string' } },
}

export const ipamPath = {
  parameters: [{ name: 'name', in: 'path', required: true, schema: { type: 'string' } }],
  get: {
    description:
      "how the group's addresses are used (after Ganeti's network map): each subnet with its used, reserved and free counts, its pools, its reservations and a map of every address (`+` used, `X` reserved, `.` free, `-` in no pool); a tenant sees only its own groups (others' are 404)",
    responses: {
      '200': { description: 'the map', content: json(ref('NetworkUsage')) },
      ...errors(401, 404),
    },
  },
}

export const ipamSchemas = {
  NetworkUsage: {
    type: 'object',
    required: ['network', 'subnets', 'allocations'],
    properties: {
      network: { type: 'string' },
      subnets: {
        type: 'array',
        items: {
          type: 'object',
          required: ['cidr', 'dhcp', 'size', 'used', 'reserved', 'free', 'pools', 'external'],
          properties: {
            cidr: { type: 'string' },
            name: { type: 'string' },
            gateway: { type: 'string' },
            dhcp: { type: 'boolean' },
            size: {
              type: 'string',
              description: 'addresses in the subnet, in decimal (an IPv6 count exceeds 2^53)',
            },
            used: { ...count, description: 'held by a host or a DHCP relay' },
            reserved: {
              ...count,
              description:
                'not held and never handed out: network, broadcast, gateway, reservations',
            },
            free: { ...count, description: 'in a pool, neither held nor reserved' },
            pools: {
              type: 'array',
              items: {
                type: 'object',
                required: ['start', 'end', 'size', 'used', 'free'],
                properties: {
                  name: { type: 'string', description: '`default`: for hosts naming no pool' },
                  start: { type: 'string' },
                  end: { type: 'string' },
                  size: count,
                  used: count,
                  free: count,
                },
              },
            },
            external: { type: 'array', items: range, description: "the group's reservations" },
            mapFormat: {
              enum: ['address', 'runs'],
              description: `address: one character per address (subnets of up to 1024); runs: \`<character><count>\` per run, e.g. \`X1.253+2\``,
            },
            map: { type: 'string', examples: ['X++..XXX..X'] },
          },
        },
      },
      allocations: {
        type: 'array',
        items: {
          type: 'object',
          required: ['owner', 'ip'],
          properties: {
            owner: { type: 'string', description: 'a host, or `relay/<dpu>` for a DHCP relay' },
            ip: { type: 'string' },
          },
        },
      },
    },
  },
}
