/**
 * Hydrazine's objects as the gRPC messages of `proto/hydrazine/v1/resources.proto`: each
 * field of the model under its proto name, enums as `<ENUM>_<VALUE>` (`fields.ts`), times
 * as `google.protobuf.Timestamp`. What the model leaves out stays unset.
 */

import type { DpuView } from '../../app/index.ts'
import type { DpuCredentials as DomainCredentials } from '../../lib/agent-protocol/credentials.ts'
import type { ObservedState as DomainObserved } from '../../lib/agent-protocol/index.ts'
import {
  type Condition as DomainCondition,
  type ResourceGroup as DomainGroup,
  type ManagedResource as DomainHost,
  type PublicIp as DomainPublicIp,
  type HostInterface,
  implementationOf,
  type StoredObject,
} from '../../lib/model/objects.ts'
import { ConditionStatus, GroupPhase, HostPhase } from '../../lib/model/statuses.ts'
import type { Condition } from '../../proto/gen/hydrazine/v1/Condition.ts'
import { ConditionStatus as ConditionStatusProto } from '../../proto/gen/hydrazine/v1/ConditionStatus.ts'
import type { Dpu } from '../../proto/gen/hydrazine/v1/Dpu.ts'
import type { DpuCredentials } from '../../proto/gen/hydrazine/v1/DpuCredentials.ts'
import { DpuPortNetwork } from '../../proto/gen/hydrazine/v1/DpuPortNetwork.ts'
import { DpuState } from '../../proto/gen/hydrazine/v1/DpuState.ts'
import type { ManagedResource } from '../../proto/gen/hydrazine/v1/ManagedResource.ts'
import { ManagedResourcePhase } from '../../proto/gen/hydrazine/v1/ManagedResourcePhase.ts'
import type { ObservedState } from '../../proto/gen/hydrazine/v1/ObservedState.ts'
import type { PublicIp } from '../../proto/gen/hydrazine/v1/PublicIp.ts'
import type { ResourceGroup } from '../../proto/gen/hydrazine/v1/ResourceGroup.ts'
import { ResourceGroupPhase } from '../../proto/gen/hydrazine/v1/ResourceGroupPhase.ts'
import { timestampOf } from '../../proto/load.ts'
import { protoEnum } from './fields.ts'
import { policyMessages } from './policies.ts'
import { HOST_ACCESS, NETWORK_IMPLEMENTATION_TYPE, RESOURCE_TYPE } from './specs.ts'

export const RESOURCE_GROUP_PHASE = protoEnum(
  ResourceGroupPhase,
  'RESOURCE_GROUP_PHASE',
  GroupPhase.options,
)
export const MANAGED_RESOURCE_PHASE = protoEnum(
  ManagedResourcePhase,
  'MANAGED_RESOURCE_PHASE',
  HostPhase.options,
)
export const CONDITION_STATUS = protoEnum(
  ConditionStatusProto,
  'CONDITION_STATUS',
  ConditionStatus.options,
)
/** A DPU's heartbeat state (`DpuView.state`). */
export const DPU_STATE = protoEnum(DpuState, 'DPU_STATE', [
  'Online',
  'Stale',
  'Lost',
  'Unknown',
] as const satisfies readonly DpuView['state'][])

/** The network a DPU's host port is on (`PortNetwork.network`). */
export const DPU_PORT_NETWORK = protoEnum(DpuPortNetwork, 'DPU_PORT_NETWORK', [
  'admin',
  'tenant',
  'none',
] as const satisfies readonly NonNullable<DpuView['ports']>[number]['network'][])

/** `{[key]: value}` when the model has it, `{}` when it does not. */
const ifSet = <K extends string, V>(key: K, value: V | undefined) =>
  (value === undefined ? {} : { [key]: value }) as { [P in K]?: V }

function conditionMessage(c: DomainCondition): Condition {
  return {
    type: c.type,
    status: CONDITION_STATUS.toProto(c.status),
    reason: c.reason,
    message: c.message,
    lastTransitionTime: timestampOf(c.lastTransitionTime),
  }
}

/** What every stored object has: name, version, deletion mark and times. */
function envelope(o: StoredObject<unknown, unknown>) {
  return {
    name: o.name,
    specVersion: o.specVersion,
    ...ifSet(
      'deletion',
      o.deletion && {
        requestedAt: timestampOf(o.deletion.requestedAt),
        force: o.deletion.force,
      },
    ),
    createdAt: timestampOf(o.createdAt),
    updatedAt: timestampOf(o.updatedAt),
  }
}

