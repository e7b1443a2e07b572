import t from 'tap'
import * as v from 'valibot'
import { ManagedResourceRequest, PublicIpSpec, ResourceGroupSpec } from './objects.ts'

const group = (cidr: string, gateway: string, extra?: string) => ({
  tenantId: 't1',
  network: { cidr, gateway },
  ...(extra ? { extraSubnets: [{ cidr: extra }] } : {}),
})

const cases: { name: string; spec: object; refused?: RegExp }[] = [
  { name: 'a /24', spec: group('10.0.0.0/24', '10.0.0.1') },
  { name: 'the widest IPv4 network, a /12', spec: group('10.0.0.0/12', '10.0.0.1') },
  {
    name: 'a /8 is wider than IPAM pools go',
    spec: group('10.0.0.0/8', '10.0.0.1'),
    refused: /network\.cidr: must be an IPv4 network from \/12 to \/30/,
  },
  {
    name: 'a /31 leaves no room for a host',
    spec: group('10.0.0.0/31', '10.0.0.1'),
    refused: /network\.cidr: must be an IPv4 network from \/12/,
  },
  {
    name: 'IPv4 host bits',
    spec: group('10.0.0.5/24', '10.0.0.1'),
    refused: /network\.cidr: must be a network address/,
  },
  { name: 'an IPv6 extra subnet /64', spec: group('10.0.0.0/24', '10.0.0.1', 'fd00:1::/64') },
  {
    name: 'IPv6 host bits in an extra subnet',
    spec: group('10.0.0.0/24', '10.0.0.1', 'fd00:1::5/64'),
    refused: /extraSubnets\.0\.cidr: must be a network address/,
  },
  {
    name: 'an IPv6 network wider than a /48',
    spec: group('10.0.0.0/24', '10.0.0.1', 'fd00::/32'),
    refused:
      /extraSubnets\.0\.cidr: must be an IPv4 network from \/12 to \/30 or an IPv6 network from \/48/,
  },
]

for (const c of cases) {
  t.test(c.name, async (t) => {
    const result = v.safeParse(ResourceGroupSpec, c.spec)
    const issues = result.issues?.map((i) => `${v.getDotPath(i)}: ${i.message}`).join('; ') ?? ''
    if (c.refused) t.match(issues, c.refused)
    else t.equal(issues, '', 'accepted')
  })
}

t.test('DNS: a group may turn it off; a host may pick its DNS name', async (t) => {
  const issuesOf = (schema: v.GenericSchema, value: unknown) =>
    (v.safeParse(schema, value).issues ?? []).map((i) => `${v.getDotPath(i)}: ${i.message}`)
  const base = group('10.0.0.0/24', '10.0.0.1')
  const groups: [string, object, RegExp?][] = [
    ['no dns: on', base],
    ['dns: {}', { ...base, dns: {} }],
    ['dns off', { ...base, dns: { enabled: false } }],
    ['enabled not a boolean', { ...base, dns: { enabled: 'no' } }, /^dns\.enabled: /],
    ['an unknown dns field', { ...base, dns: { zone: 'x.test' } }, /^dns\.zone: /],
    ['dns not an object', { ...base, dns: true }, /^dns: /],
  ]
  for (const [name, spec, refused] of groups) {
    const issues = issuesOf(ResourceGroupSpec, spec)
    if (refused) t.match(issues.join('; '), refused, `group ${name}: refused`)
    else t.same(issues, [], `group ${name}: accepted`)
  }
  const host = {
    resourceGroup: 'group-a',
    hostMAC: '52:54:00:00:00:01',
    dpu: { id: 'dpu-1' },
  }
  const hosts: [string, object, RegExp?][] = [
    ['no hostname', host],
    ['hostname web', { ...host, hostname: 'web' }],
    ['a hostname with capitals', { ...host, hostname: 'Web' }, /^hostname: must be an RFC 1123/],
    ['a dotted hostname', { ...host, hostname: 'web.a' }, /^hostname: must be an RFC 1123/],
    ['a hostname of 64', { ...host, hostname: 'a'.repeat(64) }, /^hostname: must be an RFC/],
    ['an empty hostname', { ...host, hostname: '' }, /^hostname: must be an RFC 1123/],
  ]
  for (const [name, spec, refused] of hosts) {
    const issues = issuesOf(ManagedResourceRequest, spec)
    if (refused) t.match(issues.join('; '), refused, `host ${name}: refused`)
    else t.same(issues, [], `host ${name}: accepted`)
  }
})

