import t from 'tap'
import * as v from 'valibot'
import { hostAddressIssues } from './group-network.ts'
import { ManagedResourceRequest, ResourceGroupSpec } from './objects.ts'

/** `input` parsed by `schema`, or an error listing each issue as `path: message`. */
function validate<S extends v.GenericSchema>(schema: S, input: unknown): v.InferOutput<S> {
  const result = v.safeParse(schema, input)
  if (result.success) return result.output
  const issues = result.issues.map((i) => ({ path: v.getDotPath(i) ?? '', message: i.message }))
  throw Object.assign(new Error(issues.map((i) => `${i.path}: ${i.message}`).join('; ')), {
    issues,
  })
}

const base = {
  tenantId: 't1',
  network: { cidr: '10.0.0.0/24', gateway: '10.0.0.1' },
  extraSubnets: [{ cidr: '10.20.0.0/24', gateway: '10.20.0.1' }, { cidr: 'fd00:20::/64' }],
}

/** The `path: message` of every issue, or 'valid'. */
function refusal(spec: object): string {
  try {
    validate(ResourceGroupSpec, spec)
    return 'valid'
  } catch (error) {
    return (error as { issues: { path: string; message: string }[] }).issues
      .map((i) => `${i.path}: ${i.message}`)
      .join('; ')
  }
}

const cases: { name: string; spec: object; refused?: RegExp }[] = [
  {
    name: 'named pools in the network and an extra subnet, one name over two ranges',
    spec: {
      ...base,
      pools: [
        { name: 'vms', start: '10.0.0.100', end: '10.0.0.199' },
        { name: 'vms', start: '10.20.0.100', end: '10.20.0.199' },
        { name: 'v6', start: 'fd00:20::100', end: 'fd00:20::1ff' },
      ],
    },
  },
  {
    name: 'reservations: one address, a range, one over a pool',
    spec: {
      ...base,
      pools: [{ name: 'vms', start: '10.0.0.100', end: '10.0.0.199' }],
      reservations: [{ start: '10.0.0.2' }, { start: '10.0.0.150', end: '10.0.0.159' }],
    },
  },
  {
    name: 'a pool outside every subnet',
    spec: { ...base, pools: [{ name: 'far', start: '10.9.0.1', end: '10.9.0.9' }] },
    refused: /^pools\.0: must lie inside one of the group's subnets: 10\.0\.0\.0\/24, 10\.20/,
  },
  {
    name: 'a pool across two subnets',
    spec: { ...base, pools: [{ name: 'wide', start: '10.0.0.200', end: '10.20.0.9' }] },
    refused: /^pools\.0: must lie inside one of the group's subnets/,
  },
  {
    name: 'a pool ending before it starts',
    spec: { ...base, pools: [{ name: 'back', start: '10.0.0.9', end: '10.0.0.1' }] },
    refused: /^pools\.0\.end: must not come before start$/,
  },
  {
    name: 'a pool mixing IPv4 and IPv6',
    spec: { ...base, pools: [{ name: 'mix', start: '10.0.0.9', end: 'fd00:20::1' }] },
    refused: /^pools\.0\.end: must be the same IP version as start$/,
  },
  {
    name: 'overlapping pools',
    spec: {
      ...base,
      pools: [
        { name: 'a', start: '10.0.0.10', end: '10.0.0.20' },
        { name: 'b', start: '10.0.0.20', end: '10.0.0.30' },
      ],
    },
    refused: /^pools\.1: overlaps pools\.0$/,
  },
  {
    name: 'a pool named default',
    spec: { ...base, pools: [{ name: 'default', start: '10.0.0.10', end: '10.0.0.20' }] },
    refused: /^pools\.0\.name: default is the automatic pool's name$/,
  },
  {
    name: 'a pool name that is not a label',
    spec: { ...base, pools: [{ name: 'Big Pool', start: '10.0.0.10', end: '10.0.0.20' }] },
    refused: /^pools\.0\.name: /,
  },
  {
    name: 'a pool larger than 2^20 addresses',
    spec: {
      ...base,
      extraSubnets: [{ cidr: 'fd00:20::/64' }],
      pools: [{ name: 'huge', start: 'fd00:20::', end: 'fd00:20::10:0' }],
    },
    refused: /^pools\.0: must hold at most 1048576 addresses$/,
  },
  {
    name: 'a pool with an unknown field',
    spec: { ...base, pools: [{ name: 'a', start: '10.0.0.10', end: '10.0.0.20', size: 3 }] },
    refused: /^pools\.0\.size: /,
  },
  {
    name: 'a reservation that is not an address',
    spec: { ...base, reservations: [{ start: 'router' }] },
    refused: /^reservations\.0\.start: must be an IP address$/,
  },
  {
    name: 'a reservation outside every subnet',
    spec: { ...base, reservations: [{ start: '192.0.2.1' }] },
    refused: /^reservations\.0: must lie inside one of the group's subnets/,
  },
  {
    name: 'overlapping reservations',
    spec: {
      ...base,
      reservations: [{ start: '10.0.0.2', end: '10.0.0.9' }, { start: '10.0.0.5' }],
    },
    refused: /^reservations\.1: overlaps reservations\.0$/,
  },
  {
    name: 'an extra subnet overlapping the network',
    spec: { ...base, extraSubnets: [{ cidr: '10.0.0.0/25' }] },
    refused: /^extraSubnets\.0\.cidr: overlaps 10\.0\.0\.0\/24$/,
  },
  {
    name: "a network6 on Hydrazine's IPv6 transit links",
    spec: { ...base, network6: { cidr: 'fd00:a9fe::/64', gateway: 'fd00:a9fe::1' } },
    refused: /^network6\.cidr: overlaps fd00:a9fe::\/64, kept for Hydrazine's transit links$/,
  },
  {
    name: 'an extra subnet in the link-local transit range',
    spec: { ...base, extraSubnets: [{ cidr: '169.254.10.0/24' }] },
    refused: /^extraSubnets\.0\.cidr: overlaps 169\.254\.0\.0\/16/,
  },
  {
    name: 'an extra IPv4 subnet with DHCP (the network has it)',
    spec: { ...base, extraSubnets: [{ cidr: '10.20.0.0/24', dhcp: true }] },
    refused: /^extraSubnets\.0\.dhcp: network already has DHCP for IPv4/,
  },
]

