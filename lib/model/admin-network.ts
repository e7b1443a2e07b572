/**
 * The admin network: the provider's own network, the one a host is provisioned on, that
 * every inventory host port no tenant host holds sits on. It is a group Hydrazine creates
 * and owns (`HYDRAZINE_ADMIN_NETWORK`), with no tenant; each port on it is a host of that
 * group, `admin port` here, placed and removed by Hydrazine alone.
 *
 * A DPU serves one group at a time (`functions/internal/dpu-central.ts`): its ports are on
 * the admin network only while it serves no tenant host. A tenant host placed on a DPU
 * waits until the DPU's admin ports were detached and isolated; a tenant host detached
 * leaves its DPU only once the DPU confirmed its isolation (the host is purged then), and
 * only then do the DPU's ports rejoin the admin network. A port is never on both.
 *
 * Pure: the caller reads the inventory and the hosts, this decides, the caller writes.
 */
import { createHash } from 'node:crypto'
import * as v from 'valibot'
import { Cidr, Ipv4 } from './address-schemas.ts'
import { Rfc1123Label } from './labels.ts'
import type { Dpu, ManagedResource, ManagedResourceSpec, ResourceGroupSpec } from './objects.ts'
import { cidrContains } from './objects.ts'

/**
 * The tenant the admin network's group is stored under. A tenant name no tenant may have
 * (`isAdminTenant`): a tenant token never sees the admin network.
 */
export const ADMIN_TENANT = 'hydrazine-admin'

/** True for the tenant name the admin network is stored under (reserved). */
export function isAdminTenant(tenant: string): boolean {
  return tenant === ADMIN_TENANT
}

/** The operator's admin network (`HYDRAZINE_ADMIN_NETWORK`). */
export const AdminNetwork = v.strictObject(
  {
    group: Rfc1123Label,
    network: v.pipe(
      v.strictObject({ cidr: Cidr, gateway: Ipv4 }),
      v.forward(
        v.check((n) => cidrContains(n.cidr, n.gateway), 'gateway must lie inside the network'),
        ['gateway'],
      ),
    ),
    dhcpServer: v.optional(Ipv4),
  },
  (issue) => {
    if (issue.expected === 'never') return 'is not a field'
    return issue.expected === 'Object' ? 'must be a JSON object' : 'is required'
  },
)
export type AdminNetwork = v.InferOutput<typeof AdminNetwork>

/** The admin network's group spec, as Hydrazine stores it. */
export function adminGroupSpec(admin: AdminNetwork): ResourceGroupSpec {
  return {
    tenantId: ADMIN_TENANT,
    network: admin.network,
    ...(admin.dhcpServer ? { dhcpServer: admin.dhcpServer } : {}),
  }
}

/**
 * The name of the admin port of `port` on DPU `dpu` in group `group`: `<group>-<dpu>-<port>`
 * in lowercase, or, when that is no RFC 1123 label of at most 63 characters, its first
 * characters and a hash of the pair.
 *
 * @example adminPortName('admin', 'dpu1', 'pf0hpf') // 'admin-dpu1-pf0hpf'
 */
export function adminPortName(group: string, dpu: string, port: string): string {
  const plain = `${group}-${dpu}-${port}`
  if (plain.length <= 63 && /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/.test(plain)) return plain
  const hash = createHash('sha256').update(`${dpu}/${port}`).digest('hex').slice(0, 10)
  const head = plain
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '-')
    .slice(0, 63 - hash.length - 1)
    .replace(/-+$/, '')
  return `${head}-${hash}`
}

/** The spec of DPU `dpu`'s admin port `port` on the admin network, locked to `mac`. */
export function adminPortSpec(
  admin: AdminNetwork,
  dpu: Dpu,
  port: string,
  mac: string,
): ManagedResourceSpec {
  return {
    resourceGroup: admin.group,
    type: 'BareMetal',
    hostMAC: mac,
    hostAccess: 'None',
    dpu: { id: dpu.name, ips: dpu.spec.fabricIps },
    identifier: port,
  }
}

/** Which network a DPU's host port is on, as status and events say it. */
export interface PortNetwork {
  readonly port: string
  /**
   * `admin`: an admin port holds it; `tenant`: a tenant's host holds it; `none`: nothing
   * does (`reason` says why it is not on the admin network).
   */
  readonly network: 'admin' | 'tenant' | 'none'
  /** The group of the host that holds it. */
  readonly group?: string
  /** The host that holds it (an admin port's own name for the admin network). */
  readonly host?: string
  /** That host's phase: a port is on its network once its host is Ready. */
  readonly phase?: string
  readonly reason?: string
}

/** What the admin network's ports should be, against what they are. */
export interface AdminPortsPlan {
  /** Admin ports to store (new, or their spec changed), with the DPU version placed against. */
  readonly join: readonly {
    readonly name: string
    readonly spec: ManagedResourceSpec
    readonly dpuVersion: number
  }[]
  /** Admin ports to detach (isolate, then remove). */
  readonly leave: readonly string[]
  /** Per DPU, each host port and the network it is on. */
  readonly ports: ReadonlyMap<string, readonly PortNetwork[]>
}

