/**
 * The one registry of what Hydrazine writes into NB: every `external_ids` key, every row
 * key, and every name it gives a row. They are lib/ovn's alone: callers ask for a name or
 * key here instead of spelling it (libovsdb's `db_object_ids.go` is the model), so
 * changing a naming scheme changes this file only.
 *
 * `external_ids` keys (`EXTERNAL_ID_KEYS`):
 * - `hydrazine:owner` (`OWNER_KEY`): on every row Hydrazine writes, whose it is:
 *   `group/<name>` (`ownerOf`). Cleanup and reconcile touch only rows carrying it.
 * - `hydrazine:key` (`ROW_KEY`): the row's identity within its group (`rowKeys`), stable
 *   whatever its name; the diff pairs desired and actual rows by it.
 * - `hydrazine:group` (`GROUP_KEY`): the group's name, for people reading NB.
 * - `hydrazine:host` (`HOST_KEY`): the host a row is for (its port, NAT, DNS records).
 * - `hydrazine:dpu` (`DPU_KEY`): the DPU a row is for (its gateway's rows, a host's port).
 * - `hydrazine:role` (`ROLE_KEY`): what a port that is not a host's is for (`ROLES`).
 * - `hydrazine:policy` (`POLICY_KEY`): the security-policy rule a port group or ACL is for.
 * - `hydrazine:generation` (`GENERATION_KEY`): on the group's guard row only, bumped by
 *   every apply so two applies of one group cannot interleave (`diff.ts`).
 * - `hydrazine:store-epoch` (`STORE_EPOCH_KEY`): on `NB_Global` only, the epoch of the
 *   store whose rows the NB holds (`store-epoch.ts`).
 *
 * Names: `topologyNames` (switches, routers, their ports: `hz/<group>/…`), `policyNames`
 * and `addressSetNames` (port groups and address sets: `hz_<hex>_…`, as OVN matches can
 * name them).
 */
import { createHash } from 'node:crypto'

/** Every `external_ids` key Hydrazine writes into NB (what each means: above). */
export const EXTERNAL_ID_KEYS = {
  owner: 'hydrazine:owner',
  row: 'hydrazine:key',
  group: 'hydrazine:group',
  host: 'hydrazine:host',
  dpu: 'hydrazine:dpu',
  role: 'hydrazine:role',
  policy: 'hydrazine:policy',
  generation: 'hydrazine:generation',
  storeEpoch: 'hydrazine:store-epoch',
} as const

/** `external_ids` key naming the owner of every row Hydrazine writes (`group/<name>`). */
export const OWNER_KEY = EXTERNAL_ID_KEYS.owner
/** `external_ids` key: the row's identity within its group (stable across renames). */
export const ROW_KEY = EXTERNAL_ID_KEYS.row
/** `external_ids` keys describing what a row is for. */
export const GROUP_KEY = EXTERNAL_ID_KEYS.group
export const HOST_KEY = EXTERNAL_ID_KEYS.host
export const DPU_KEY = EXTERNAL_ID_KEYS.dpu
export const ROLE_KEY = EXTERNAL_ID_KEYS.role
/** `external_ids` key: the security-policy rule a port group or ACL is for. */
export const POLICY_KEY = EXTERNAL_ID_KEYS.policy
/** `external_ids` key on the group's guard row bumped by every apply. */
export const GENERATION_KEY = EXTERNAL_ID_KEYS.generation
/** `NB_Global` `external_ids` key holding the epoch of the store that owns the NB's rows. */
export const STORE_EPOCH_KEY = EXTERNAL_ID_KEYS.storeEpoch

/** Values of `ROLE_KEY`: what a port that is not a host's is for. */
export const ROLES = {
  /** A DHCP relay's port on the group's switch (`relay.ts`). */
  dhcpRelay: 'dhcp-relay',
} as const
/** Row key (`ROW_KEY`) of a group's guard row, whose `external_ids` hold its generation. */
export const GUARD_KEY = 'guard'