for (const c of cases) {
  t.test(c.name, async (t) => {
    const answer = refusal(c.spec)
    if (c.refused) t.match(answer, c.refused)
    else t.equal(answer, 'valid')
  })
}

t.test('a host asks for a pool, or an address, its group allows', async (t) => {
  const group = {
    ...base,
    name: 'g1',
    pools: [{ name: 'vms', start: '10.0.0.100', end: '10.0.0.199' }],
    reservations: [{ start: '10.0.0.2', end: '10.0.0.9' }],
  }
  t.same(hostAddressIssues({ pool: 'vms' }, group), [])
  t.same(hostAddressIssues({ pool: 'default' }, group), [], 'every group has default')
  t.same(hostAddressIssues({ hostIP: '10.0.0.10' }, group), [])
  t.same(hostAddressIssues({ pool: 'db' }, group), [
    { path: ['pool'], message: 'resource group g1 has no pool db (it has default, vms)' },
  ])
  t.same(hostAddressIssues({ hostIP: '10.0.0.5' }, group), [
    {
      path: ['hostIP'],
      message: 'is reserved in resource group g1 (reservations.0); IPAM never hands it out',
    },
  ])
})

t.test(
  'a host of an IPv6-only group is reached inside it only, unless the fabric has IPv6',
  async (t) => {
    const group = { name: 'g6', network6: { cidr: 'fd00:10::/64', gateway: 'fd00:10::1' } }
    t.same(hostAddressIssues({ hostAccess: 'None' }, group), [])
    t.same(hostAddressIssues({}, group), [])
    for (const access of ['FabricAccess', 'PublicAccess']) {
      t.match(hostAddressIssues({ hostAccess: access }, group), [
        { path: ['hostAccess'], message: /g6 is IPv6 only/ },
      ])
    }
    t.same(
      hostAddressIssues(
        { hostAccess: 'PublicAccess' },
        { ...group, network: { cidr: '10.0.0.0/24' } },
      ),
      [],
      'a dual-stack group: fine',
    )
    t.same(
      hostAddressIssues({ hostAccess: 'FabricAccess' }, group, true),
      [],
      'an IPv6 fabric: fine',
    )
  },
)

t.test('a host names hostIP or pool, not both', async (t) => {
  const host = { resourceGroup: 'g1', hostMAC: '52:54:00:00:00:01', dpu: { id: 'dpu-1' } }
  t.ok(validate(ManagedResourceRequest, { ...host, pool: 'vms' }))
  t.throws(
    () => validate(ManagedResourceRequest, { ...host, pool: 'vms', hostIP: '10.0.0.5' }),
    /pool: give hostIP or pool, not both/,
  )
})
