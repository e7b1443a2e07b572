/**
 * The job contract for a host of a Fabric group on its DPU (protocol major 3): the same
 * `configure` / `isolate` job names as an Overlay host, with payloads that carry no OVN
 * at all. The group is a VRF on the DPU, its L3VNI towards the fabric (RT = ASN:VNI);
 * the host's port goes into it with the group's anycast gateway address(es), and the
 * host's /32 (/128) is announced from the DPU's own FRR as an EVPN type-5 route.
 *
 * Only an agent that advertises `3.0` is sent these: an older agent cannot mistake one for
 * an Overlay job, since it refuses a major it does not know. Minor 1 adds the host's
 * access level (`host.access`, absent: `None`) and its public IP: an agent that advertises
 * `3.1` marks a leaking host's routes for the fabric's border and keeps a `None` host's
 * traffic inside its group; a host that leaks is sent only to such an agent.
 */
import { isIP, isIPv4 } from 'node:net'
import * as v from 'valibot'
import {
  DpuId,
  InterfaceName,
  MAX_REPORTED_PORTS,
  mac,
  name,
  reported,
  reportedList,
  specVersion,
} from './fields.ts'

/** The protocol version of every Fabric job. */
export const FABRIC_PROTOCOL_VERSION = '3.1'

/** True when an agent that advertises `versions` takes Fabric jobs. */
export function speaksFabric(versions: readonly string[]): boolean {
  return versions.some((version) => Number(version.split('.')[0]) === 3)
}

/** True when an agent that advertises `versions` builds Fabric hosts' access levels (3.1+). */
export function speaksFabricAccess(versions: readonly string[]): boolean {
  return versions.some((version) => {
    const [major, minor] = version.split('.').map(Number)
    return major === 3 && (minor ?? 0) >= 1
  })
}

/**
 * A Fabric host's access level, as its DPU builds it: `None` keeps its traffic inside its
 * group; `FabricAccess` marks its /32 (/128) for the border to leak into the data centre;
 * `PublicAccess` also routes and marks its public IP.
 */
export const FabricAccess = v.picklist(['None', 'FabricAccess', 'PublicAccess'])
export type FabricAccess = v.InferOutput<typeof FabricAccess>

/**
 * The BGP large community a DPU puts on a leaked route, `ASN:1:1` (the host's own address,
 * FabricAccess and PublicAccess) or `ASN:1:2` (its public IP): the border leaks only routes
 * that carry one. Pure.
 */
export function leakCommunityOf(asn: number, what: 'fabric' | 'public'): string {
  return `${asn}:1:${what === 'fabric' ? 1 : 2}`
}

const ipAddress = v.pipe(
  v.string(),
  v.check((s) => isIP(s) !== 0, 'must be an IPv4 or IPv6 address'),
)
const protocolVersion = v.pipe(
  v.string(),
  v.maxLength(16),
  v.regex(/^3\.\d+$/, "must be '3.MINOR'"),
)
export const Vni = v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(16_777_215))
const asn = v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(4_294_967_295))

/** An address with the prefix length of its subnet: the gateway is an anycast `/32` on the port. */
const Gateway = v.pipe(
  v.object({
    address: ipAddress,
    prefixLength: v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(128)),
  }),
  v.check(
    (g) => g.prefixLength <= (isIPv4(g.address) ? 32 : 128),
    'prefixLength must fit the address family',
  ),
)

/** One address per family at most, both in the group's subnets (the controller allocated them). */
const addresses = v.pipe(
  v.array(ipAddress),
  v.minLength(1, 'must hold the host address'),
  v.maxLength(2, 'must hold at most one address per family'),
  v.check(
    (list) => new Set(list.map((a) => isIP(a))).size === list.length,
    'must hold at most one address per family',
  ),
)

export const FabricGroup = v.pipe(
  v.object({
    name,
    /** The group's L3VNI on the fabric. */
    vni: Vni,
    /** The group's VLAN id (the host side; the DHCP relay's circuit id is `vlan<N>`). */
    vlan: v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(4094)),
    /** The fabric's (and the DPU's) BGP AS number. */
    asn,
    /** `ASN:VNI`: what the group's type-5 routes carry and import. */
    routeTarget: v.pipe(v.string(), v.regex(/^\d+:\d+$/, "must be 'ASN:VNI'")),
    /** The group's gateway address per family, answered on every host port of it. */
    gateways: v.pipe(
      v.array(Gateway),
      v.minLength(1, 'must hold the IPv4 or IPv6 gateway'),
      v.maxLength(2),
    ),
    /** The group's DHCP server: the agent relays the hosts' requests to it. */
    dhcpServer: v.optional(v.pipe(v.string(), v.check(isIPv4, 'must be an IPv4 address'))),
  }),
  v.check((g) => g.routeTarget === `${g.asn}:${g.vni}`, 'routeTarget must be ASN:VNI'),
)
export type FabricGroup = v.InferOutput<typeof FabricGroup>