export function resourceGroupMessage(group: DomainGroup): ResourceGroup {
  const { spec, status } = group
  return {
    ...envelope(group),
    spec: {
      tenantId: spec.tenantId,
      ...ifSet(
        'network',
        spec.network && { cidr: spec.network.cidr, gateway: spec.network.gateway },
      ),
      extraSubnets: (spec.extraSubnets ?? []).map((s) => ({
        cidr: s.cidr,
        ...ifSet('gateway', s.gateway),
        ...ifSet('dhcp', s.dhcp),
      })),
      ...ifSet(
        'network6',
        spec.network6 && { cidr: spec.network6.cidr, gateway: spec.network6.gateway },
      ),
      ...ifSet('dhcpServer', spec.dhcpServer),
      networkImplementationType: NETWORK_IMPLEMENTATION_TYPE.toProto(implementationOf(spec)),
      policies: policyMessages(spec.policies),
      ...ifSet('dns', spec.dns && ifSet('enabled', spec.dns.enabled)),
      pools: (spec.pools ?? []).map((p) => ({ name: p.name, start: p.start, end: p.end })),
      reservations: (spec.reservations ?? []).map((r) => ({
        start: r.start,
        ...ifSet('end', r.end),
      })),
    },
    status: {
      phase: RESOURCE_GROUP_PHASE.toProto(status.phase),
      conditions: (status.conditions ?? []).map(conditionMessage),
      snatIps: status.snatIPs ?? [],
      managedResourceCount: status.managedResourceCount ?? 0,
      ...ifSet('softwareNetworkConfiguration', status.softwareNetworkConfiguration),
      ...ifSet('ovnCentral', status.ovnCentral),
      ...ifSet('dhcpCircuitId', status.dhcpCircuitId),
      ...ifSet('fabric', status.fabric),
      observedVersion: status.observedVersion ?? 0,
      ...ifSet('attempt', status.attempt),
      configsSynced: status.configsSynced ?? false,
    },
  }
}

/** The fields of one port, a host's own (as stored) or one of its interfaces' (as asked). */
function portMessage(port: DomainHost['spec'] | HostInterface) {
  return {
    resourceGroup: port.resourceGroup,
    type: RESOURCE_TYPE.toProto(port.type),
    hostMac: port.hostMAC,
    ...ifSet('hostIp', port.hostIP),
    dpu: {
      id: port.dpu.id,
      ips: [...(port.dpu.ips ?? [])],
      ...ifSet('natIp6', port.dpu.natIp6),
    },
    hostAccess: HOST_ACCESS.toProto(port.hostAccess),
    ...ifSet('identifier', port.identifier),
    ...ifSet('hostname', port.hostname),
    ...ifSet('pool', port.pool),
  }
}

export function managedResourceMessage(host: DomainHost): ManagedResource {
  const { spec, status } = host
  const access = status.hostAccessIPs
  return {
    ...envelope(host),
    spec: {
      ...portMessage(spec),
      interfaces: (spec.interfaces ?? []).map((i) => ({ name: i.name, ...portMessage(i) })),
      ...ifSet('interfaceOf', spec.interfaceOf),
    },
    status: {
      phase: MANAGED_RESOURCE_PHASE.toProto(status.phase),
      conditions: (status.conditions ?? []).map(conditionMessage),
      ...ifSet(
        'hostAccessIps',
        access && {
          ...ifSet('hostIp', access.hostIP),
          ...ifSet('hostIpv6', access.hostIPv6),
          ...ifSet('fabricIp', access.fabricIP),
          ...ifSet('fabricIpv6', access.fabricIPv6),
          ...ifSet('publicIp', access.publicIP),
          ...ifSet('publicIpv6', access.publicIPv6),
        },
      ),
      ...ifSet('logicalPortReference', status.logicalPortReference),
      ...ifSet('agent', status.agent),
      observedVersion: status.observedVersion ?? 0,
      ...ifSet('attempt', status.attempt),
      configsSynced: status.configsSynced ?? false,
    },
  }
}

export function publicIpMessage(status: DomainPublicIp): PublicIp {
  return {
    ip: status.ip,
    allocated: status.allocated,
    ...ifSet('allocatedTo', status.allocatedTo),
    ...ifSet('heldUntilIsolatedBy', status.heldUntilIsolatedBy),
  }
}

function observedMessage(o: DomainObserved): ObservedState {
  return {
    chassis: o.chassis,
    bridges: o.bridges,
    ...ifSet('ovnRemote', o.ovnRemote ?? undefined),
    ovnController: o.ovnController,
    boundPorts: o.boundPorts,
    relays: o.relays,
    vrfs: (o.vrfs ?? []).map(({ relay, ...vrf }) => ({
      ...vrf,
      vni: String(vrf.vni),
      ...ifSet('relay', relay),
    })),
  }
}

export function dpuMessage(dpu: DpuView): Dpu {
  return {
    id: dpu.id,
    ...ifSet(
      'spec',
      dpu.spec && {
        ...ifSet('tenantId', dpu.spec.tenantId),
        fabricIps: dpu.spec.fabricIps,
        ...ifSet('natIp6', dpu.spec.natIp6),
        hostPorts: dpu.spec.hostPorts,
        hostMacs: dpu.spec.hostMacs ?? {},
      },
    ),
    specVersion: dpu.specVersion ?? 0,
    state: DPU_STATE.toProto(dpu.state),
    ...ifSet('lastHeartbeat', dpu.lastHeartbeat ? timestampOf(dpu.lastHeartbeat) : undefined),
    hosts: [...dpu.hosts],
    ports: (dpu.ports ?? []).map((p) => ({
      port: p.port,
      network: DPU_PORT_NETWORK.toProto(p.network),
      ...ifSet('group', p.group),
      ...ifSet('host', p.host),
      ...ifSet('phase', p.phase),
      ...ifSet('reason', p.reason),
    })),
    ...ifSet(
      'agent',
      dpu.agent && {
        version: dpu.agent.version,
        protocolVersions: [...dpu.agent.protocolVersions],
        lastHeartbeat: timestampOf(dpu.agent.lastHeartbeat),
        heartbeatIntervalMs: dpu.agent.heartbeatIntervalMs,
        observed: observedMessage(dpu.agent.observed),
      },
    ),
  }
}

export function credentialsMessage(c: DomainCredentials): DpuCredentials {
  return { dpuId: c.dpuId, redis: c.redis, ...ifSet('tls', c.tls) }
}
