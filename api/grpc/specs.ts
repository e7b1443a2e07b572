/**
 * Specs arriving over gRPC, as the input the client validates (`app/`, with
 * the valibot schemas HTTP bodies go through): each proto field under its model name
 * (`host_mac` → `hostMAC`), a field the proto leaves unset left out (a missing message, an
 * unset `optional`, an empty list, an UNSPECIFIED enum), so that the schemas' defaults
 * and their "missing" refusals apply exactly as to a JSON body. Nothing is checked here
 * but enum values this server does not know (a newer client's); the schemas check the rest.
 * A refusal names the request's proto field (`toRequestPaths`).
 */

import { ValidationError } from '../../app/index.ts'
import { HostAccess, NETWORK_IMPLEMENTATION_TYPES, ResourceType } from '../../lib/model/objects.ts'
import type { DpuSpec__Output } from '../../proto/gen/hydrazine/v1/DpuSpec.ts'
import { HostAccess as HostAccessProto } from '../../proto/gen/hydrazine/v1/HostAccess.ts'
import type { HostInterface__Output } from '../../proto/gen/hydrazine/v1/HostInterface.ts'
import type { ManagedResourceSpec__Output } from '../../proto/gen/hydrazine/v1/ManagedResourceSpec.ts'
import { NetworkImplementationType as NetworkImplementationTypeProto } from '../../proto/gen/hydrazine/v1/NetworkImplementationType.ts'
import type { ResourceGroupSpec__Output } from '../../proto/gen/hydrazine/v1/ResourceGroupSpec.ts'
import { ResourceType as ResourceTypeProto } from '../../proto/gen/hydrazine/v1/ResourceType.ts'
import { type ProtoEnum, protoEnum, requestFieldPath } from './fields.ts'
import { policiesInput } from './policies.ts'

export const NETWORK_IMPLEMENTATION_TYPE = protoEnum(
  NetworkImplementationTypeProto,
  'NETWORK_IMPLEMENTATION_TYPE',
  NETWORK_IMPLEMENTATION_TYPES,
)
export const RESOURCE_TYPE = protoEnum(ResourceTypeProto, 'RESOURCE_TYPE', ResourceType.options)
export const HOST_ACCESS = protoEnum(HostAccessProto, 'HOST_ACCESS', HostAccess.options)

type Input = Record<string, unknown>

/** A request without its spec: refused naming `spec`. */
const required = (): never => {
  throw new ValidationError([{ path: '(body)', message: 'is required' }])
}

/** `{[key]: value}` when the proto set it, `{}` when it did not. */
const ifSet = <V>(key: string, value: V | undefined): Input =>
  value === undefined ? {} : { [key]: value }
const ifAny = <V>(key: string, values: readonly V[]): Input =>
  values.length === 0 ? {} : { [key]: values }
/** An enum field: its value, left out when UNSPECIFIED; the raw name when unknown (refused). */
const enumField = <V extends string>(
  key: string,
  table: ProtoEnum<V, string>,
  name: string | number | undefined,
): Input => (table.isUnknown(name) ? { [key]: String(name) } : ifSet(key, table.fromProto(name)))

/** A ResourceGroupSpec message as a group spec to validate. */
export function groupSpecInput(spec: ResourceGroupSpec__Output | null): Input {
  if (!spec) return required()
  return {
    tenantId: spec.tenantId,
    ...ifSet(
      'network',
      spec.network ? { cidr: spec.network.cidr, gateway: spec.network.gateway } : undefined,
    ),
    ...ifAny(
      'extraSubnets',
      spec.extraSubnets.map((s) => ({
        cidr: s.cidr,
        ...ifSet('gateway', s.gateway),
        ...ifSet('dhcp', s.dhcp),
      })),
    ),
    ...ifSet(
      'network6',
      spec.network6 ? { cidr: spec.network6.cidr, gateway: spec.network6.gateway } : undefined,
    ),
    ...ifSet('dhcpServer', spec.dhcpServer),
    ...enumField(
      'networkImplementationType',
      NETWORK_IMPLEMENTATION_TYPE,
      spec.networkImplementationType,
    ),
    ...ifAny('policies', policiesInput(spec.policies)),
    ...ifSet('dns', spec.dns ? ifSet('enabled', spec.dns.enabled) : undefined),
    ...ifAny(
      'pools',
      spec.pools.map((p) => ({ name: p.name, start: p.start, end: p.end })),
    ),
    ...ifAny(
      'reservations',
      spec.reservations.map((r) => ({ start: r.start, ...ifSet('end', r.end) })),
    ),
  }
}

/** The fields of one port, a host's own or one of its interfaces'. */
function portInput(port: ManagedResourceSpec__Output | HostInterface__Output): Input {
  return {
    resourceGroup: port.resourceGroup,
    ...enumField('type', RESOURCE_TYPE, port.type),
    hostMAC: port.hostMac,
    ...ifSet('hostIP', port.hostIp),
    ...ifSet(
      'dpu',
      port.dpu
        ? { id: port.dpu.id, ...ifAny('ips', port.dpu.ips), ...ifSet('natIp6', port.dpu.natIp6) }
        : undefined,
    ),
    ...enumField('hostAccess', HOST_ACCESS, port.hostAccess),
    ...ifSet('identifier', port.identifier),
    ...ifSet('hostname', port.hostname),
    ...ifSet('pool', port.pool),
  }
}

/**
 * A ManagedResourceSpec message as a host request to validate: its own port and its
 * interfaces. `interface_of` is output only: a stored spec read back applies again.
 */
export function hostSpecInput(spec: ManagedResourceSpec__Output | null): Input {
  if (!spec) return required()
  return {
    ...portInput(spec),
    ...ifAny(
      'interfaces',
      spec.interfaces.map((i) => ({ name: i.name, ...portInput(i) })),
    ),
  }
}

/** A DpuSpec message as an inventory entry to validate. */
export function dpuSpecInput(spec: DpuSpec__Output | null): Input {
  if (!spec) return required()
  return {
    ...ifSet('tenantId', spec.tenantId),
    fabricIps: spec.fabricIps,
    ...ifSet('natIp6', spec.natIp6),
    hostPorts: spec.hostPorts,
    ...(Object.keys(spec.hostMacs ?? {}).length > 0 ? { hostMacs: spec.hostMacs } : {}),
  }
}

/** The request fields the client names in its own words (`validate(…, id, 'id')`). */
const OWN_FIELDS: ReadonlyMap<string, string> = new Map([
  ['name', 'name'],
  ['id', 'name'],
  ['ip', 'ip'],
  ['pageSize', 'page_size'],
  ['pageToken', 'page_token'],
  ['resourceVersion', 'resource_version'],
  // Trace's request (`GET /v1/trace`'s parameters).
  ['from', 'from'],
  ['to', 'to'],
  ['proto', 'protocol'],
  ['port', 'port'],
  ['raw', 'raw'],
])

/**
 * Runs `op`; a ValidationError it throws comes back naming the request's proto fields,
 * those of the spec under `under` (e.g. `spec.network.cidr`).
 */
export async function toRequestPaths<T>(under: string | undefined, op: () => Promise<T>) {
  try {
    return await op()
  } catch (error) {
    if (!(error instanceof ValidationError)) throw error
    throw new ValidationError(
      error.issues.map((i) => ({ ...i, path: requestFieldPath(i.path, under, OWN_FIELDS) })),
    )
  }
}
