/**
 * The schemas of the OpenAPI description (`openapi.ts`): the error body, each kind's spec
 * and stored object, and the Carbide webhook event. Field rules (patterns, limits) live
 * in `lib/state/objects.ts`; a 400 names each field that breaks them.
 */
import { MAX_HOST_INTERFACES } from '../../lib/state/objects.ts'
import { ref } from './openapi-parts.ts'
import { policies } from './openapi-policies.ts'

/**
 * A stored object: its spec, the spec's version, status and deletion mark; its status
 * lists the fields every kind reports and `status`, the kind's own.
 */
const stored = <S extends object>(spec: string, status: S) => ({
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
        ...status,
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
const ip6 = { type: 'string', format: 'ipv6', examples: ['fd00:fab::105'] }

/** A host's addresses (`status.hostAccessIPs`): in its group, on the fabric and public. */
const hostAccessIPs = {
  type: 'object',
  properties: {
    hostIP: { ...ip, description: "its address in the group's network" },
    hostIPv6: {
      ...ip6,
      examples: ['fd00:10::800:ff:fe00:d11'],
      description: "in a dual-stack group: its SLAAC address in the group's network6",
    },
    fabricIP: { ...ip, description: "where the fabric reaches it: its DPU's NAT IP" },
    fabricIPv6: {
      ...ip6,
      description:
        "where the fabric reaches it over IPv6: its DPU's IPv6 NAT address (natIp6, NAT66)",
    },
    publicIP: { ...ip, description: 'a PublicAccess host: its public IP, announced as a /32' },
    publicIPv6: {
      ...ip6,
      examples: ['2001:db8:ff::5'],
      description: 'a PublicAccess host: its public IPv6 address, announced as a /128',
    },
  },
}

/**
 * What a host asks for its own port, and each of its interfaces for its own
 * (`ManagedResourceSpec`, `HostInterface`).
 */
const port = {
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
      natIp6: {
        ...ip6,
        description:
          "the DPU's IPv6 NAT address, filled in from the inventory (its natIp6) when it has one; a request may give it (operators, like ips): it must agree with the inventory",
      },
    },
  },
  hostAccess: { enum: ['None', 'FabricAccess', 'PublicAccess'] },
  identifier: {
    type: 'string',
    maxLength: 15,
    description: "one of the DPU's host ports; may be left out when it has exactly one",
  },
  hostname: {
    type: 'string',
    maxLength: 63,
    pattern: '^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$',
    description:
      "the host's name in its group's DNS (`<hostname>.<group>.<zone>`), unique in the group (409 otherwise); default the host's own name",
  },
  pool: {
    type: 'string',
    maxLength: 63,
    description:
      "a named pool of the group (its `pools`) the host's address comes from; default `default`. Not with hostIP",
  },
} as const

/** `components.schemas`. */
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
  ResourceGroupSpec: {
    type: 'object',
    required: ['tenantId'],
    additionalProperties: false,
    properties: {
      tenantId: { type: 'string' },
      network: {
        type: 'object',
        required: ['cidr', 'gateway'],
        description:
          'the IPv4 network (immutable); required unless the group is IPv6 only (network6 alone)',
        properties: { cidr, gateway: ip },
      },
      network6: {
        type: 'object',
        required: ['cidr', 'gateway'],
        description:
          "dual-stack: the group's IPv6 network, a /64 its router advertises (SLAAC); every host also takes its SLAAC address there (its MAC's EUI-64 identifier), shown as status.hostAccessIPs.hostIPv6. No pool may lie in it, no hostIP either",
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
      policies,
      dns: {
        type: 'object',
        additionalProperties: false,
        description:
          "the group's DNS: each host resolves as `<hostname>.<group>.<zone>` (the operator's HYDRAZINE_DNS_ZONE) inside the group only, answered by OVN for queries sent through the group's network (e.g. to its gateway)",
        properties: { enabled: { type: 'boolean', default: true } },
      },
      pools: {
        type: 'array',
        maxItems: 32,
        description:
          "named pools inside the group's subnets: a host naming one (`pool`) gets its address there; hosts naming none share each subnet's `default` pool (its usable range minus the named pools). Entries may share a name (one pool, several ranges); pools never overlap",
        items: {
          type: 'object',
          required: ['name', 'start', 'end'],
          additionalProperties: false,
          properties: {
            name: { type: 'string', maxLength: 63, not: { const: 'default' } },
            start: ip,
            end: ip,
          },
        },
      },
      reservations: {
        type: 'array',
        maxItems: 64,
        description:
          "addresses IPAM never hands out (a DC's routers): one (`start`) or a range, inside one of the group's subnets; a host may not ask for one as its hostIP (400). Reserving an address a host already holds is allowed: it stays the host's",
        items: {
          type: 'object',
          required: ['start'],
          additionalProperties: false,
          properties: { start: ip, end: ip },
        },
      },
    },
  },
  ManagedResourceSpec: {
    type: 'object',
    required: ['resourceGroup', 'hostMAC', 'dpu'],
    additionalProperties: false,
    properties: {
      ...port,
      interfaces: {
        type: 'array',
        maxItems: MAX_HOST_INTERFACES,
        description:
          "the host's other ports (a second NIC, a VF), names unique, each MAC its own (none the host's). Each is kept as a ManagedResource of its own, `<host>-<name>`, with its own status (its dpu filled in from the inventory there); it is changed and deleted only through this host, and deleted when the host's spec no longer lists it",
        items: ref('HostInterface'),
      },
      interfaceOf: {
        type: 'string',
        readOnly: true,
        description:
          "output only, set on an interface's own ManagedResource (`<host>-<name>`): the host it is an interface of",
      },
    },
  },
  HostInterface: {
    type: 'object',
    required: ['name', 'resourceGroup', 'hostMAC', 'dpu'],
    additionalProperties: false,
    description:
      "another port of a host: the fields of the host's own port, and a name; it may join another group, through another DPU",
    properties: {
      name: {
        type: 'string',
        maxLength: 15,
        pattern: '^[a-z0-9]([a-z0-9-]{0,13}[a-z0-9])?$',
        description:
          "unique among the host's interfaces; its own ManagedResource is `<host>-<name>` (at most 63 characters in all)",
      },
      ...port,
      hostMAC: { ...port.hostMAC, examples: ['52:54:00:12:34:57'] },
      hostname: {
        ...port.hostname,
        description:
          "its name in its group's DNS, unique in the group (409 otherwise); default its own ManagedResource's name (`<host>-<name>`)",
      },
    },
  },
  ResourceGroup: stored('ResourceGroupSpec', {}),
  ManagedResource: stored('ManagedResourceSpec', { hostAccessIPs }),
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
  PublicIp: {
    type: 'object',
    properties: {
      ip: {
        type: 'string',
        examples: ['203.0.113.10', '2001:db8:ff::5'],
        description:
          'IPv4 (announced as a /32) or IPv6 (a /128), in canonical form; each family is a pool of its own',
      },
      allocated: { type: 'boolean' },
      allocatedTo: { type: 'string' },
    },
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
      natIp6: {
        ...ip6,
        description:
          "the DPU's IPv6 NAT address on the fabric (stored canonical; needs the controller's HYDRAZINE_FABRIC_DUMMY_IP6): its hosts' IPv6 leaves as it (NAT66), a FabricAccess host is reached at it (status.hostAccessIPs.fabricIPv6), and it is the next hop of their public /128s. Unique among DPUs, like the fabric IPs",
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
} as const
