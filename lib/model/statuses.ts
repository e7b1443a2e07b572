/**
 * What Hydrazine reports back about its objects: each kind's status as a valibot schema,
 * and its type inferred from it. Hydrazine writes statuses itself, so they are not parsed
 * on the way out; the schemas are the one description of their shape that the HTTP and gRPC
 * APIs share: `api/grpc/model.test.ts` checks that `proto/hydrazine/v1/resources.proto` has
 * every field of them and nothing else, and the OpenAPI document's are generated from them
 * (`api/http/openapi-model.ts`). Times are ISO 8601 strings (`v.isoTimestamp()`;
 * `google.protobuf.Timestamp` in gRPC).
 */
import * as v from 'valibot'
import { FabricIdentifiers } from './network-implementation.ts'

const readonlyArray = <T extends v.GenericSchema>(item: T) => v.pipe(v.array(item), v.readonly())

/** An ISO 8601 time, e.g. `2024-05-01T12:00:00.000Z`. */
export const IsoTime = v.pipe(v.string(), v.isoTimestamp())

export const ConditionStatus = v.picklist(['True', 'False', 'Unknown'])

/** One aspect of an object's state, as Kubernetes conditions are. */
export const Condition = v.pipe(
  v.object({
    type: v.string(),
    status: ConditionStatus,
    /** CamelCase, machine-readable. */
    reason: v.string(),
    message: v.string(),
    lastTransitionTime: IsoTime,
  }),
  v.readonly(),
)
export type Condition = v.InferOutput<typeof Condition>

export const GroupPhase = v.picklist([
  'Provisioning',
  'Ready',
  'Configuring',
  'Terminating',
  'Failed',
])
export type GroupPhase = v.InferOutput<typeof GroupPhase>

export const HostPhase = v.picklist([
  'Attaching',
  'Ready',
  'Configuring',
  'Detaching',
  'Isolated',
  'Failed',
])
export type HostPhase = v.InferOutput<typeof HostPhase>

export const ResourceGroupStatus = v.object({
  phase: GroupPhase,
  conditions: v.array(Condition),
  /** The addresses the group's hosts are SNATed to. */
  snatIPs: v.array(v.string()),
  managedResourceCount: v.number(),
  softwareNetworkConfiguration: v.exactOptional(
    v.object({ ovnService: v.string(), logicalNetwork: v.string() }),
  ),
  /**
   * The group's OVN central: its NB remote (for the controller) and the SB remote its DPUs'
   * ovn-controller follow.
   */
  ovnCentral: v.exactOptional(v.object({ nb: v.string(), sb: v.string() })),
  /**
   * With a `dhcpServer`: the circuit id (RFC 3046 option 82, sub-option 1) the group's
   * DHCP relays put in every request they forward, for the server to tell groups apart.
   */
  dhcpCircuitId: v.exactOptional(v.string()),
  /** A Fabric group: its VNI and VLAN id, from the operator's pools. */
  fabric: v.exactOptional(FabricIdentifiers),
  observedVersion: v.number(),
  /** Which attempt at this spec version the status reports (absent: the first). */
  attempt: v.exactOptional(v.number()),
  configsSynced: v.boolean(),
})
export type ResourceGroupStatus = v.InferOutput<typeof ResourceGroupStatus>

/** One of a host's addresses (`hostAccessIPs`), as the API documents it. */
const address = (description: string, example: string, format?: 'ipv6') =>
  v.exactOptional(
    v.pipe(
      v.string(),
      v.description(description),
      v.metadata({ examples: [example], ...(format ? { format } : {}) }),
    ),
  )

export const ManagedResourceStatus = v.object({
  phase: HostPhase,
  conditions: v.array(Condition),
  /** The host's addresses: in its group, on the fabric and public. */
  hostAccessIPs: v.exactOptional(
    v.object({
      hostIP: address("its address in the group's network", '10.0.0.1'),
      hostIPv6: address(
        "in a dual-stack group: its SLAAC address in the group's network6",
        'fd00:10::800:ff:fe00:d11',
        'ipv6',
      ),
      fabricIP: address("where the fabric reaches it: its DPU's NAT IP", '10.0.0.1'),
      fabricIPv6: address(
        "where the fabric reaches it over IPv6: its DPU's IPv6 NAT address (natIp6, NAT66)",
        'fd00:fab::105',
        'ipv6',
      ),
      publicIP: address('a PublicAccess host: its public IP, announced as a /32', '203.0.113.10'),
      publicIPv6: address(
        'a PublicAccess host: its public IPv6 address, announced as a /128',
        '2001:db8:ff::5',
        'ipv6',
      ),
    }),
  ),
  logicalPortReference: v.exactOptional(v.object({ logicalPort: v.string(), dpu: v.string() })),
  /** What the DPU agent acknowledged: its host port and relay port. */
  agent: v.exactOptional(
    v.object({
      hostPort: v.string(),
      relayPort: v.exactOptional(v.string()),
      ovnInstalled: v.boolean(),
      specVersion: v.number(),
      /** A Fabric group's host: the VRF its port is in on the DPU. */
      vrf: v.exactOptional(v.string()),
      /** A Fabric group's host: the prefixes its DPU announces for it (EVPN type-5). */
      announced: v.exactOptional(v.array(v.string())),
    }),
  ),
  observedVersion: v.number(),
  /** Which attempt at this spec version the status reports (absent: the first). */
  attempt: v.exactOptional(v.number()),
  configsSynced: v.boolean(),
})
export type ManagedResourceStatus = v.InferOutput<typeof ManagedResourceStatus>

/**
 * What holds a public IP that is no host's: the pending isolation of a host force-detached
 * from a DPU that did not confirm it (the DPU may still announce the address).
 */
export const PublicIpHold = v.pipe(
  v.object({
    dpu: v.pipe(v.string(), v.description('the DPU that has not confirmed the isolation')),
    host: v.pipe(v.string(), v.description('the force-detached host it announced it for')),
  }),
  v.description(
    'held, not free, until the DPU confirms it isolated the host (or leaves the inventory)',
  ),
)

export const PublicIpStatus = v.object({
  /** Not free: a host has it, or a pending isolation holds it. */
  allocated: v.boolean(),
  /** The host it is allocated to. */
  allocatedTo: v.exactOptional(v.string()),
  /** What holds it while it is no host's (`allocatedTo` absent). */
  heldUntilIsolatedBy: v.exactOptional(PublicIpHold),
})
export type PublicIpStatus = v.InferOutput<typeof PublicIpStatus>

/** What the controller knows of a DPU: its inventory entry (status is its agent's report). */
export const DpuStatus = v.pipe(
  v.object({
    /** Hosts the DPU serves (live ManagedResources naming it). */
    hosts: readonlyArray(v.string()),
  }),
  v.readonly(),
)
export type DpuStatus = v.InferOutput<typeof DpuStatus>
