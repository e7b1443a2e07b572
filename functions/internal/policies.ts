/**
 * A group's security policies between the store and lib/ovn: the rules as the topology
 * takes them (defaults filled in, ports as a range), and the `PoliciesApplied` condition
 * an apply reports of what they came to. Pure.
 */

import { type ResourceGroupStatus, setCondition } from '../../lib/model/objects.ts'
import { DEFAULT_POLICY_PRIORITY, type Policy, parsePorts } from '../../lib/model/policies.ts'
import { type GroupPolicyRule, type PolicyStatus, policyRows } from '../../lib/ovn/index.ts'

/** The group's rules as the topology compiles them, in the group's order. */
export function topologyPolicies(policies: readonly Policy[]): GroupPolicyRule[] {
  return policies.map((p) => {
    const ports = p.ports === undefined ? undefined : parsePorts(p.ports)
    const peer = p.peer?.hosts
      ? { hosts: p.peer.hosts }
      : p.peer?.cidr
        ? { cidr: p.peer.cidr }
        : undefined
    return {
      name: p.name,
      direction: p.direction,
      action: p.action,
      ...(p.hosts ? { hosts: p.hosts } : {}),
      ...(peer ? { peer } : {}),
      protocol: p.protocol,
      ...(ports ? { ports } : {}),
      priority: p.priority ?? DEFAULT_POLICY_PRIORITY,
    }
  })
}

export const POLICIES_APPLIED = 'PoliciesApplied'
const LISTED_RULES = 5

/**
 * `status` with its `PoliciesApplied` condition saying what the group's rules came to: True
 * once they are in NB (`RulesApplied`; `HostsNotInGroup` when rules name hosts the group's
 * network does not have: those rules apply to the hosts they name that it has, or to no
 * one), gone when the group has no rules. The same object when it already says so.
 *
 * @example
 * withPoliciesApplied(status, { rules: 2, unresolved: [] })
 * // conditions: [… { type: 'PoliciesApplied', status: 'True', reason: 'RulesApplied',
 * //                  message: 'the 2 rules of the group are applied' }]
 */
export function withPoliciesApplied(
  status: ResourceGroupStatus,
  policies: PolicyStatus | undefined,
): ResourceGroupStatus {
  const was = status.conditions.find((c) => c.type === POLICIES_APPLIED)
  if (!policies || policies.rules === 0) {
    if (!was) return status
    return { ...status, conditions: status.conditions.filter((c) => c !== was) }
  }
  const condition = policiesCondition(policies)
  if (
    was?.status === 'True' &&
    was.reason === condition.reason &&
    was.message === condition.message
  ) {
    return status
  }
  return { ...status, conditions: setCondition(status.conditions, condition) }
}

function policiesCondition(policies: PolicyStatus) {
  const n = policies.rules
  const applied =
    n === 1 ? 'the 1 rule of the group is applied' : `the ${n} rules of the group are applied`
  if (policies.unresolved.length === 0) {
    return {
      type: POLICIES_APPLIED,
      status: 'True',
      reason: 'RulesApplied',
      message: applied,
    } as const
  }
  const listed = policies.unresolved.slice(0, LISTED_RULES).map((u) => {
    const names =
      u.hosts.length > 0
        ? `names ${u.hosts.join(', ')}, not (yet) on the group's network`
        : "names no host on the group's network"
    return `rule ${u.rule} ${names}${u.inert ? ': it applies to no one' : ''}`
  })
  const more = policies.unresolved.length - listed.length
  return {
    type: POLICIES_APPLIED,
    status: 'True',
    reason: 'HostsNotInGroup',
    message: `${applied}; ${listed.join('; ')}${more > 0 ? `; and ${more} more` : ''}`,
  } as const
}

/**
 * `status` with the `PoliciesApplied` condition of a group that has no host (and so runs
 * no central): its rules are what the group holds, and those that name hosts apply to no
 * one yet — as an apply with no member reports them. Its first host's attach starts the
 * central and writes them to NB before the host is Ready.
 */
export function withPoliciesOfEmptyGroup(
  status: ResourceGroupStatus,
  group: string,
  policies: readonly Policy[] | undefined,
): ResourceGroupStatus {
  const rules = topologyPolicies(policies ?? [])
  return withPoliciesApplied(status, policyRows(group, rules, []).status)
}
