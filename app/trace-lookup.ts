/**
 * The store lookups of a trace (`trace.ts`): which address a named host is reached at
 * from another group, which host owns a public or NAT IP, and what else holds a traced
 * address — each within what the caller may see.
 */
import type { Ipam } from '../lib/ipam/index.ts'
import { groupSubnets } from '../lib/model/group-network.ts'
import { cidrContains, type ManagedResource, type ResourceGroup } from '../lib/model/objects.ts'
import type { Caller } from '../lib/model/placement.ts'
import type { BoundPort } from '../lib/ovn/index.ts'
import type { StateStore } from '../lib/state/store.ts'
import { ValidationError } from './errors.ts'

/** Whether the caller may trace this host (an operator any; a tenant its own). */
export type Visible = (host: ManagedResource) => Promise<boolean>

/** Most other groups a trace looks into for the same address. */
const MAX_OTHER_GROUPS = 16

/**
 * The address a host of group `from` sends to in order to reach `to`: its own address in
 * the same group; else the address the fabric reaches it at (public IP, else its DPU's
 * NAT IP), since groups meet only on the fabric.
 */
export function reachableAddress(
  to: { readonly host: ManagedResource; readonly ip: string },
  from: string,
): string {
  const { host } = to
  if (host.spec.resourceGroup === from) return to.ip
  const publicIp =
    host.spec.hostAccess === 'PublicAccess' ? host.status.hostAccessIPs?.publicIP : undefined
  const natIp = host.spec.hostAccess === 'None' ? undefined : host.spec.dpu.ips[1]
  const address = publicIp ?? natIp
  if (address) return address
  throw new ValidationError([
    {
      path: 'to',
      message: `host ${host.name} is in group ${host.spec.resourceGroup} with hostAccess ${host.spec.hostAccess}: nothing outside its group reaches it; trace to an address instead`,
    },
  ])
}

/**
 * The host a public IP (IPv4 or IPv6, canonical) is allocated to, or the host its DPU's
 * NAT IP or IPv6 NAT address is DNATed to (FabricAccess or PublicAccess; else any host the
 * DPU serves); undefined when none, or none the caller may see.
 */
export async function ownerOf(
  deps: {
    readonly store: Pick<StateStore, 'hosts' | 'dpus'>
    readonly ipam: Pick<Ipam, 'listPublicIps'>
  },
  address: string,
  visible: Visible,
): Promise<ManagedResource | undefined> {
  const allocated = (await deps.ipam.listPublicIps()).find((p) => p.ip === address && p.allocated)
  let names = allocated?.allocatedTo ? [allocated.allocatedTo] : []
  if (names.length === 0) {
    const dpu = (await deps.store.dpus.list()).find(
      (d) => d.spec.fabricIps[1] === address || d.spec.natIp6 === address,
    )
    names = dpu ? await deps.store.dpus.hostNames(dpu.name) : []
  }
  const hosts = (await Promise.all(names.map((n) => deps.store.hosts.get(n)))).filter(
    (h): h is ManagedResource => h !== undefined && !h.deletion,
  )
  hosts.sort((a, b) => Number(a.spec.hostAccess === 'None') - Number(b.spec.hostAccess === 'None'))
  for (const host of hosts) if (await visible(host)) return host
  return undefined
}

/**
 * What an outbound trace should add: a port no chassis binds yet, and other groups (the
 * caller may see) whose hosts hold the same address — a trace never enters them.
 */
export async function outboundNotes(
  store: Pick<StateStore, 'groups' | 'hosts'>,
  caller: Caller,
  trace: {
    readonly group: ResourceGroup
    readonly address: string
    readonly subnets: readonly string[]
    readonly port: BoundPort
    readonly host: string
  },
): Promise<string[]> {
  const notes: string[] = []
  const { group, address, port } = trace
  if (port.chassis === null) {
    notes.push(
      `no chassis binds ${trace.host}'s port ${port.name} yet: real packets would not flow until its DPU does`,
    )
  }
  if (!trace.subnets.some((cidr) => cidrContains(cidr, address))) return notes
  const groups = (
    await store.groups.list(caller.kind === 'tenant' ? { tenant: caller.tenant } : {})
  )
    .filter(
      (other) =>
        other.name !== group.name &&
        groupSubnets(other.spec).some((s) => cidrContains(s.cidr, address)),
    )
    .slice(0, MAX_OTHER_GROUPS)
  for (const other of groups) {
    const holders = (await store.hosts.list({ resourceGroup: other.name })).filter(
      (h) =>
        (h.status.hostAccessIPs?.hostIP === address ||
          h.status.hostAccessIPs?.hostIPv6 === address) &&
        !h.deletion,
    )
    for (const h of holders) {
      notes.push(
        `${address} is also host ${h.name}'s address in group ${other.name}; this trace never enters group ${other.name}: it stays in group ${group.name}'s own network, and groups meet only on the fabric`,
      )
    }
  }
  return notes
}
