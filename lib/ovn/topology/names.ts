/**
 * Every name and `external_ids` key Hydrazine gives the NB rows of a group. They are
 * lib/ovn's alone: callers ask for a name here instead of spelling it (libovsdb's
 * `db_object_ids.go` is the model), so changing a naming scheme changes one file.
 */
import { createHash } from 'node:crypto'

/** `external_ids` key naming the owner of every row Hydrazine writes (`group/<name>`). */
export const OWNER_KEY = 'hydrazine:owner'
/** `external_ids` key: the row's identity within its group (stable across renames). */
export const ROW_KEY = 'hydrazine:key'
/** `external_ids` keys describing what a row is for. */
export const GROUP_KEY = 'hydrazine:group'
export const HOST_KEY = 'hydrazine:host'
export const DPU_KEY = 'hydrazine:dpu'
export const ROLE_KEY = 'hydrazine:role'
/** Values of `ROLE_KEY`: what a port that is not a host's is for. */
export const ROLES = {
  /** A DHCP relay's port on the group's switch (`relay.ts`). */
  dhcpRelay: 'dhcp-relay',
} as const
/** Row key (`ROW_KEY`) of a group's guard row, whose `external_ids` hold its generation. */
export const GUARD_KEY = 'guard'

/**
 * Row keys (`ROW_KEY` values) of a group's datapaths: a row's identity within its group,
 * what its children's `parent` names. Other rows' keys derive from their table and name
 * (`lsp/<name>`, `lrp/<name>`: `builders.ts`) or from what they are for.
 */
export const rowKeys = {
  /** The group's distributed switch. */
  switch: 'ls',
  /** The group's distributed router. */
  router: 'lr',
  /** The group's guard row (`GUARD_KEY`). */
  guard: GUARD_KEY,
  /** Per DPU: its transit switch. */
  transitSwitch: (dpu: string) => `ts/${dpu}`,
  /** Per DPU: its gateway router. */
  gatewayRouter: (dpu: string) => `gw/${dpu}`,
  /** Per DPU: its public switch. */
  publicSwitch: (dpu: string) => `pub/${dpu}`,
} as const

/**
 * Host names a group's own ports already use (`hz/<group>/lr-ls`, `hz/<group>/ls-lr`): a
 * host so named would share its port name with the group's router link. Refused at the API.
 */
export const RESERVED_HOST_NAMES: ReadonlySet<string> = new Set(['lr-ls', 'ls-lr'])

/** The owner value of a group's rows. */
export function ownerOf(group: string): string {
  return `group/${group}`
}

/** The group a row belongs to, from its `external_ids`; undefined for rows not ours. */
export function groupOfRow(externalIds: Readonly<Record<string, string>>): string | undefined {
  const owner = externalIds[OWNER_KEY]
  return owner?.startsWith('group/') ? owner.slice('group/'.length) : undefined
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

/** `external_ids` key: the security-policy rule a port group or ACL is for. */
export const POLICY_KEY = 'hydrazine:policy'

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
