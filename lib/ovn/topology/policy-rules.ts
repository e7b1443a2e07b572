/**
 * A group's security policy rules as the topology takes them, their schema (checked with
 * the rest of the group's spec before anything is compiled), and what they came to
 * (`policies.ts` makes them into port groups and ACLs).
 */
import * as v from 'valibot'

export type PolicyProtocol = 'any' | 'tcp' | 'udp' | 'icmp'

/** One rule, as the topology takes it (the API's rule with its defaults filled in). */
export interface GroupPolicyRule {
  /** RFC 1123 label, unique in the group. */
  readonly name: string
  /** Traffic to (`ingress`) or from (`egress`) the rule's hosts. */
  readonly direction: 'ingress' | 'egress'
  readonly action: 'allow' | 'deny'
  /** Host names of the group the rule applies to; absent: every host of the group. */
  readonly hosts?: readonly string[]
  /** The other end: hosts of the group, or a CIDR; absent: anyone. */
  readonly peer?: { readonly hosts: readonly string[] } | { readonly cidr: string }
  readonly protocol: PolicyProtocol
  /** Destination ports (tcp and udp only), `from` to `to` inclusive. */
  readonly ports?: { readonly from: number; readonly to: number }
  /** Smaller first; equal priorities in list order. */
  readonly priority: number
}

// What enters an ACL's match or a port group's name is checked here, whoever built the
// spec: rule names (RFC 1123 labels: `policyNames` maps them one to one), CIDRs (only
// address characters) and ports; host names are only looked up.
const label = v.pipe(v.string(), v.regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/, 'a label'))
const hostNames = v.array(v.pipe(v.string(), v.minLength(1)))
const port = v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65535))

/** One rule, validated with the rest of the spec before anything is compiled. */
export const GroupPolicyRuleSchema = v.object({
  name: label,
  direction: v.picklist(['ingress', 'egress']),
  action: v.picklist(['allow', 'deny']),
  hosts: v.optional(hostNames),
  peer: v.optional(
    v.union([
      v.strictObject({ hosts: hostNames }),
      v.strictObject({
        cidr: v.pipe(v.string(), v.regex(/^[0-9a-fA-F:.]+\/\d{1,3}$/, 'a CIDR')),
      }),
    ]),
  ),
  protocol: v.picklist(['any', 'tcp', 'udp', 'icmp']),
  ports: v.optional(
    v.pipe(
      v.object({ from: port, to: port }),
      v.check((r) => r.from <= r.to, 'a range from low to high'),
    ),
  ),
  priority: v.pipe(v.number(), v.integer()),
})

/** What the group's policies came to: how many rules, and those naming absent hosts. */
export interface PolicyStatus {
  readonly rules: number
  readonly unresolved: readonly UnresolvedRule[]
}

export interface UnresolvedRule {
  readonly rule: string
  /** Host names the rule names (targets or peers) that are not built hosts of the group. */
  readonly hosts: readonly string[]
  /** No target or no peer host is left: the rule has no ACL and matches nothing. */
  readonly inert: boolean
}
