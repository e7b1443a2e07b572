/**
 * The OpenAPI description of a group's security policies (`ResourceGroupSpec.policies`);
 * the rules themselves are `lib/state/policies.ts`'s, and a 400 names each field that
 * breaks them.
 */
import {
  DEFAULT_POLICY_PRIORITY,
  MAX_POLICIES,
  MAX_POLICY_HOSTS,
} from '../../lib/state/policies.ts'

const hosts = (what: string) => ({
  type: 'array',
  minItems: 1,
  maxItems: MAX_POLICY_HOSTS,
  uniqueItems: true,
  items: { type: 'string' },
  description: what,
})

/** One rule. */
export const policy = {
  type: 'object',
  required: ['name', 'direction', 'action'],
  additionalProperties: false,
  properties: {
    name: { type: 'string', description: 'RFC 1123 label, unique in the group' },
    direction: {
      enum: ['ingress', 'egress'],
      description: "traffic to the rule's hosts (the peer is its source) or from them",
    },
    action: { enum: ['allow', 'deny'] },
    hosts: hosts(
      "hosts of the group the rule applies to; absent: every host. A host not (yet) on the group's network is named in the PoliciesApplied condition",
    ),
    peer: {
      type: 'object',
      additionalProperties: false,
      description: 'the other end: hosts of the group or a network, one of the two; absent: anyone',
      properties: {
        hosts: hosts('hosts of the group'),
        cidr: { type: 'string', examples: ['10.0.0.0/24', '0.0.0.0/0', 'fd00::/64'] },
      },
    },
    protocol: { enum: ['any', 'tcp', 'udp', 'icmp'], default: 'any' },
    ports: {
      type: 'string',
      pattern: '^[0-9]{1,5}(-[0-9]{1,5})?$',
      examples: ['443', '8000-8099'],
      description: 'destination ports, tcp and udp only',
    },
    priority: {
      type: 'integer',
      minimum: 0,
      maximum: 1000,
      default: DEFAULT_POLICY_PRIORITY,
      description:
        'smaller first, equal priorities in list order; the first rule that matches a packet decides',
    },
  },
} as const

/** `ResourceGroupSpec.policies`. */
export const policies = {
  type: 'array',
  maxItems: MAX_POLICIES,
  items: policy,
  description:
    'security policies, like security groups: a packet no rule matches is allowed, and the replies of an allowed connection always pass',
} as const
