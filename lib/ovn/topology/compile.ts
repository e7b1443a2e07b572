import { createHash } from 'node:crypto'
import { isIP } from 'node:net'
import * as v from 'valibot'
import type { Writable } from '../database.ts'
import type { NbTables } from '../schema/nb.generated.ts'
import { InvalidTopologySpec, Ipv6NatUnsupported, NatConflict } from './errors.ts'
import {
  DPU_KEY,
  GROUP_KEY,
  HOST_KEY,
  topologyNames as names,
  OWNER_KEY,
  ownerOf,
  ROLE_KEY,
  ROW_KEY,
} from './names.ts'
import {
  type GroupMember,
  GroupMemberSchema,
  type GroupTopologySpec,
  GroupTopologySpecSchema,
} from './spec.ts'

/** The NB tables a group topology is made of. */
export type TopologyTable =
  | 'Logical_Switch'
  | 'Logical_Switch_Port'
  | 'Logical_Router'
  | 'Logical_Router_Port'
  | 'Logical_Router_Static_Route'
  | 'Logical_Router_Policy'
  | 'NAT'

export const TOPOLOGY_TABLES: readonly TopologyTable[] = [
  'Logical_Switch',
  'Logical_Router',
  'Logical_Switch_Port',
  'Logical_Router_Port',
  'Logical_Router_Static_Route',
  'Logical_Router_Policy',
  'NAT',
]

/** Where a child row hangs: its parent (by key) and the parent's reference column. */
export interface ParentRef {
  readonly table: 'Logical_Switch' | 'Logical_Router'
  readonly key: string
  readonly column: 'ports' | 'static_routes' | 'policies' | 'nat'
}

/** One NB row the group needs, without its reference columns (those come from `parent`). */
export type DesiredRow = {
  [K in TopologyTable]: {
    readonly table: K
    /** Identity of the row within the group, stored as `external_ids:hydrazine:key`. */
    readonly key: string
    readonly row: Partial<Writable<NbTables[K]>> & { external_ids: Record<string, string> }
    readonly parent?: ParentRef
  }
}[TopologyTable]

export interface DesiredRows {
  readonly group: string
  /** Value of `external_ids:hydrazine:owner` on every row of the group. */
  readonly owner: string
  readonly rows: readonly DesiredRow[]
}

/** Priority of the per-host reroute policies on the distributed router. */
export const HOST_POLICY_PRIORITY = 1000
const LINK_LOCAL_SLOTS = 16_384 // /30s in 169.254.0.0/16

/**
 * Compiles a group's desired state into the NB rows it needs (seed 000, "User-defined
 * Network Topology"). Pure: same spec, same rows.
 *
 * - distributed: switch `hz-<g>-ls` (host ports, DHCP relay ports) and router `hz-<g>-lr`
 *   with the gateway IP, a default route per DPU (ECMP) and a reroute policy per IPv4
 *   host to its own DPU's gateway router;
 * - per DPU `d`: transit switch `hz-<g>-<d>-ts`, gateway router `hz-<g>-<d>-gw` pinned to
 *   chassis `d`, public switch `hz-<g>-<d>-pub` with a localnet port; SNAT of the group
 *   subnet to the DPU's NAT IP (which also makes the gateway router answer ARP for it);
 *   FabricAccess: `dnat_and_snat` NAT IP ↔ host; PublicAccess: `dnat_and_snat` public
 *   IP ↔ host (the host's egress leaves as its public IP, which FRR announces with next
 *   hop = the NAT IP) and `dnat` NAT IP → host (still reachable from the fabric).
 *
 * Transit links get a /30 in 169.254.0.0/16 chosen by a hash of the DPU id (probing on
 * collision, in DPU id order), so a DPU joining or leaving does not renumber the others.
 *
 * With a `memo`, the rows of every host and every DPU whose inputs did not change since
 * the group's last compile through that memo are the same row objects as then (not
 * rebuilt, not validated again): compiling a 1,000-host group that gained one host costs
 * that host's rows and its DPU's, and lets the diff skip every row it already verified.
 *
 * @throws InvalidTopologySpec, Ipv6NatUnsupported, NatConflict
 */
