import * as v from 'valibot'
import { groupContext } from './context.ts'
import { dnsGuardRows, hostDnsRows } from './dns.ts'
import { InvalidTopologySpec } from './errors.ts'
import { gatewayRows } from './gateway.ts'
import { compileInto, type GroupParts } from './incremental.ts'
import { natRows } from './nat.ts'
import { policyRows } from './policies.ts'
import { relayRows } from './relay.ts'
import { edgePolicyRows, guardRows, routerRows } from './router.ts'
import {
  type GroupMember,
  GroupMemberSchema,
  type GroupTopologySpec,
  GroupTopologySpecSchema,
} from './spec.ts'
import { hostPortRows, switchRows } from './switch.ts'

export { transitAddresses } from './addresses.ts'
export {
  CHILD_COLUMNS,
  type CompileChanges,
  type DesiredRow,
  type DesiredRows,
  isParentTable,
  type ParentRef,
  type RowLinks,
  TOPOLOGY_TABLES,
  type TopologyProblem,
  type TopologyTable,
} from './rows.ts'

import { type CompileMemo, GroupCompile } from './memo.ts'
import type { DesiredRows } from './rows.ts'

export { CompileMemo, rowId } from './memo.ts'

export { REROUTE_POLICY_PRIORITY } from './nat.ts'

/**
 * Compiles a group's desired state into the NB rows of its user-defined network topology.
 * Pure: same spec, same rows. Each part is its own module, composed here in order:
 * `router.ts` (the guard, the distributed router), `switch.ts` (the switch, host ports),
 * `dns.ts`, `gateway.ts` and `nat.ts` (per DPU), `relay.ts`, `policies.ts` (`groupParts`);
 * `incremental.ts` decides which parts a compile through a memo must build again.
 *
 * - distributed: switch `hz/<g>/ls` (host ports, DHCP relay ports) and router `hz/<g>/lr`
 *   with the gateway IP and each routed extra subnet's gateway, a default route per DPU
 *   (ECMP) and, per DPU, one reroute policy to its gateway router matching an
 *   `Address_Set` of that DPU's routed IPv4 hosts (with two routed IPv4 subnets or more,
 *   traffic between them is allowed first), so an attach or detach changes the set and
 *   never the router; and the group's guard, an `Address_Set` no match names, whose
 *   `external_ids` carry the generation every apply bumps (`diff.ts`);
 * - per DPU `d`: transit switch `hz/<g>/dpu/<d>/ts`, gateway router `hz/<g>/dpu/<d>/gw` pinned to
 *   chassis `d`, public switch `hz/<g>/dpu/<d>/pub` with a localnet port; a route back and an
 *   SNAT to the DPU's NAT IP per routed IPv4 subnet (the SNAT also makes the gateway
 *   router answer ARP for the NAT IP); FabricAccess: `dnat_and_snat` NAT IP ↔ host;
 *   PublicAccess: `dnat_and_snat` public IP ↔ host (the host's egress leaves as its
 *   public IP, which FRR announces with next hop = the NAT IP) and `dnat` NAT IP → host
 *   (still reachable from the fabric; all it has while its public IP is not allocated);
 *   the public switch drops IP from the fabric to the group's subnets and transit links,
 *   so the fabric reaches hosts through those NAT rules only; and the distributed router
 *   drops, below the reroutes, whatever would leave the group without one (a host of a
 *   subnet without a gateway, a host on a DPU without a NAT address of the family);
 * - with `network6` (dual-stack): the distributed router takes its gateway too and sends
 *   router advertisements for SLAAC there; each host's port holds its `ip6` beside its
 *   address. Without `dummyFabricIp6` IPv6 stays in the group; with it, routed IPv6
 *   subnets leave like IPv4 ones: a /126 in `fd00:a9fe::/64` beside each transit /30,
 *   `dummyFabricIp6` on each public port, `::/0` routes, an `Address_Set` and a reroute per DPU
 *   for its hosts' IPv6 addresses, and NAT66 to the DPU's `natIp6` (and a PublicAccess host's `publicIp6`),
 *   the same rules as IPv4's;
 * - with `dns`: a `DNS` row per built host in the switch's `dns_records` (`dns.ts`:
 *   `<name>.<group>.<zone>`, `<name>` and the address's PTR name), so names resolve in
 *   the group only; hosts sharing a DNS name get none (named in `problems`);
 * - with `policies`: port groups of the built hosts and an ACL per rule (`policies.ts`);
 *   what they came to, rules naming hosts the group lacks included, is in `policies`.
 *
 * A host is built when its address lies in one of the group's subnets, else left out;
 * FabricAccess and PublicAccess need a routed IPv4 address, else the host gets its port
 * and no NAT. Either way it is named in `problems` and the rest of the group is built.
 *
 * Transit links get a /30 in 169.254.0.0/16 chosen by a hash of the DPU id (probing on
 * collision, in DPU id order), so a DPU joining or leaving does not renumber the others.
 *
 * With a `memo`, the rows of every host and every DPU whose inputs did not change since
 * the group's last compile through that memo are the same row objects as then (not
 * rebuilt, not validated again): compiling a 1,000-host group that gained one host costs
 * that host's rows and its DPU's, and lets the diff skip every row it already verified.
 *
 * @throws InvalidTopologySpec (the group's own settings), NatConflict (two hosts claim one
 *   external address, or one DPU two NAT IPs: the store never lets them)
 */