/**
 * Row keys (`ROW_KEY` values): each row's identity within its group, what a child's
 * `parent` names and the diff pairs rows by. A row's id in its group is
 * `<table>/<row key>` (`rowId`).
 */
export const rowKeys = {
  /** The group's distributed switch. */
  switch: 'ls',
  /** The group's distributed router. */
  router: 'lr',
  /** The group's guard (`GUARD_KEY`). */
  guard: GUARD_KEY,
  /** Per DPU: its transit switch. */
  transitSwitch: (dpu: string) => `ts/${dpu}`,
  /** Per DPU: its gateway router. */
  gatewayRouter: (dpu: string) => `gw/${dpu}`,
  /** Per DPU: its public switch. */
  publicSwitch: (dpu: string) => `pub/${dpu}`,
  /** A logical switch port, by its name. */
  switchPort: (name: string) => `lsp/${name}`,
  /** A logical router port, by its name. */
  routerPort: (name: string) => `lrp/${name}`,
  /** A static route on a router: one per prefix and DPU (a new next hop updates it). */
  route: (routerKey: string, prefix: string, dpu: string) => `route/${routerKey}/${prefix}/${dpu}`,
  /** A NAT rule on a router. */
  nat: (routerKey: string, type: string, externalIp: string, logicalIp: string) =>
    `nat/${routerKey}/${type}/${externalIp}/${logicalIp}`,
  /** The distributed router's policy letting traffic to a routed subnet through. */
  internalPolicy: (cidr: string) => `policy/internal/${cidr}`,
  /** The distributed router's drop of a family's traffic that would leave untranslated. */
  edgePolicy: (family: 'ip4' | 'ip6') => `policy/edge/${family}`,
  /** The distributed router's reroute of a DPU's leaving hosts to its gateway router. */
  reroutePolicy: (dpu: string, family: 'ip4' | 'ip6') => `policy/${dpu}/${family}`,
  /** The address set of a DPU's leaving hosts of one family. */
  dpuHosts: (dpu: string, family: 'ip4' | 'ip6') => `as/${dpu}/${family}`,
  /** A host's DNS records. */
  hostDns: (host: string) => `dns/${host}`,
  /** The switch's drop of DNS queries from outside the group. */
  dnsGuardAcl: 'acl/ls/dns-from-outside',
  /** A public switch's drop of what the fabric sends to the group's own addresses. */
  fabricGuardAcl: (dpu: string, family: 'ip4' | 'ip6') => `acl/pub/${dpu}/${family}`,
  /** The port group of every host of the group. */
  allHosts: 'pg/all',
  /** The allow-related ACL under every rule. */
  baselineAcl: 'acl/pg/all/baseline',
  /** A rule's target hosts' port group. */
  ruleTargets: (rule: string) => `pg/t/${rule}`,
  /** A rule's peer hosts' port group. */
  rulePeers: (rule: string) => `pg/p/${rule}`,
  /** A rule's ACL, on its targets' port group. */
  ruleAcl: (portGroupKey: string, rule: string) => `acl/${portGroupKey}/${rule}`,
} as const

/** The row id (`<table>/<row key>`) of the group's guard row (an `Address_Set` no match names). */
export const GUARD_ID = `Address_Set/${GUARD_KEY}`

/** The row id (`<table>/<row key>`) of logical switch port `name`: a host's, a relay's. */
export function switchPortRowId(name: string): string {
  return `Logical_Switch_Port/${rowKeys.switchPort(name)}`
}

/**
 * Host names a group's own ports already use (`hz/<group>/lr-ls`, `hz/<group>/ls-lr`): a
 * host so named would share its port name with the group's router link. Refused at the API.
 */
export const RESERVED_HOST_NAMES: ReadonlySet<string> = new Set(['lr-ls', 'ls-lr'])

/** What every owner value (`OWNER_KEY`) of a group's rows starts with. */
const OWNER_PREFIX = 'group/'

/** The owner value of a group's rows. */
export function ownerOf(group: string): string {
  return `${OWNER_PREFIX}${group}`
}