export function compileGroupTopology(spec: GroupTopologySpec, memo?: CompileMemo): DesiredRows {
  const g = String(spec.name)
  const head = JSON.stringify([
    spec.name,
    spec.cidr,
    spec.gateway,
    spec.dummyFabricIp,
    spec.fabricGatewayIp,
    spec.physicalNetwork,
  ])
  const previous = memo?.previous(g, head)
  const memberSigs = Array.isArray(spec.members) ? spec.members.map(memberSignature) : []
  validate(spec, memberSigs, previous)
  const fragments = new Map<string, Fragment>()
  const fragment = (
    signature: string,
    build: (rows: DesiredRow[]) => void,
  ): readonly DesiredRow[] => {
    let found = fragments.get(signature) ?? previous?.get(signature)
    if (!found) {
      const rows: DesiredRow[] = []
      build(rows)
      found = { rows, ids: rows.map(rowId) }
    }
    fragments.set(signature, found)
    return found.rows
  }

  const c = context(spec)
  if (!inSubnet(spec.gateway, spec.cidr)) {
    throw new InvalidTopologySpec(g, `gateway ${spec.gateway} is not in ${spec.cidr}`)
  }
  const rows: DesiredRow[] = []
  // Distributed switch and router.
  rows.push(
    ...fragment('head', (out) => {
      c.ls(out, c.lsKey, names.switch(g))
      out.push({
        table: 'Logical_Router',
        key: c.lrKey,
        row: { name: names.router(g), external_ids: c.ids(c.lrKey) },
      })
      c.lrp(out, c.lrKey, names.routerSwitchPort(g), [`${spec.gateway}/${c.subnetLen}`])
      c.routerLink(out, c.lsKey, names.switchRouterPort(g), names.routerSwitchPort(g))
    }),
  )

  for (const [i, m] of spec.members.entries()) {
    if (fragments.has(`m${memberSigs[i]}`)) {
      throw new InvalidTopologySpec(g, `duplicate member ${m.hostName}`)
    }
    rows.push(
      ...fragment(`m${memberSigs[i]}`, (out) => {
        if (m.access !== 'None' && isIP(m.ip) !== 4)
          throw new Ipv6NatUnsupported(g, m.hostName, m.access)
        if (!inSubnet(m.ip, spec.cidr)) {
          throw new InvalidTopologySpec(
            g,
            `host ${m.hostName} address ${m.ip} is not in ${spec.cidr}`,
          )
        }
        c.lsp(
          out,
          c.lsKey,
          m.logicalPort,
          { addresses: [`${m.mac} ${m.ip}`], port_security: [`${m.mac} ${m.ip}`] },
          { [HOST_KEY]: m.hostName, [DPU_KEY]: m.dpu.id },
        )
      }),
    )
  }
  const relayRows: DesiredRow[] = []
  for (const r of spec.dhcpRelayPorts ?? []) {
    if (r.ip !== undefined && (!r.mac || !inSubnet(r.ip, spec.cidr))) {
      throw new InvalidTopologySpec(
        g,
        `relay ${r.portName} address ${r.ip} needs a MAC and must be in ${spec.cidr}`,
      )
    }
    c.lsp(
      relayRows,
      c.lsKey,
      r.portName,
      { addresses: [r.mac && r.ip ? `${r.mac} ${r.ip}` : (r.mac ?? 'unknown')] },
      { [DPU_KEY]: r.dpuId, [ROLE_KEY]: 'dhcp-relay' },
    )
  }
  rows.push(...relayRows)

  // Per DPU: transit switch, gateway router, public switch, NAT.
  const byDpu = new Map<string, { members: GroupMember[]; sigs: string[] }>()
  for (const [i, m] of spec.members.entries()) {
    const entry = byDpu.get(m.dpu.id) ?? { members: [], sigs: [] }
    entry.members.push(m)
    entry.sigs.push(memberSigs[i] ?? '')
    byDpu.set(m.dpu.id, entry)
  }
  const slots = linkLocalSlots([...byDpu.keys()])
  for (const [dpu, { members, sigs }] of [...byDpu].sort(([a], [b]) =>
    a < b ? -1 : a > b ? 1 : 0,
  )) {
    const slot = slots.get(dpu) ?? 0
    rows.push(
      ...fragment(`d${JSON.stringify(dpu)}/${slot}/${sigs.join(',')}`, (out) =>
        c.dpuRows(out, dpu, slot, members),
      ),
    )
  }
  const seen = new Set<string>()
  for (const ids of [...[...fragments.values()].map((f) => f.ids), relayRows.map(rowId)]) {
    for (const id of ids) {
      if (seen.has(id)) throw new InvalidTopologySpec(g, `duplicate ${id.replace('/', ' ')}`)
      seen.add(id)
    }
  }
  memo?.remember(g, head, fragments)
  return { group: g, owner: c.owner, rows }
}