export function compileGroupTopology(
  spec: GroupTopologySpec,
  memo?: CompileMemo,
  options: CompileOptions = {},
): DesiredRows {
  const g = String(spec.name)
  const head = JSON.stringify([
    spec.name,
    spec.cidr,
    spec.gateway,
    spec.extraSubnets ?? [],
    spec.network6 ?? null,
    spec.dummyFabricIp,
    spec.fabricGatewayIp,
    spec.dummyFabricIp6,
    spec.fabricGatewayIp6,
    spec.physicalNetwork,
    spec.dns ?? null,
  ])
  const previous = memo?.previous(g, head)
  // With a previous compile, the members are checked as the compile meets them (only the
  // new and changed ones); else the whole spec is checked here.
  const checkedWhole = !previous || !Array.isArray(spec.members) || !v.is(GroupSpecHead, spec)
  if (checkedWhole) validate(spec)
  const state = previous ?? new GroupCompile(head)
  const after = previous?.serial
  try {
    // Only new and changed members still need checking when the whole spec was not.
    const checkMember = (m: GroupMember) => {
      if (!checkedWhole && !v.is(GroupMemberSchema, m)) validate(spec)
    }
    const parts = groupParts(spec)
    // Only a compile that follows one can hold DNS changes: a first one publishes all.
    const holdDns = options.holdDns === true && previous !== undefined
    const { result, built, dropped } = compileInto(spec, g, state, parts, checkMember, holdDns)
    if (memo) {
      memo.remember(g, state)
      memo.noteChanges(result, {
        serial: state.serial,
        ...(after !== undefined ? { after } : {}),
        built,
        dropped,
        rowOf: state.rowOf,
      })
    }
    return result
  } catch (error) {
    // The group's memo may be half updated: its next compile starts over.
    memo?.forget(g)
    throw error
  }
}

/** How one compile goes (`compileGroupTopology`). */
export interface CompileOptions {
  /**
   * Hold DNS changes back: the records published stay as they are (a departed or changed
   * host's stay, a new host's wait) until a compile that does not hold; its result says
   * `dnsHeld`. Any change to a group's DNS makes every ovn-controller of the group (OVN
   * 23.03) recompute all its logical flows; holding lets many attaches share one. Only
   * with a `memo` holding the group's previous compile: a first compile publishes all.
   */
  readonly holdDns?: boolean
}

/**
 * The parts of `spec`'s compile, each its module's pure function, in the order their rows
 * come: the head (the guard, the distributed switch and router, the DNS guard, the edge
 * policies), each host's port and DNS records, the relays, the policies, and per DPU its
 * gateway then its NAT.
 *
 * @throws InvalidTopologySpec when the group's subnets overlap
 */
function groupParts(spec: GroupTopologySpec): GroupParts {
  const c = groupContext(spec)
  return {
    owner: c.b.owner,
    head: ({ rows }) => {
      rows.push(...guardRows(c), ...switchRows(c), ...routerRows(c))
      rows.push(...dnsGuardRows(c), ...edgePolicyRows(c))
    },
    host: (draft, m) => hostPortRows(c, draft, m),
    hostDns: (draft, m) => hostDnsRows(c, draft, m),
    dpu: (draft, dpu, slot, hosts) => {
      gatewayRows(c, draft, dpu, slot, hosts)
      natRows(c, draft, dpu, slot, hosts)
    },
    relays: (draft) => {
      for (const r of spec.dhcpRelayPorts ?? []) relayRows(c, draft, r)
    },
    policies: (members) => policyRows(c.g, spec.policies ?? [], members),
  }
}

/**
 * The spec's own settings, its members aside (the caller checks they are an array; each
 * is checked as the compile meets it).
 */
const GroupSpecHead = v.object({ ...GroupTopologySpecSchema.entries, members: v.unknown() })

/**
 * Validates the whole spec; any failure is reported with paths like `members.3.mac`.
 *
 * @throws InvalidTopologySpec
 */
function validate(spec: GroupTopologySpec): void {
  const parsed = v.safeParse(GroupTopologySpecSchema, spec)
  if (parsed.success) return
  throw new InvalidTopologySpec(
    String(spec.name),
    'invalid spec',
    parsed.issues.map((i) => ({ path: v.getDotPath(i) ?? '', message: i.message })),
  )
}
