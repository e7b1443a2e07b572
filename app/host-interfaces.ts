/**
 * A host's interfaces: each its own ManagedResource `<host>-<name>`, changed only through
 * its host, and checked (alone and together with the host) before anything is written.
 */
import * as v from 'valibot'
import {
  type ManagedResource,
  type ManagedResourceRequest,
  type ManagedResourceSpec,
  type ResourceGroup,
  Rfc1123Label,
} from '../lib/state/objects.ts'
import { type Caller, placeHost } from '../lib/state/placement.ts'
import type { TenantQuota } from '../lib/state/quotas.ts'
import { type StateStore, StoreConflict } from '../lib/state/store.ts'
import { ValidationError } from './errors.ts'
import { type ClientPolicy, hostRequestOf } from './groups.ts'

/** What checking a host's interfaces reads. */
export interface InterfaceDeps {
  readonly store: StateStore
  readonly policy: ClientPolicy
  /** The host's tenant's quota (its interfaces are in its tenant's groups). */
  readonly quota: TenantQuota
}

/**
 * Refuses (as the PUT would, naming `interfaces.<i>.<field>`) interfaces that cannot be
 * placed: each on its own, then together with the host — one DPU serving two groups,
 * one host port or NAT IP used twice, one DNS name twice in a group, the tenant's quota.
 * Each checked interface's `group` is filled in.
 */
export async function checkInterfaces(
  deps: InterfaceDeps,
  name: string,
  request: ManagedResourceRequest,
  group: ResourceGroup,
  interfaces: InterfacePort[],
  caller: Caller,
): Promise<void> {
  const host = placeHost(request, group, await deps.store.getDpu(request.dpu.id), caller)
  if (!host.ok) throw new ValidationError(host.issues)
  const ports: PlacedPort[] = [{ name, path: '', group: group.name, spec: host.spec }]
  for (const [i, port] of interfaces.entries()) {
    const placed = await checkInterface(deps, name, port, group, caller).catch((error: unknown) => {
      throw inInterface(error, i)
    })
    ports.push({
      name: port.name,
      path: `interfaces.${i}.`,
      group: placed.resourceGroup,
      spec: placed,
    })
  }
  const clash = portClash(ports)
  if (clash) throw new ValidationError([clash])
  await deps.store.checkHostsQuotas(ports, deps.quota)
}

/** Refuses what placing the interface `port` of host `name` alone would refuse. */
async function checkInterface(
  deps: InterfaceDeps,
  name: string,
  port: InterfacePort,
  hostGroup: ResourceGroup,
  caller: Caller,
): Promise<ManagedResourceSpec> {
  const { request, group } = await hostRequestOf(
    deps.store,
    port.name,
    port.request,
    caller,
    deps.policy,
  )
  if (group.spec.tenantId !== hostGroup.spec.tenantId) {
    throw new ValidationError([
      {
        path: 'resourceGroup',
        message: `must be a group of tenant ${hostGroup.spec.tenantId}, as the host's is`,
      },
    ])
  }
  port.group = group
  const existing = await deps.store.getHost(port.name)
  if (existing && existing.spec.interfaceOf !== name) {
    throw new StoreConflict(`${port.name} is already in use`, 'Claimed')
  }
  const placed = placeHost(request, group, await deps.store.getDpu(request.dpu.id), caller)
  if (!placed.ok) throw new ValidationError(placed.issues)
  const spec = { ...placed.spec, interfaceOf: name }
  await deps.store.checkHost(port.name, spec)
  return spec
}

/** An interface of a host being placed: its own ManagedResource's name and request. */
export interface InterfacePort {
  readonly name: string
  readonly request: ManagedResourceRequest
  /** Its group, once checked. */
  group?: ResourceGroup
}

/**
 * The interfaces a host request lists, each as the request of its own ManagedResource
 * `<host>-<name>`; a name that would not make a ManagedResource name is refused.
 */
export function interfacesOf(host: string, request: ManagedResourceRequest): InterfacePort[] {
  return (request.interfaces ?? []).map(({ name, ...port }, i) => {
    const own = `${host}-${name}`
    if (!v.is(Rfc1123Label, own)) {
      throw new ValidationError([
        {
          path: `interfaces.${i}.name`,
          message: `${own} (host name, '-', interface name) must be a DNS label of at most 63 characters`,
        },
      ])
    }
    return { name: own, request: port }
  })
}

/** The ManagedResource names of the interfaces `host` lists (none when it is absent). */
export function interfaceNames(host: ManagedResource | undefined): string[] {
  return (host?.spec.interfaces ?? []).map((i) => `${host?.name}-${i.name}`)
}

/**
 * An interface's own ManagedResource changes only through its host (409 otherwise), and
 * is deleted only through it while the host lives and lists it: one whose host is gone,
 * being deleted, or no longer lists it may be deleted on its own.
 */
export async function refuseInterfaceChange(
  store: Pick<StateStore, 'getHost'>,
  existing: ManagedResource | undefined,
  name: string,
  change: 'change' | 'delete',
): Promise<void> {
  const host = existing?.spec.interfaceOf
  if (host === undefined) return
  if (change === 'delete') {
    const owner = await store.getHost(host)
    const listed = interfaceNames(owner).includes(name)
    if (!owner || owner.deletion || !listed) return
  }
  throw new StoreConflict(
    `${name} is an interface of host ${host}: ${change} it through ${host}`,
    'Owned',
  )
}

/** A port being placed, with the field path its request's fields are named under. */
interface PlacedPort {
  readonly name: string
  readonly path: string
  readonly group: string
  readonly spec: ManagedResourceSpec
}

/**
 * The first clash between ports of one host placed together, as a refusal naming the
 * later port's field; undefined when they fit. A DPU follows one group's central, a host
 * port and (with access) a DPU's NAT IP serve one port, a DNS name one host of a group.
 */
function portClash(ports: readonly PlacedPort[]): { path: string; message: string } | undefined {
  for (const [i, b] of ports.entries()) {
    for (const a of ports.slice(0, i)) {
      if (b.group === a.group && (b.spec.hostname ?? b.name) === (a.spec.hostname ?? a.name))
        return { path: `${b.path}hostname`, message: `is ${a.name}'s DNS name in ${b.group} too` }
      const dpu = b.spec.dpu.id
      if (dpu !== a.spec.dpu.id) continue
      if (b.group !== a.group)
        return {
          path: `${b.path}dpu.id`,
          message: `DPU ${dpu} serves ${a.name} in ${a.group}: a DPU follows one group, so ports in two groups need two DPUs`,
        }
      if (b.spec.identifier === a.spec.identifier)
        return { path: `${b.path}identifier`, message: `${a.name} uses DPU ${dpu}'s host port too` }
      if (b.spec.hostAccess !== 'None' && a.spec.hostAccess !== 'None')
        return {
          path: `${b.path}hostAccess`,
          message: `DPU ${dpu}'s NAT IP serves ${a.name} already: one port per DPU may have access`,
        }
    }
  }
  return undefined
}

/** An interface's refusal, its fields named under `interfaces.<i>`. */
function inInterface(error: unknown, i: number): unknown {
  if (!(error instanceof ValidationError)) return error
  return new ValidationError(
    error.issues.map((issue) => ({
      path: `interfaces.${i}.${issue.path}`,
      message: issue.message,
    })),
  )
}