/** Rows built for one part of a group (its head, one host, one DPU), with their ids. */
interface Fragment {
  readonly rows: readonly DesiredRow[]
  readonly ids: readonly string[]
}

/**
 * What `compileGroupTopology` built for each group's last compile, part by part, keyed by
 * the part's inputs. Holds one compile per group (the parts it used); a group whose
 * network changed starts over. `forget` drops a deleted group.
 *
 * @example
 * const memo = new CompileMemo()
 * compileGroupTopology(spec, memo) // every part built
 * compileGroupTopology(specWithOneMoreHost, memo) // that host's and its DPU's rows built
 */
export class CompileMemo {
  readonly #groups = new Map<string, { head: string; fragments: Map<string, Fragment> }>()

  /** @internal The group's parts from its last compile, when its network is unchanged. */
  previous(group: string, head: string): ReadonlyMap<string, Fragment> | undefined {
    const entry = this.#groups.get(group)
    return entry?.head === head ? entry.fragments : undefined
  }

  /** @internal */
  remember(group: string, head: string, fragments: Map<string, Fragment>): void {
    this.#groups.set(group, { head, fragments })
  }

  forget(group: string): void {
    this.#groups.delete(group)
  }
}

/** `<table>/<key>`: a desired row's identity in its group. */
export function rowId(row: { readonly table: string; readonly key: string }): string {
  return `${row.table}/${row.key}`
}

function memberSignature(m: GroupMember): string {
  return JSON.stringify([
    m?.hostName,
    m?.logicalPort,
    m?.mac,
    m?.ip,
    m?.dpu?.id,
    m?.dpu?.natIp,
    m?.access,
    m?.publicIp,
  ])
}

/**
 * Validates the spec. A member whose signature the group's last compile already used was
 * valid then and is the same now: only new members are checked one by one, and any
 * failure is reported as the whole spec's parse reports it (paths like `members.3.mac`).
 */
function validate(
  spec: GroupTopologySpec,
  memberSigs: readonly string[],
  previous: ReadonlyMap<string, Fragment> | undefined,
): void {
  const known =
    previous !== undefined &&
    Array.isArray(spec.members) &&
    v.is(GroupTopologySpecSchema, { ...spec, members: [] }) &&
    spec.members.every((m, i) => previous.has(`m${memberSigs[i]}`) || v.is(GroupMemberSchema, m))
  if (known) return
  const parsed = v.safeParse(GroupTopologySpecSchema, spec)
  if (parsed.success) return
  throw new InvalidTopologySpec(
    String(spec.name),
    'invalid spec',
    parsed.issues.map((i) => ({ path: v.getDotPath(i) ?? '', message: i.message })),
  )
}