/** The group a row belongs to, from its `external_ids`; undefined for rows not ours. */
export function groupOfRow(externalIds: Readonly<Record<string, string>>): string | undefined {
  const owner = externalIds[OWNER_KEY]
  return owner?.startsWith(OWNER_PREFIX) ? owner.slice(OWNER_PREFIX.length) : undefined
}

/**
 * The names of a group's NB rows: `hz/<group>/…`, parts joined with `/`, which neither
 * group and host names (RFC 1123 labels) nor DPU ids may contain — so no two groups' rows
 * can ever share a name, whatever their tenants call them. Logical switch port names
 * double as the `iface-id` a DPU agent binds, so they are unique in NB.
 *
 * @example topologyNames.hostPort('group-a', 'host-1') // 'hz/group-a/host-1'
 */
export const topologyNames = {
  /** The group's distributed logical switch (its tenant network). */
  switch: (group: string) => `hz/${group}/ls`,
  /** The group's distributed logical router (the gateway IP). */
  router: (group: string) => `hz/${group}/lr`,
  routerSwitchPort: (group: string) => `hz/${group}/lr-ls`,
  switchRouterPort: (group: string) => `hz/${group}/ls-lr`,
  /** A host's logical switch port: the `iface-id` its DPU binds. */
  hostPort: (group: string, host: string) => `hz/${group}/${host}`,
  /** The group's DHCP relay port on one DPU. */
  relayPort: (group: string, dpu: string) => `hz/${group}/relay/${dpu}`,
  /** Per DPU: the transit switch between the distributed router and the gateway router. */
  transitSwitch: (group: string, dpu: string) => `hz/${group}/dpu/${dpu}/ts`,
  routerTransitPort: (group: string, dpu: string) => `hz/${group}/dpu/${dpu}/lr-ts`,
  transitRouterPort: (group: string, dpu: string) => `hz/${group}/dpu/${dpu}/ts-lr`,
  transitGatewayPort: (group: string, dpu: string) => `hz/${group}/dpu/${dpu}/ts-gw`,
  /** Per DPU: the gateway router pinned to the DPU's chassis. */
  gatewayRouter: (group: string, dpu: string) => `hz/${group}/dpu/${dpu}/gw`,
  gatewayTransitPort: (group: string, dpu: string) => `hz/${group}/dpu/${dpu}/gw-ts`,
  gatewayPublicPort: (group: string, dpu: string) => `hz/${group}/dpu/${dpu}/gw-pub`,
  /** Per DPU: the public switch with the localnet port to the fabric. */
  publicSwitch: (group: string, dpu: string) => `hz/${group}/dpu/${dpu}/pub`,
  publicGatewayPort: (group: string, dpu: string) => `hz/${group}/dpu/${dpu}/pub-gw`,
  localnetPort: (group: string, dpu: string) => `hz/${group}/dpu/${dpu}/pub-ln`,
} as const

/** What a per-DPU row of a group is, by the last part of its name. */
const DPU_PARTS = {
  ts: 'transit-switch',
  'lr-ts': 'router-transit-port',
  'ts-lr': 'transit-router-port',
  'ts-gw': 'transit-gateway-port',
  gw: 'gateway-router',
  'gw-ts': 'gateway-transit-port',
  'gw-pub': 'gateway-public-port',
  pub: 'public-switch',
  'pub-gw': 'public-gateway-port',
  'pub-ln': 'localnet-port',
} as const

/** A name of `topologyNames`, read back: which group's row it is, and what for. */
export type TopologyName =
  | { readonly kind: 'switch' | 'router'; readonly group: string }
  | { readonly kind: 'router-switch-port' | 'switch-router-port'; readonly group: string }
  | { readonly kind: 'host-port'; readonly group: string; readonly host: string }
  | {
      readonly kind: 'relay-port' | (typeof DPU_PARTS)[keyof typeof DPU_PARTS]
      readonly group: string
      readonly dpu: string
    }