t.test('dual-stack: network6 is an IPv6 /64 apart from the other subnets', async (t) => {
  const issuesOf = (value: unknown) =>
    (v.safeParse(ResourceGroupSpec, value).issues ?? []).map(
      (i) => `${v.getDotPath(i)}: ${i.message}`,
    )
  const base = group('10.0.0.0/24', '10.0.0.1')
  const n6 = (cidr: string, gateway: string) => ({ ...base, network6: { cidr, gateway } })
  const cases: [string, object, RegExp?][] = [
    ['a /64', n6('fd00:10::/64', 'fd00:10::1')],
    ['a /56', n6('fd00:10::/56', 'fd00:10::1'), /^network6\.cidr: must be an IPv6 \/64/],
    ['IPv4', n6('10.1.0.0/24', '10.1.0.1'), /^network6\.cidr: must be an IPv6 \/64/],
    ['host bits', n6('fd00:10::5/64', 'fd00:10::1'), /^network6\.cidr: must be a network address/],
    [
      'a gateway outside',
      n6('fd00:10::/64', 'fd00:11::1'),
      /^network6\.gateway: gateway must lie inside/,
    ],
    ['no gateway', { ...base, network6: { cidr: 'fd00:10::/64' } }, /^network6\.gateway: /],
    [
      'overlapping an extra subnet',
      { ...n6('fd00:10::/64', 'fd00:10::1'), extraSubnets: [{ cidr: 'fd00:10::/96' }] },
      /^network6\.cidr: overlaps fd00:10::\/96/,
    ],
    [
      'a pool inside it',
      {
        ...n6('fd00:10::/64', 'fd00:10::1'),
        pools: [{ name: 'p', start: 'fd00:10::10', end: 'fd00:10::20' }],
      },
      /^pools\.0: must not lie in network6/,
    ],
    [
      'a reservation inside it',
      { ...n6('fd00:10::/64', 'fd00:10::1'), reservations: [{ start: 'fd00:10::10' }] },
    ],
    [
      'IPv6 only: network6 without network',
      { tenantId: 't1', network6: { cidr: 'fd00:10::/64', gateway: 'fd00:10::1' } },
    ],
    [
      'IPv6 only, with an IPv4 extra subnet',
      {
        tenantId: 't1',
        network6: { cidr: 'fd00:10::/64', gateway: 'fd00:10::1' },
        extraSubnets: [{ cidr: '10.9.0.0/24' }],
      },
    ],
    ['neither network nor network6', { tenantId: 't1' }, /^network: is required \(IPv4\)/],
    [
      'a DHCP server without an IPv4 network',
      {
        tenantId: 't1',
        network6: { cidr: 'fd00:10::/64', gateway: 'fd00:10::1' },
        dhcpServer: '192.0.2.53',
      },
      /^dhcpServer: relays IPv4 DHCP/,
    ],
    [
      'an IPv6 network as network',
      group('fd00:10::/64', 'fd00:10::1'),
      /^network\.cidr: must be IPv4/,
    ],
  ]
  for (const [name, spec, refused] of cases) {
    const issues = issuesOf(spec)
    if (refused) t.match(issues.join('; '), refused, `${name}: refused`)
    else t.same(issues, [], `${name}: accepted`)
  }
})

t.test('a public IP: any public address, canonical; special-use ranges refused', async (t) => {
  const accepted: [string, string][] = [
    ['203.0.113.7', '203.0.113.7'],
    ['8.8.8.8', '8.8.8.8'],
    ['2001:DB8:FF:0::5', '2001:db8:ff::5'],
    ['10.1.2.3', '10.1.2.3'],
    ['fd00:fab::10', 'fd00:fab::10'],
  ]
  for (const [ip, canonical] of accepted) {
    const parsed = v.safeParse(PublicIpSpec, { ip })
    t.ok(parsed.success, `${ip}: accepted`)
    if (parsed.success) t.equal(parsed.output.ip, canonical, `${ip}: kept as ${canonical}`)
  }
  const refused: [string, RegExp][] = [
    ['127.0.0.1', /127\.0\.0\.0\/8 is loopback/],
    ['0.0.0.0', /0\.0\.0\.0\/8 is this network/],
    ['169.254.0.9', /169\.254\.0\.0\/16 is link-local/],
    ['224.0.0.5', /multicast/],
    ['255.255.255.255', /broadcast/],
    ['::1', /loopback/],
    ['::', /unspecified/],
    ['::ffff:203.0.113.7', /IPv4-mapped/],
    ['fe80::1', /link-local/],
    ['ff02::1', /multicast/],
    ['fd00:a9fe::2', /transit links/],
    ['2001:db8::g', /^must be an IP address$/],
    ['fe80::1%eth0', /no zone/],
  ]
  for (const [ip, why] of refused) {
    const parsed = v.safeParse(PublicIpSpec, { ip })
    t.notOk(parsed.success, `${ip}: refused`)
    if (!parsed.success) {
      const [issue] = parsed.issues
      t.match(issue?.message, why, `${ip}: says why`)
      t.equal(parsed.issues.length, 1, `${ip}: one issue`)
    }
  }
})
