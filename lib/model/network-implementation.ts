/**
 * How a group's network is built (`networkImplementationType`): `Overlay`, the software
 * overlay (the group's own OVN switch and router, Geneve between DPUs, NAT to the fabric),
 * or `Fabric`, a VRF the data-centre fabric carries (a VNI per group, no NAT, no OVN
 * central). Chosen when the group is created and never changed; a request that leaves it
 * out gets the operator's default (`HYDRAZINE_DEFAULT_NETWORK_IMPLEMENTATION`), stored as
 * part of the spec. A group stored before the field existed is an Overlay group.
 */
import * as v from 'valibot'

export const NETWORK_IMPLEMENTATION_TYPES = ['Overlay', 'Fabric'] as const

export const NetworkImplementationType = v.pipe(
  v.picklist(NETWORK_IMPLEMENTATION_TYPES, 'must be Overlay or Fabric'),
  v.description(
    "how the group's network is built (immutable): Overlay (its own OVN switch and router, NAT to the fabric) or Fabric (a VRF the data-centre fabric carries: a VNI and VLAN id from the operator's pools, no OVN central, no NAT; each host's DPU puts it in the group's VRF and announces its /32 as an EVPN type-5 route; hosts reach only their own group, hostAccess None; without the operator's HYDRAZINE_FABRIC_ASN the group reports Failed and takes no hosts); default the operator's HYDRAZINE_DEFAULT_NETWORK_IMPLEMENTATION",
  ),
)
export type NetworkImplementationType = v.InferOutput<typeof NetworkImplementationType>

/** A group's implementation: its stored one, Overlay for a group stored before the field. */
export function implementationOf(spec: {
  readonly networkImplementationType?: NetworkImplementationType | undefined
}): NetworkImplementationType {
  return spec.networkImplementationType ?? 'Overlay'
}

/**
 * A Fabric group's identifiers on the fabric (`status.fabric`): its VNI (the L3VNI of its
 * VRF) and its VLAN id, each from the operator's pool (`HYDRAZINE_FABRIC_VNIS`,
 * `HYDRAZINE_FABRIC_VLANS`), held until the group is deleted.
 */
export const FabricIdentifiers = v.object({
  vni: v.pipe(v.number(), v.description("the group's VNI (its VRF's L3VNI on the fabric)")),
  vlan: v.pipe(v.number(), v.description("the group's VLAN id on its DPUs' host side")),
})
export type FabricIdentifiers = v.InferOutput<typeof FabricIdentifiers>
