/**
 * A host's interfaces: each its own ManagedResource `<host>-<name>`, changed only through
 * its host, and checked (alone and together with the host) before anything is written.
 */
import * as v from 'valibot'
import type {
  Dpu,
  DpuSpec,
  ManagedResource,
  ManagedResourceRequest,
  ManagedResourceSpec,
  ResourceGroup,
} from '../lib/model/objects.ts'
import { implementationOf, Rfc1123Label } from '../lib/model/objects.ts'
import { type Caller, placeHost } from '../lib/model/placement.ts'
import type { TenantQuota } from '../lib/model/quotas.ts'
import { type StateStore, StoreConflict } from '../lib/state/store.ts'
import { ValidationError } from './errors.ts'
import { hostRequestOf } from './host-request.ts'
import type { ClientPolicy } from './policy.ts'
import type { RequestReads } from './reads.ts'

/** What checking a host's interfaces reads. */
export interface InterfaceDeps {
  readonly reads: RequestReads
  readonly store: Pick<StateStore, 'hosts'>
  readonly policy: ClientPolicy
  /** The host's tenant's quota (its interfaces are in its tenant's groups). */
  readonly quota: TenantQuota
}

/**
 * A host (or one of its interfaces) placed on its DPU: what its write stores, the DPU
 * it was placed against, and what the inventory learns first.
 */
export interface PlacedHost {
  readonly name: string
  readonly request: ManagedResourceRequest
  readonly group: ResourceGroup
  readonly dpu: Dpu | undefined
  /** The spec the store would hold (an interface's with `interfaceOf`). */
  readonly spec: ManagedResourceSpec
  readonly dpuChange?: DpuSpec
}

/**
 * The interfaces placed, or refused (as the PUT would, naming `interfaces.<i>.<field>`)
 * when they cannot be: each on its own, then together with the host — one DPU serving
 * two groups, one host port or NAT IP used twice, one DNS name twice in a group, the
 * tenant's quota.
 */
export async function checkInterfaces(
  deps: InterfaceDeps,
  host: PlacedHost,
  interfaces: readonly InterfacePort[],
  caller: Caller,
): Promise<PlacedHost[]> {
  const ports: PlacedPort[] = [
    { name: host.name, path: '', group: host.group.name, spec: host.spec },
  ]
  const placed: PlacedHost[] = []
  for (const [i, port] of interfaces.entries()) {
    const one = await checkInterface(deps, host, port, caller).catch((error: unknown) => {
      throw inInterface(error, i)
    })
    placed.push(one)
    ports.push({ name: port.name, path: `interfaces.${i}.`, group: one.group.name, spec: one.spec })
  }
  const clash = portClash(ports)
  if (clash) throw new ValidationError([clash])
  await deps.store.hosts.checkQuotasTogether(ports, deps.quota)
  return placed
}

/** Refuses what placing the interface `port` of `host` alone would refuse. */
async function checkInterface(
  deps: InterfaceDeps,
  host: PlacedHost,
  port: InterfacePort,
  caller: Caller,
): Promise<PlacedHost> {
  const name = host.name
  const hostGroup = host.group
  const { request, group } = await hostRequestOf(
    deps.reads,
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
  const existing = await deps.reads.host(port.name)
  if (existing && existing.spec.interfaceOf !== name) {
    throw new StoreConflict(`${port.name} is already in use`, 'Claimed')
  }
  const dpu = await deps.reads.dpu(request.dpu.id)
  const placed = placeHost(request, group, dpu, caller, deps.policy)
  if (!placed.ok) throw new ValidationError(placed.issues)
  const spec = { ...placed.spec, interfaceOf: name }
  await deps.store.hosts.check(port.name, spec, {
    existing,
    fabric: implementationOf(group.spec) === 'Fabric',
  })
  return {
    name: port.name,
    request,
    group,
    dpu,
    spec,
    ...(placed.dpuChange ? { dpuChange: placed.dpuChange } : {}),
  }
}

/** An interface of a host being placed: its own ManagedResource's name and request. */
export interface InterfacePort {
  readonly name: string
  readonly request: ManagedResourceRequest
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
  hostOf: (name: string) => Promise<ManagedResource | undefined>,
  existing: ManagedResource | undefined,
  name: string,
  change: 'change' | 'delete',
): Promise<void> {
  const host = existing?.spec.interfaceOf
  if (host === undefined) return
  if (change === 'delete') {
    const owner = await hostOf(host)
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
