/**
 * A group's security policies (`ResourceGroupSpec.policies`): rules that allow or deny
 * traffic to (`ingress`) or from (`egress`) the group's hosts, like a cloud's security
 * groups. Each rule names the hosts it applies to (absent: every host of the group), the
 * other end (`peer`: hosts of the group or a CIDR; absent: anyone), a protocol and, for
 * tcp and udp, the destination ports.
 *
 * Precedence: smaller `priority` first (0–1000, default `DEFAULT_POLICY_PRIORITY`), equal
 * priorities in list order; the first rule that matches a packet decides, and a packet no
 * rule matches is allowed. Replies of an allowed connection always pass. A rule may name a
 * host that is not (yet) in the group: it applies to the hosts it names that are, and the
 * group's `PoliciesApplied` condition says which are missing.
 *
 * @example
 * // Host a may not reach host b, neither by ping nor by TCP; everything else flows.
 * { name: 'deny-a-to-b', direction: 'ingress', action: 'deny', hosts: ['b'],
 *   peer: { hosts: ['a'] } }
 */
import { isIP } from 'node:net'
import IPCIDR from 'ip-cidr'
import * as v from 'valibot'
import { Rfc1123Label } from './labels.ts'

/** The most rules a group may have. */
export const MAX_POLICIES = 64
/** The most hosts one rule may name, as targets or as peers. */
export const MAX_POLICY_HOSTS = 256
/** A rule's priority when it gives none. */
export const DEFAULT_POLICY_PRIORITY = 100

export const PolicyDirection = v.picklist(['ingress', 'egress'], 'must be ingress or egress')
export const PolicyAction = v.picklist(['allow', 'deny'], 'must be allow or deny')
export const PolicyProtocol = v.picklist(
  ['any', 'tcp', 'udp', 'icmp'],
  'must be any, tcp, udp or icmp',
)

const HostNames = v.pipe(
  v.array(Rfc1123Label),
  v.minLength(1, 'must name at least one host (leave it out for every host)'),
  v.maxLength(MAX_POLICY_HOSTS, `at most ${MAX_POLICY_HOSTS} hosts`),
  v.check((hosts) => new Set(hosts).size === hosts.length, 'must not repeat a host'),
  v.metadata({ uniqueItems: true }),
)

const CIDR_FORM = /^[0-9a-fA-F:.]+\/\d{1,3}$/
const isCidr = (s: string) => CIDR_FORM.test(s) && IPCIDR.isValidCIDR(s)

/** A peer network: IPv4 or IPv6, any prefix length (`0.0.0.0/0` is anyone on IPv4). */
const PeerCidr = v.pipe(
  v.string(),
  v.maxLength(64, 'is too long for a CIDR'),
  v.check(isCidr, 'must be a CIDR like 10.0.0.0/24 or fd00::/64'),
  v.check((s) => {
    if (!isCidr(s)) return true
    const [addr = ''] = s.split('/')
    const whole = new IPCIDR(`${addr}/${isIP(addr) === 6 ? 128 : 32}`)
    return new IPCIDR(s).start({ type: 'bigInteger' }) === whole.start({ type: 'bigInteger' })
  }, 'must be a network address: no host bits set after the prefix'),
  v.examples(['10.0.0.0/24', '0.0.0.0/0', 'fd00::/64']),
)

export const PolicyPeer = v.pipe(
  v.strictObject({
    hosts: v.optional(v.pipe(HostNames, v.description('hosts of the group'))),
    cidr: v.optional(PeerCidr),
  }),
  v.check(
    (p) => (p.hosts === undefined) !== (p.cidr === undefined),
    'must name either hosts or a cidr, not both',
  ),
  v.description('the other end: hosts of the group or a network, one of the two; absent: anyone'),
)

/** `443` or `8000-8099`: a port, or a range of ports (both ends included). */
const PORTS_FORM = /^(\d{1,5})(?:-(\d{1,5}))?$/

/** `"443"` or `"8000-8099"`: destination ports, a range inclusive. */
const Ports = v.pipe(
  v.string(),
  v.check(
    (s) => parsePorts(s) !== undefined,
    'must be a port like "443" or a range like "8000-8099" (1 to 65535, low to high)',
  ),
  v.metadata({ pattern: PORTS_FORM.source }),
  v.examples(['443', '8000-8099']),
  v.description('destination ports, tcp and udp only'),
)

export const Policy = v.pipe(
  v.strictObject({
    name: v.pipe(Rfc1123Label, v.description('RFC 1123 label, unique in the group')),
    direction: v.pipe(
      PolicyDirection,
      v.description("traffic to the rule's hosts (the peer is its source) or from them"),
    ),
    action: PolicyAction,
    hosts: v.optional(
      v.pipe(
        HostNames,
        v.description(
          "hosts of the group the rule applies to; absent: every host. A host not (yet) on the group's network is named in the PoliciesApplied condition",
        ),
      ),
    ),
    peer: v.optional(PolicyPeer),
    protocol: v.optional(PolicyProtocol, 'any'),
    ports: v.optional(Ports),
    priority: v.optional(
      v.pipe(
        v.number(),
        v.integer('must be a whole number'),
        v.minValue(0, 'must be from 0 to 1000'),
        v.maxValue(1000, 'must be from 0 to 1000'),
        v.metadata({ default: DEFAULT_POLICY_PRIORITY }),
        v.description(
          'smaller first, equal priorities in list order; the first rule that matches a packet decides',
        ),
      ),
    ),
  }),
  v.forward(
    v.check(
      (r) => r.ports === undefined || r.protocol === 'tcp' || r.protocol === 'udp',
      'ports need protocol tcp or udp',
    ),
    ['ports'],
  ),
)
export type Policy = v.InferOutput<typeof Policy>

/** A group's rules: at most `MAX_POLICIES`, each name once. */
export const Policies = v.pipe(
  v.array(Policy),
  v.maxLength(MAX_POLICIES, `at most ${MAX_POLICIES} rules`),
  v.rawCheck(({ dataset, addIssue }) => {
    if (!dataset.typed) return
    const rules = dataset.value
    const first = new Map<string, number>()
    for (const [key, rule] of rules.entries()) {
      const earlier = first.get(rule.name)
      if (earlier === undefined) {
        first.set(rule.name, key)
        continue
      }
      addIssue({
        message: `repeats the name of rule ${earlier}: each rule's name is its own`,
        path: [
          { type: 'array', origin: 'value', input: rules, key, value: rule },
          { type: 'object', origin: 'value', input: rule, key: 'name', value: rule.name },
        ],
      })
    }
  }),
  v.description(
    'security policies, like security groups: a packet no rule matches is allowed, and the replies of an allowed connection always pass',
  ),
)

/**
 * A valid `ports` value as a range; undefined when it is not one.
 *
 * @example parsePorts('8000-8099') // { from: 8000, to: 8099 }
 * @example parsePorts('443') // { from: 443, to: 443 }
 */
export function parsePorts(ports: string): { from: number; to: number } | undefined {
  const m = PORTS_FORM.exec(ports)
  if (!m) return undefined
  const from = Number(m[1])
  const to = m[2] === undefined ? from : Number(m[2])
  return from >= 1 && to <= 65535 && from <= to ? { from, to } : undefined
}