const publicIpv4 = v.pipe(v.string(), v.check(isIPv4, 'must be an IPv4 address'))

export const FabricConfigurePayload = v.object({
  protocolVersion,
  dpuId: DpuId,
  specVersion,
  group: FabricGroup,
  host: v.pipe(
    v.object({
      name,
      mac,
      /** The DPU-side interface of the host (a representor; a veth end in the lab). */
      hostPort: v.optional(InterfaceName),
      mtu: v.optional(v.pipe(v.number(), v.integer(), v.minValue(576), v.maxValue(9216))),
      /** The host's addresses: each announced as a /32 (/128) in the group's VRF. */
      addresses,
      /** Added in 3.1: what the host may reach and be reached from; absent: `None`. */
      access: v.optional(FabricAccess),
      /** Added in 3.1: the public IP routed to the host (PublicAccess only). */
      publicIp: v.optional(publicIpv4),
      /**
       * Added in 3.1: a public IP the host held and no longer has (its access lowered): its
       * route goes from the VRF, and the DPU announces it no more.
       */
      withdrawPublicIp: v.optional(publicIpv4),
    }),
    v.forward(
      v.check(
        (h) => (h.publicIp !== undefined) === (h.access === 'PublicAccess'),
        'a PublicAccess host, and only one, has a public IP',
      ),
      ['publicIp'],
    ),
    v.forward(
      v.check(
        (h) =>
          h.withdrawPublicIp === undefined ||
          (h.withdrawPublicIp !== h.publicIp && !h.addresses.includes(h.withdrawPublicIp)),
        "a public IP withdrawn is neither the host's public IP nor one of its addresses",
      ),
      ['withdrawPublicIp'],
    ),
  ),
})
export type FabricConfigurePayload = v.InferOutput<typeof FabricConfigurePayload>

export const FabricIsolatePayload = v.object({
  protocolVersion,
  dpuId: DpuId,
  specVersion,
  group: v.object({ name, vni: Vni }),
  host: v.object({
    name,
    hostPort: v.optional(InterfaceName),
    /** What the host held: withdrawn whatever the DPU shows. */
    addresses: v.pipe(v.array(ipAddress), v.maxLength(2)),
    /** Added in 3.1: the public IP the host held, withdrawn too. */
    publicIp: v.optional(publicIpv4),
  }),
})
export type FabricIsolatePayload = v.InferOutput<typeof FabricIsolatePayload>

/** One Fabric group's VRF on a DPU, as the agent sees it (in acks and heartbeats). */
export const ObservedVrf = v.object({
  group: reported,
  vrf: reported,
  vni: v.number(),
  ports: reportedList(reported, MAX_REPORTED_PORTS),
  /** The host prefixes its FRR announces from this VRF (`10.0.0.5/32`). */
  announced: reportedList(reported, 512),
  /** The group's DHCP relay on its interface: the circuit id it sends (`vlan<N>`). */
  relay: v.optional(v.object({ circuitId: reported, dhcpServer: reported, running: v.boolean() })),
})
export type ObservedVrf = v.InferOutput<typeof ObservedVrf>

/** What `configure` of a Fabric host answers: the port is in the VRF, its prefixes announced. */
export const FabricConfigureAck = v.object({
  dpuId: reported,
  specVersion,
  protocolVersion: reported,
  hostPort: reported,
  vrf: reported,
  /** The host prefixes FRR has in the group's VRF RIB for EVPN (`10.0.0.5/32`). */
  announced: reportedList(reported, 4),
  /** The group's relay on the host port, with the circuit id it sends (`vlan<N>`). */
  relay: v.optional(v.object({ port: reported, circuitId: reported })),
  chassis: reported,
})
export type FabricConfigureAck = v.InferOutput<typeof FabricConfigureAck>

/** What `isolate` of a Fabric host answers: its prefixes withdrawn, the port out of the VRF. */
export const FabricIsolateAck = v.object({
  dpuId: reported,
  specVersion,
  protocolVersion: reported,
  hostPort: reported,
  withdrawn: v.boolean(),
  chassis: reported,
})
export type FabricIsolateAck = v.InferOutput<typeof FabricIsolateAck>

/** What the controller knows about a Fabric host on one DPU. */
export type FabricConfigureInput = Omit<FabricConfigurePayload, 'protocolVersion'>
export type FabricIsolateInput = Omit<FabricIsolatePayload, 'protocolVersion'>

/** Builds (and validates) a Fabric host's `configure` payload. */
export function buildFabricConfigurePayload(input: FabricConfigureInput): FabricConfigurePayload {
  return v.parse(FabricConfigurePayload, { ...input, protocolVersion: FABRIC_PROTOCOL_VERSION })
}

/** Builds (and validates) a Fabric host's `isolate` payload. */
export function buildFabricIsolatePayload(input: FabricIsolateInput): FabricIsolatePayload {
  return v.parse(FabricIsolatePayload, { ...input, protocolVersion: FABRIC_PROTOCOL_VERSION })
}
