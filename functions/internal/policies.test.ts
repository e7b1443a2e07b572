import t from 'tap'
import type { ResourceGroupStatus } from '../../lib/model/objects.ts'
import type { Policy } from '../../lib/model/policies.ts'
import { appliedStatus } from './group-state.ts'
import {
  POLICIES_APPLIED,
  topologyPolicies,
  withPoliciesApplied,
  withPoliciesOfEmptyGroup,
} from './policies.ts'

const status = (conditions: ResourceGroupStatus['conditions'] = []): ResourceGroupStatus => ({
  phase: 'Ready',
  conditions,
  snatIPs: [],
  managedResourceCount: 0,
  observedVersion: 1,
  configsSynced: true,
})
const conditionOf = (s: ResourceGroupStatus) =>
  s.conditions.find((c) => c.type === POLICIES_APPLIED)

t.test('topologyPolicies: defaults filled in, ports as a range, list order kept', async (t) => {
  t.same(
    topologyPolicies([
      { name: 'b', direction: 'ingress', action: 'deny', protocol: 'any' },
      {
        name: 'a',
        direction: 'egress',
        action: 'allow',
        hosts: ['h1'],
        peer: { cidr: '10.0.0.0/8' },
        protocol: 'tcp',
        ports: '8000-8099',
        priority: 5,
      },
      {
        name: 'c',
        direction: 'ingress',
        action: 'deny',
        peer: { hosts: ['h2'] },
        protocol: 'udp',
        ports: '53',
      },
    ]),
    [
      { name: 'b', direction: 'ingress', action: 'deny', protocol: 'any', priority: 100 },
      {
        name: 'a',
        direction: 'egress',
        action: 'allow',
        hosts: ['h1'],
        peer: { cidr: '10.0.0.0/8' },
        protocol: 'tcp',
        ports: { from: 8000, to: 8099 },
        priority: 5,
      },
      {
        name: 'c',
        direction: 'ingress',
        action: 'deny',
        peer: { hosts: ['h2'] },
        protocol: 'udp',
        ports: { from: 53, to: 53 },
        priority: 100,
      },
    ],
  )
})

t.test('PoliciesApplied says what the rules came to', async (t) => {
  const applied = withPoliciesApplied(status(), { rules: 2, unresolved: [] })
  t.match(conditionOf(applied), {
    status: 'True',
    reason: 'RulesApplied',
    message: 'the 2 rules of the group are applied',
  })
  t.equal(withPoliciesApplied(applied, { rules: 2, unresolved: [] }), applied, 'said already')
  const missing = withPoliciesApplied(applied, {
    rules: 1,
    unresolved: [{ rule: 'deny-a', hosts: ['a'], inert: true }],
  })
  t.match(conditionOf(missing), {
    status: 'True',
    reason: 'HostsNotInGroup',
    message:
      "the 1 rule of the group is applied; rule deny-a names a, not (yet) on the group's network: it applies to no one",
  })
  const gone = withPoliciesApplied(missing, undefined)
  t.equal(conditionOf(gone), undefined, 'no rules: no condition')
  t.equal(withPoliciesApplied(gone, { rules: 0, unresolved: [] }), gone)
})

t.test('an apply writes PoliciesApplied with the rest of its status', async (t) => {
  const group = { status: status(), specVersion: 1 }
  const members = { managedResourceCount: 0, snatIPs: [] }
  const next = appliedStatus(group, members, [], 'central', { rules: 1, unresolved: [] })
  t.match(next && conditionOf(next), { reason: 'RulesApplied' })
  t.equal(
    next &&
      appliedStatus({ status: next, specVersion: 1 }, members, [], 'central', {
        rules: 1,
        unresolved: [],
      }),
    undefined,
    'nothing new to write the second time',
  )
})

t.test('a group with no host: rules that name hosts apply to no one yet', async (t) => {
  const deny = {
    name: 'deny-a',
    direction: 'ingress' as const,
    action: 'deny' as const,
    hosts: ['a'],
    protocol: 'any' as const,
  }
  const all = {
    name: 'allow-web',
    direction: 'ingress' as const,
    action: 'allow' as const,
    protocol: 'tcp' as const,
    ports: '80',
  }
  const cases: [string, Policy[] | undefined, { reason: string; message: string } | undefined][] = [
    ['no rules', undefined, undefined],
    [
      'a rule for every host',
      [all],
      { reason: 'RulesApplied', message: 'the 1 rule of the group is applied' },
    ],
    [
      'a rule naming a host',
      [all, deny],
      {
        reason: 'HostsNotInGroup',
        message:
          "the 2 rules of the group are applied; rule deny-a names a, not (yet) on the group's network: it applies to no one",
      },
    ],
  ]
  for (const [name, policies, want] of cases) {
    const got = withPoliciesOfEmptyGroup(status(), 'g', policies)
    const condition = got.conditions.find((c) => c.type === POLICIES_APPLIED)
    if (want) t.match(condition, { status: 'True', ...want }, name)
    else t.equal(condition, undefined, name)
  }
})
