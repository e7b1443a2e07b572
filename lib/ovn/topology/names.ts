/**
 * Every name and `external_ids` key Hydrazine gives the NB rows of a group. They are
 * lib/ovn's alone: callers ask for a name here instead of spelling it (libovsdb's
 * `db_object_ids.go` is the model), so changing a naming scheme changes one file.
 */

/** `external_ids` key naming the owner of every row Hydrazine writes (`group/<name>`). */
export const OWNER_KEY = 'hydrazine:owner'
/** `external_ids` key: the row's identity within its group (stable across renames). */
export const ROW_KEY = 'hydrazine:key'
/** `external_ids` keys describing what a row is for. */
export const GROUP_KEY = 'hydrazine:group'
export const HOST_KEY = 'hydrazine:host'
export const DPU_KEY = 'hydrazine:dpu'
export const ROLE_KEY = 'hydrazine:role'

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
