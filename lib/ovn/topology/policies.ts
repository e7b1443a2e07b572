/**
 * A group's security policies as OVN port groups and ACLs, the way security groups
 * (Neutron ML2/OVN) and network policies (ovn-kubernetes) are built. Pure.
 *
 * - Port group `all` (`policyNames.all`) holds every built host's port; a rule that names
 *   `hosts` gets a port group of those (`t_<rule>`), and one whose peer names hosts a port
 *   group of the peers (`p_<rule>`), matched by the address sets OVN derives from it
 *   (`$<name>_ip4`, `$<name>_ip6`), so an address change needs no new ACL.
 * - One ACL per rule on its targets' port group: ingress is `to-lport` (`outport == @…`,
 *   the peer is the source), egress `from-lport` (`inport == @…`, the peer is the
 *   destination); `allow` is `allow-related`, `deny` is `drop`.
 * - Under every rule, an `allow-related` ACL for all IP traffic to the group's hosts
 *   (`BASELINE_PRIORITY`): the default stays allow, and it makes the switch stateful, so
 *   the replies of a connection a rule allowed (or no rule matched) pass whatever the
 *   rules say of their direction, and a deny rule added later also cuts connections it
 *   matches that are already open. Conntrack runs in the DPUs' userspace datapath.
 * - Precedence: smaller `priority` first, equal priorities in list order; the first rule
 *   that matches a packet decides. A rule's rank r (0 = first) is OVN priority
 *   `RULE_PRIORITY_TOP - r`, all above the baseline.
 *
 * A rule that names hosts not (yet) built in the group applies to those that are; when
 * none of its targets or peers is, it has no ACL. Either way `PolicyStatus` names it.
 */
import { rowBuilders } from './builders.ts'
import { POLICY_KEY, policyNames, rowKeys, switchPortRowId } from './names.ts'
import type { GroupPolicyRule, PolicyStatus, UnresolvedRule } from './policy-rules.ts'
import type { DesiredRow, ParentRef } from './rows.ts'
import type { GroupMember } from './spec.ts'

export {
  type GroupPolicyRule,
  GroupPolicyRuleSchema,
  type PolicyProtocol,
  type PolicyStatus,
  type UnresolvedRule,
} from './policy-rules.ts'

/** OVN ACL priority of the first rule; rule r (0-based rank) has `RULE_PRIORITY_TOP - r`. */
export const RULE_PRIORITY_TOP = 2000
/** OVN ACL priority of the allow-related ACL below every rule. */
export const BASELINE_PRIORITY = 1000

/**
 * The port groups and ACLs of group `group`'s `rules` over its built hosts `members`, and
 * what the status says of them.
 */