/**
 * Which network each of a DPU's host ports is on, from the hosts on it (its admin ports
 * included), and the admin port each free port should have:
 *
 * - a port a tenant host holds is on the tenant's network;
 * - while any tenant host is on the DPU (in any phase, being detached too: until its DPU
 *   confirmed isolation), its other ports are on none: a DPU serves one group at a time;
 * - while the DPU has not confirmed a force-detached host isolated (`unconfirmed`, the
 *   hosts it was marked for, a name once per pending isolation), none of its ports is on
 *   the admin network either;
 * - otherwise a port whose MAC the inventory knows (`hostMacs`) is on the admin network;
 *   one without, or any without an admin network, is on none, saying why.
 */
export function portNetworksOf(
  admin: AdminNetwork | undefined,
  dpu: Dpu,
  hosts: readonly ManagedResource[],
  unconfirmed: readonly string[] = [],
): { ports: PortNetwork[]; wanted: { name: string; spec: ManagedResourceSpec }[] } {
  const tenants = hosts.filter((h) => h.spec.resourceGroup !== admin?.group)
  const groups = [...new Set(tenants.map((h) => h.spec.resourceGroup))].sort()
  const ports: PortNetwork[] = []
  const wanted: { name: string; spec: ManagedResourceSpec }[] = []
  for (const port of dpu.spec.hostPorts) {
    const holder = tenants.find((h) => h.spec.identifier === port)
    if (holder) {
      const { resourceGroup: group } = holder.spec
      ports.push({ port, network: 'tenant', group, host: holder.name, phase: holder.status.phase })
      continue
    }
    const none = (reason: string) => ports.push({ port, network: 'none', reason })
    if (!admin) {
      none('no admin network is configured (HYDRAZINE_ADMIN_NETWORK): it stays isolated')
      continue
    }
    if (tenants.length > 0) {
      none(`DPU ${dpu.name} serves group ${groups.join(', ')}: a DPU serves one group at a time`)
      continue
    }
    if (unconfirmed.length > 0) {
      const names = [...new Set(unconfirmed)].sort().join(', ')
      none(
        `DPU ${dpu.name} has not confirmed ${names} isolated (a forced detach): its ports join the admin network once it has`,
      )
      continue
    }
    const mac = dpu.spec.hostMacs?.[port]
    if (!mac) {
      none(`the inventory has no MAC for port ${port} (hostMacs): it stays isolated`)
      continue
    }
    const name = adminPortName(admin.group, dpu.name, port)
    wanted.push({ name, spec: adminPortSpec(admin, dpu, port, mac) })
    const current = hosts.find((h) => h.name === name)
    ports.push({
      port,
      network: 'admin',
      group: admin.group,
      host: name,
      ...(current ? { phase: current.status.phase } : {}),
    })
  }
  return { ports, wanted }
}

/**
 * The admin network's ports, decided from the inventory, every host and, per DPU, the
 * force-detached hosts it has not confirmed isolated (`portNetworksOf` per DPU): an admin port joins where a port should have one and has none (or one of
 * another spec); one leaves when its port should have none (a tenant host was placed on
 * its DPU, its port or DPU left the inventory).
 */
export function planAdminPorts(
  admin: AdminNetwork,
  dpus: readonly Dpu[],
  hosts: readonly ManagedResource[],
  unconfirmed: ReadonlyMap<string, readonly string[]> = new Map(),
): AdminPortsPlan {
  const byDpu = new Map<string, ManagedResource[]>()
  for (const host of hosts) {
    const list = byDpu.get(host.spec.dpu.id) ?? []
    list.push(host)
    byDpu.set(host.spec.dpu.id, list)
  }
  const join: AdminPortsPlan['join'][number][] = []
  const wanted = new Set<string>()
  const ports = new Map<string, PortNetwork[]>()
  for (const dpu of dpus) {
    const on = byDpu.get(dpu.name) ?? []
    const networks = portNetworksOf(admin, dpu, on, unconfirmed.get(dpu.name))
    ports.set(dpu.name, networks.ports)
    for (const { name, spec } of networks.wanted) {
      wanted.add(name)
      const current = on.find((h) => h.name === name)
      if (!current || (!current.deletion && !sameAdminPort(current.spec, spec))) {
        join.push({ name, spec, dpuVersion: dpu.specVersion })
      }
    }
  }
  const leave = hosts
    .filter((h) => h.spec.resourceGroup === admin.group && !h.deletion && !wanted.has(h.name))
    .map((h) => h.name)
    .sort()
  return { join, leave, ports }
}

function sameAdminPort(a: ManagedResourceSpec, b: ManagedResourceSpec): boolean {
  return (
    a.hostMAC.toLowerCase() === b.hostMAC.toLowerCase() &&
    a.identifier === b.identifier &&
    a.dpu.id === b.dpu.id &&
    JSON.stringify(a.dpu.ips) === JSON.stringify(b.dpu.ips)
  )
}