/**
 * Reads back a datapath (switch, router) or port name that `topologyNames` made; undefined
 * for any other name. A host may be called `ls`, so the caller says which it holds.
 *
 * @example
 * parseTopologyName('hz/g/dpu/dpu-1/pub-ln', 'port') // { kind: 'localnet-port', group: 'g', dpu: 'dpu-1' }
 * parseTopologyName('hz/g/h1', 'port') // { kind: 'host-port', group: 'g', host: 'h1' }
 */
export function parseTopologyName(name: string, as: 'datapath' | 'port'): TopologyName | undefined {
  const [prefix, group, ...rest] = name.split('/')
  if (prefix !== 'hz' || !group || rest.length === 0 || rest.some((p) => p === '')) return undefined
  const [a, b, c] = rest
  if (rest.length === 1 && a !== undefined) {
    if (as === 'datapath') {
      return a === 'ls'
        ? { kind: 'switch', group }
        : a === 'lr'
          ? { kind: 'router', group }
          : undefined
    }
    if (a === 'lr-ls') return { kind: 'router-switch-port', group }
    if (a === 'ls-lr') return { kind: 'switch-router-port', group }
    return { kind: 'host-port', group, host: a }
  }
  if (rest.length === 2 && a === 'relay' && b !== undefined && as === 'port') {
    return { kind: 'relay-port', group, dpu: b }
  }
  if (rest.length === 3 && a === 'dpu' && b !== undefined && c !== undefined && c in DPU_PARTS) {
    const kind = DPU_PARTS[c as keyof typeof DPU_PARTS]
    const datapath =
      kind === 'transit-switch' || kind === 'gateway-router' || kind === 'public-switch'
    return datapath === (as === 'datapath') ? { kind, group, dpu: b } : undefined
  }
  return undefined
}

/**
 * The names of a group's security-policy port groups. ACL matches name a port group as
 * `@<name>` and the address sets OVN derives from it as `$<name>_ip4` / `$<name>_ip6`, so
 * a name must match `[a-zA-Z_.][a-zA-Z_.0-9]*`, and it is unique in NB. Each starts
 * `hz_` and 16 hex digits of the group name's SHA-256 (a group name may hold `-`), then
 * what it holds: `all` (every host of the group), `t_<rule>` (a rule's target hosts),
 * `p_<rule>` (its peer hosts), the rule name (an RFC 1123 label) with `-` as `_` — one to
 * one, so no two rules or groups share a name.
 *
 * @example policyNames.targets('group-a', 'deny-ssh') // 'hz_<16 hex>_t_deny_ssh'
 */
export const policyNames = {
  /** Every host port of the group: what a rule without `hosts` applies to. */
  all: (group: string) => `${policyPrefix(group)}_all`,
  /** A rule's target hosts. */
  targets: (group: string, rule: string) => `${policyPrefix(group)}_t_${rule.replaceAll('-', '_')}`,
  /** A rule's peer hosts. */
  peers: (group: string, rule: string) => `${policyPrefix(group)}_p_${rule.replaceAll('-', '_')}`,
} as const

/**
 * The names of a group's own address sets, under the same rules and prefix as
 * `policyNames` (`hz_` and 16 hex digits of the group name's SHA-256), then `d_` and 16
 * hex digits of the DPU id's (an id may hold characters a name may not) for a DPU's
 * hosts, or `guard`. No port group name takes these forms, so no address set OVN derives
 * from one (`<port group>_ip4`) shares a name with them.
 *
 * @example addressSetNames.dpuHosts('group-a', 'dpu-1', 'ip4') // 'hz_<16 hex>_d_<16 hex>_ip4'
 */
export const addressSetNames = {
  /** The addresses of one family the group's hosts on one DPU leave the group from. */
  dpuHosts: (group: string, dpu: string, family: 'ip4' | 'ip6') =>
    `${policyPrefix(group)}_d_${hex16(dpu)}_${family}`,
  /** The group's guard row: no match names it; its `external_ids` hold the generation. */
  guard: (group: string) => `${policyPrefix(group)}_guard`,
} as const

function policyPrefix(group: string): string {
  return `hz_${hex16(group)}`
}

function hex16(text: string): string {
  return createHash('sha256').update(text).digest('hex').slice(0, 16)
}
