import t from 'tap'
import * as v from 'valibot'
import { ResourceGroupSpec } from './objects.ts'
import { parsePorts } from './policies.ts'

const group = (...policies: unknown[]) => ({
  tenantId: 't1',
  network: { cidr: '10.0.0.0/24', gateway: '10.0.0.1' },
  policies,
})
const rule = (extra: object = {}) => ({
  name: 'deny-a',
  direction: 'ingress',
  action: 'deny',
  ...extra,
})

const cases: { name: string; spec: object; refused?: RegExp }[] = [
  { name: 'no rules', spec: group() },
  { name: 'the least a rule says', spec: group(rule()) },
  {
    name: 'every field',
    spec: group(
      rule({
        hosts: ['b'],
        peer: { hosts: ['a'] },
        protocol: 'tcp',
        ports: '8000-8099',
        priority: 10,
      }),
    ),
  },
  { name: 'a CIDR peer', spec: group(rule({ peer: { cidr: '10.1.0.0/16' } })) },
  { name: 'anyone on IPv4', spec: group(rule({ peer: { cidr: '0.0.0.0/0' } })) },
  { name: 'an IPv6 peer', spec: group(rule({ peer: { cidr: 'fd00:1::/64' } })) },
  { name: 'udp, one port', spec: group(rule({ protocol: 'udp', ports: '53' })) },
  {
    name: 'a name that is not a label',
    spec: group(rule({ name: 'Deny_A' })),
    refused: /^policies\.0\.name: must be an RFC 1123 label/,
  },
  {
    name: 'a direction of its own',
    spec: group(rule({ direction: 'inbound' })),
    refused: /^policies\.0\.direction: must be ingress or egress$/,
  },
  {
    name: 'no action',
    spec: group({ name: 'r', direction: 'egress' }),
    refused: /^policies\.0\.action: /,
  },
  {
    name: 'an action of its own',
    spec: group(rule({ action: 'reject' })),
    refused: /^policies\.0\.action: must be allow or deny$/,
  },
  {
    name: 'an unknown protocol',
    spec: group(rule({ protocol: 'sctp' })),
    refused: /^policies\.0\.protocol: must be any, tcp, udp or icmp$/,
  },
  {
    name: 'ports without tcp or udp',
    spec: group(rule({ ports: '22' })),
    refused: /^policies\.0\.ports: ports need protocol tcp or udp$/,
  },
  {
    name: 'ports with icmp',
    spec: group(rule({ protocol: 'icmp', ports: '22' })),
    refused: /^policies\.0\.ports: ports need protocol tcp or udp$/,
  },
  {
    name: 'a port out of range',
    spec: group(rule({ protocol: 'tcp', ports: '70000' })),
    refused: /^policies\.0\.ports: must be a port like "443" or a range/,
  },
  {
    name: 'a range high to low',
    spec: group(rule({ protocol: 'tcp', ports: '90-80' })),
    refused: /^policies\.0\.ports: must be a port/,
  },
  {
    name: 'ports as a number',
    spec: group(rule({ protocol: 'tcp', ports: 22 })),
    refused: /^policies\.0\.ports: /,
  },
  {
    name: 'a target that is not a host name',
    spec: group(rule({ hosts: ['ok', 'Not A Host'] })),
    refused: /^policies\.0\.hosts\.1: must be an RFC 1123 label/,
  },
  {
    name: 'an empty target list',
    spec: group(rule({ hosts: [] })),
    refused: /^policies\.0\.hosts: must name at least one host/,
  },
  {
    name: 'a host named twice',
    spec: group(rule({ hosts: ['a', 'a'] })),
    refused: /^policies\.0\.hosts: must not repeat a host$/,
  },
  {
    name: 'a peer host that is not a host name',
    spec: group(rule({ peer: { hosts: ['a_b'] } })),
    refused: /^policies\.0\.peer\.hosts\.0: must be an RFC 1123 label/,
  },
  {
    name: 'a peer with hosts and a CIDR',
    spec: group(rule({ peer: { hosts: ['a'], cidr: '10.0.0.0/8' } })),
    refused: /^policies\.0\.peer: must name either hosts or a cidr, not both$/,
  },
  {
    name: 'an empty peer',
    spec: group(rule({ peer: {} })),
    refused: /^policies\.0\.peer: must name either hosts or a cidr/,
  },
  {
    name: 'a peer CIDR with host bits',
    spec: group(rule({ peer: { cidr: '10.0.0.5/8' } })),
    refused: /^policies\.0\.peer\.cidr: must be a network address/,
  },
  {
    name: 'a peer address without a prefix',
    spec: group(rule({ peer: { cidr: '10.0.0.5' } })),
    refused: /^policies\.0\.peer\.cidr: must be a CIDR/,
  },
  {
    name: 'a peer field of its own',
    spec: group(rule({ peer: { group: 'x' } })),
    refused: /^policies\.0\.peer\.group: /,
  },
  {
    name: 'a priority out of range',
    spec: group(rule({ priority: 1001 })),
    refused: /^policies\.0\.priority: must be from 0 to 1000$/,
  },
  {
    name: 'a fractional priority',
    spec: group(rule({ priority: 1.5 })),
    refused: /^policies\.0\.priority: must be a whole number$/,
  },
  {
    name: 'a field of its own',
    spec: group(rule({ log: true })),
    refused: /^policies\.0\.log: /,
  },
  {
    name: 'two rules with one name',
    spec: group(rule(), rule({ name: 'other' }), rule({ direction: 'egress' })),
    refused: /^policies\.2\.name: repeats the name of rule 0/,
  },
  {
    name: 'more rules than a group may have',
    spec: group(...Array.from({ length: 65 }, (_, i) => rule({ name: `r${i}` }))),
    refused: /^policies: at most 64 rules$/,
  },
  {
    name: 'not a list',
    spec: { ...group(), policies: { name: 'r' } },
    refused: /^policies: /,
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

t.test('a rule is stored with its protocol, any when it gives none', async (t) => {
  const parsed = v.parse(ResourceGroupSpec, group(rule()))
  t.same(parsed.policies, [{ ...rule(), protocol: 'any' }])
})

t.test('parsePorts: a port or a range, low to high', async (t) => {
  t.same(parsePorts('443'), { from: 443, to: 443 })
  t.same(parsePorts('1-65535'), { from: 1, to: 65535 })
  for (const bad of ['0', '65536', '80-79', '80-', '-80', ' 80', '1e3', '']) {
    t.equal(parsePorts(bad), undefined, JSON.stringify(bad))
  }
})