/** The row builders of one group's compile. */
function context(spec: GroupTopologySpec) {
  const g = spec.name
  const owner = ownerOf(g)
  const [subnetAddr, subnetLenText] = spec.cidr.split('/') as [string, string]
  const subnetLen = Number(subnetLenText)
  const v4 = isIP(subnetAddr) === 4
  const physnet = spec.physicalNetwork ?? 'physnet'
  const lsKey = 'ls'
  const lrKey = 'lr'
  const ids = (key: string, extra: Record<string, string> = {}) => ({
    [OWNER_KEY]: owner,
    [GROUP_KEY]: g,
    [ROW_KEY]: key,
    ...extra,
  })
  const ls = (rows: DesiredRow[], key: string, name: string, extra?: Record<string, string>) =>
    rows.push({ table: 'Logical_Switch', key, row: { name, external_ids: ids(key, extra) } })
  const lsp = (
    rows: DesiredRow[],
    switchKey: string,
    name: string,
    row: Omit<Partial<Writable<NbTables['Logical_Switch_Port']>>, 'name' | 'external_ids'>,
    extra?: Record<string, string>,
  ) => {
    const key = `lsp/${name}`
    rows.push({
      table: 'Logical_Switch_Port',
      key,
      row: { name, ...row, external_ids: ids(key, extra) },
      parent: { table: 'Logical_Switch', key: switchKey, column: 'ports' },
    })
  }
  const lrp = (
    rows: DesiredRow[],
    routerKey: string,
    name: string,
    networks: string[],
    extra?: Record<string, string>,
  ) => {
    const key = `lrp/${name}`
    rows.push({
      table: 'Logical_Router_Port',
      key,
      row: { name, mac: macFor(name), networks, external_ids: ids(key, extra) },
      parent: { table: 'Logical_Router', key: routerKey, column: 'ports' },
    })
  }
  const routerLink = (
    rows: DesiredRow[],
    switchKey: string,
    lspName: string,
    lrpName: string,
    extra?: Record<string, string>,
  ) =>
    lsp(
      rows,
      switchKey,
      lspName,
      { type: 'router', addresses: ['router'], options: { 'router-port': lrpName } },
      extra,
    )
  const route = (
    rows: DesiredRow[],
    routerKey: string,
    prefix: string,
    nexthop: string,
    dpu: string,
    extra?: Record<string, string>,
  ) => {
    // One route per prefix and DPU: a changed next hop is an update, not a new row.
    const key = `route/${routerKey}/${prefix}/${dpu}`
    rows.push({
      table: 'Logical_Router_Static_Route',
      key,
      row: { ip_prefix: prefix, nexthop, external_ids: ids(key, extra) },
      parent: { table: 'Logical_Router', key: routerKey, column: 'static_routes' },
    })
  }
  const nat = (
    rows: DesiredRow[],
    routerKey: string,
    type: 'snat' | 'dnat' | 'dnat_and_snat',
    externalIp: string,
    logicalIp: string,
    extra: Record<string, string>,
  ) => {
    const key = `nat/${routerKey}/${type}/${externalIp}/${logicalIp}`
    rows.push({
      table: 'NAT',
      key,
      row: { type, external_ip: externalIp, logical_ip: logicalIp, external_ids: ids(key, extra) },
      parent: { table: 'Logical_Router', key: routerKey, column: 'nat' },
    })
  }

  /** One DPU's part: transit switch, gateway router, public switch, routes, NAT, policies. */
  const dpuRows = (rows: DesiredRow[], dpu: string, slot: number, members: GroupMember[]) => {
    const { lrSide, gwSide } = transitAddresses(slot)
    const dpuIds = { [DPU_KEY]: dpu }
    const tsKey = `ts/${dpu}`
    const gwKey = `gw/${dpu}`
    const pubKey = `pub/${dpu}`

    /** The router port `port` on `routerKey` and its switch-side `peer` on `switchKey`. */
    const link = (
      routerKey: string,
      switchKey: string,
      port: (g: string, dpu: string) => string,
      peer: (g: string, dpu: string) => string,
      networks: string[],
    ) => {
      lrp(rows, routerKey, port(g, dpu), networks, dpuIds)
      routerLink(rows, switchKey, peer(g, dpu), port(g, dpu), dpuIds)
    }

    ls(rows, tsKey, names.transitSwitch(g, dpu), dpuIds)
    link(lrKey, tsKey, names.routerTransitPort, names.transitRouterPort, [`${lrSide}/30`])
    rows.push({
      table: 'Logical_Router',
      key: gwKey,
      row: {
        name: names.gatewayRouter(g, dpu),
        options: { chassis: dpu },
        external_ids: ids(gwKey, dpuIds),
      },
    })
    link(gwKey, tsKey, names.gatewayTransitPort, names.transitGatewayPort, [`${gwSide}/30`])
    ls(rows, pubKey, names.publicSwitch(g, dpu), dpuIds)
    link(gwKey, pubKey, names.gatewayPublicPort, names.publicGatewayPort, [spec.dummyFabricIp])
    lsp(
      rows,
      pubKey,
      names.localnetPort(g, dpu),
      { type: 'localnet', addresses: ['unknown'], options: { network_name: physnet } },
      dpuIds,
    )

    if (!v4) return
    route(rows, gwKey, spec.cidr, lrSide, dpu, dpuIds)
    if (spec.fabricGatewayIp) route(rows, gwKey, '0.0.0.0/0', spec.fabricGatewayIp, dpu, dpuIds)
    route(rows, lrKey, '0.0.0.0/0', gwSide, dpu, dpuIds)

    const natIps = new Set(members.flatMap((m) => (m.dpu.natIp ? [m.dpu.natIp] : [])))
    if (natIps.size > 1)
      throw new NatConflict(g, dpu, `members disagree on the NAT IP (${[...natIps].join(', ')})`)
    const natIp = [...natIps][0]
    if (natIp) nat(rows, gwKey, 'snat', natIp, spec.cidr, dpuIds)
    const externals = new Map<string, string>()
    const inbound = (type: 'dnat' | 'dnat_and_snat', external: string, m: GroupMember) => {
      const other = externals.get(external)
      if (other !== undefined) {
        throw new NatConflict(g, dpu, `${external} is claimed by both ${other} and ${m.hostName}`)
      }
      externals.set(external, m.hostName)
      nat(rows, gwKey, type, external, m.ip, { ...dpuIds, [HOST_KEY]: m.hostName })
    }
    for (const m of members) {
      if (isIP(m.ip) !== 4) continue
      rows.push({
        table: 'Logical_Router_Policy',
        key: `policy/${m.hostName}`,
        row: {
          priority: HOST_POLICY_PRIORITY,
          match: `ip4.src == ${m.ip}`,
          action: 'reroute',
          nexthops: [gwSide],
          external_ids: ids(`policy/${m.hostName}`, { ...dpuIds, [HOST_KEY]: m.hostName }),
        },
        parent: { table: 'Logical_Router', key: lrKey, column: 'policies' },
      })
      if (m.access === 'None') continue
      if (!natIp) {
        throw new NatConflict(
          g,
          dpu,
          `host ${m.hostName} needs ${m.access} but the DPU has no NAT IP`,
        )
      }
      if (m.access === 'FabricAccess') {
        inbound('dnat_and_snat', natIp, m)
        continue
      }
      if (!m.publicIp) {
        throw new InvalidTopologySpec(g, `host ${m.hostName} has PublicAccess but no publicIp`)
      }
      // One dnat_and_snat per host, or OVN picks its egress source address at random.
      inbound('dnat_and_snat', m.publicIp, m)
      inbound('dnat', natIp, m)
    }
  }

  return { owner, subnetLen, lsKey, lrKey, ids, ls, lsp, lrp, routerLink, dpuRows }
}