export function policyRows(
  group: string,
  rules: readonly GroupPolicyRule[],
  members: readonly GroupMember[],
): { rows: DesiredRow[]; status: PolicyStatus } {
  const rows: DesiredRow[] = []
  const unresolved: UnresolvedRule[] = []
  if (rules.length === 0) return { rows, status: { rules: 0, unresolved } }
  const { ids } = rowBuilders(group)
  const byName = new Map(members.map((m) => [m.hostName, m]))
  const portGroup = (key: string, name: string, hosts: readonly GroupMember[], rule?: string) =>
    rows.push({
      table: 'Port_Group',
      key,
      row: { name, external_ids: ids(key, rule === undefined ? {} : { [POLICY_KEY]: rule }) },
      // Each host's port by its row id, as `rowBuilders(g).lsp` keys it.
      links: { column: 'ports', ids: hosts.map((m) => switchPortRowId(m.logicalPort)) },
    })
  const acl = (
    pgKey: string,
    key: string,
    row: {
      direction: 'from-lport' | 'to-lport'
      priority: number
      match: string
      action: 'allow-related' | 'drop'
      name?: string
    },
    rule?: string,
  ) => {
    const parent: ParentRef = { table: 'Port_Group', key: pgKey, column: 'acls' }
    const extra = rule === undefined ? {} : { [POLICY_KEY]: rule }
    rows.push({ table: 'ACL', key, row: { ...row, external_ids: ids(key, extra) }, parent })
  }

  const all = policyNames.all(group)
  portGroup(rowKeys.allHosts, all, members)
  acl(rowKeys.allHosts, rowKeys.baselineAcl, {
    direction: 'to-lport',
    priority: BASELINE_PRIORITY,
    match: `outport == @${all} && ip`,
    action: 'allow-related',
  })

  for (const [rank, rule] of ordered(rules).entries()) {
    const missing: string[] = []
    const known = (names: readonly string[]) =>
      [...new Set(names)].flatMap((n) => {
        const m = byName.get(n)
        if (!m) missing.push(n)
        return m ? [m] : []
      })
    const targets = rule.hosts ? known(rule.hosts) : members
    const peers = rule.peer && 'hosts' in rule.peer ? known(rule.peer.hosts) : undefined
    const inert = (rule.hosts !== undefined && targets.length === 0) || peers?.length === 0
    if (missing.length > 0 || inert) {
      unresolved.push({ rule: rule.name, hosts: [...new Set(missing)], inert })
    }
    if (inert) continue
    let target: { key: string; name: string } = { key: rowKeys.allHosts, name: all }
    if (rule.hosts) {
      target = { key: rowKeys.ruleTargets(rule.name), name: policyNames.targets(group, rule.name) }
      portGroup(target.key, target.name, targets, rule.name)
    }
    let peer = rule.peer && 'cidr' in rule.peer ? cidrMatch(rule.peer.cidr, rule) : 'ip'
    if (peers) {
      const name = policyNames.peers(group, rule.name)
      portGroup(rowKeys.rulePeers(rule.name), name, peers, rule.name)
      peer = hostsMatch(name, peers, rule)
    }
    const ingress = rule.direction === 'ingress'
    acl(
      target.key,
      rowKeys.ruleAcl(target.key, rule.name),
      {
        direction: ingress ? 'to-lport' : 'from-lport',
        priority: RULE_PRIORITY_TOP - rank,
        match: [
          `${ingress ? 'outport' : 'inport'} == @${target.name}`,
          peer,
          ...protocolMatch(rule),
        ].join(' && '),
        action: rule.action === 'allow' ? 'allow-related' : 'drop',
        name: rule.name,
      },
      rule.name,
    )
  }
  return { rows, status: { rules: rules.length, unresolved } }
}

/** The rules in precedence order: smaller priority first, then list order. */
function ordered(rules: readonly GroupPolicyRule[]): GroupPolicyRule[] {
  return rules
    .map((rule, index) => ({ rule, index }))
    .sort((a, b) => a.rule.priority - b.rule.priority || a.index - b.index)
    .map(({ rule }) => rule)
}

/** The peer's side of a packet: the source of ingress traffic, the destination of egress. */
const side = (rule: GroupPolicyRule) => (rule.direction === 'ingress' ? 'src' : 'dst')

function cidrMatch(cidr: string, rule: GroupPolicyRule): string {
  return `${cidr.includes(':') ? 'ip6' : 'ip4'}.${side(rule)} == ${cidr}`
}

/** The peers' addresses, by the families they have (`$<port group>_ip4` / `_ip6`). */
function hostsMatch(portGroup: string, peers: readonly GroupMember[], rule: GroupPolicyRule) {
  const families = new Set(
    peers.flatMap((m) => [m.ip, ...(m.ip6 ? [m.ip6] : [])]).map((ip) => (ip.includes(':') ? 6 : 4)),
  )
  const terms = [...families].sort().map((f) => `ip${f}.${side(rule)} == $${portGroup}_ip${f}`)
  return terms.length === 1 ? (terms[0] ?? 'ip') : `(${terms.join(' || ')})`
}

function protocolMatch(rule: GroupPolicyRule): string[] {
  if (rule.protocol === 'any') return []
  if (rule.protocol === 'icmp') return ['icmp']
  const p = rule.protocol
  const range = rule.ports
  if (!range) return [p]
  if (range.from === range.to) return [`${p}.dst == ${range.from}`]
  return [`${p}.dst >= ${range.from}`, `${p}.dst <= ${range.to}`]
}