/** Link-local /30 per DPU: LR side `.1`, gateway router side `.2` of slot `n`. */
export function transitAddresses(slot: number): { lrSide: string; gwSide: string } {
  const base = slot * 4
  const at = (offset: number) => `169.254.${(base + offset) >> 8}.${(base + offset) & 255}`
  return { lrSide: at(1), gwSide: at(2) }
}

function linkLocalSlots(dpus: readonly string[]): Map<string, number> {
  const taken = new Set<number>()
  const out = new Map<string, number>()
  for (const dpu of [...dpus].sort()) {
    let slot = hashSlot(dpu)
    while (taken.has(slot)) slot = (slot + 1) % LINK_LOCAL_SLOTS
    taken.add(slot)
    out.set(dpu, slot)
  }
  return out
}

/** A DPU's preferred link-local slot (memoised: every compile asks for every DPU's). */
function hashSlot(dpu: string): number {
  let slot = slotOfDpu.get(dpu)
  if (slot === undefined) {
    if (slotOfDpu.size >= 100_000) slotOfDpu.clear()
    slot = createHash('sha256').update(dpu).digest().readUInt32BE(0) % LINK_LOCAL_SLOTS
    slotOfDpu.set(dpu, slot)
  }
  return slot
}
const slotOfDpu = new Map<string, number>()

/** A stable, locally administered unicast MAC for a router port. */
function macFor(portName: string): string {
  const h = createHash('sha256').update(portName).digest()
  return ['0a', ...[0, 1, 2, 3, 4].map((i) => (h[i] ?? 0).toString(16).padStart(2, '0'))].join(':')
}

function inSubnet(ip: string, cidr: string): boolean {
  const [addr, lenText] = cidr.split('/') as [string, string]
  const family = isIP(addr)
  if (family !== isIP(ip)) return false
  const bits = family === 4 ? 32 : 128
  const toBig = (a: string) => (family === 4 ? v4ToBig(a) : v6ToBig(a))
  const shift = BigInt(bits - Number(lenText))
  return toBig(ip) >> shift === toBig(addr) >> shift
}

function v4ToBig(a: string): bigint {
  return a.split('.').reduce((acc, o) => (acc << 8n) | BigInt(Number(o)), 0n)
}

function v6ToBig(a: string): bigint {
  const [head = '', tail = ''] = a.split('::')
  const h = head ? head.split(':') : []
  const t = tail ? tail.split(':') : []
  const groups = a.includes('::') ? [...h, ...Array(8 - h.length - t.length).fill('0'), ...t] : h
  return groups.reduce(
    (acc: bigint, x: string) => (acc << 16n) | BigInt(Number.parseInt(x, 16)),
    0n,
  )
}
