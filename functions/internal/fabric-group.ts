/**
 * `group.create` for a Fabric group: the group takes its VNI and VLAN id from the
 * operator's pools (held until the group is deleted) and its IPAM network, and is Ready:
 * no OVN central, nothing on any DPU until a host attaches (its DPU then builds the
 * group's VRF, `fabric-host.ts`). Without the fabric's AS number (`HYDRAZINE_FABRIC_ASN`)
 * no DPU can be configured for it: the group says so as a Failed status that retrying
 * cannot change.
 */
import type { FabricIds } from '../../lib/ipam/index.ts'
import { type ResourceGroup, setCondition } from '../../lib/model/objects.ts'
import type { ChangePlan } from '../../lib/model/plans.ts'
import type { HandlerDeps } from './deps.ts'
import { reconfigureMembers } from './group-members.ts'
import { defineGroupNetwork, groupFailsOn } from './group-network.ts'
import { groupFailed, setGroupStatus } from './status.ts'

/** The failure reason of a Fabric group: a spec this version cannot build (never retried). */
export const FABRIC_NOT_AVAILABLE = 'FABRIC_NOT_AVAILABLE'

/** A Fabric group's route target: `ASN:VNI`. */
export function routeTargetOf(asn: number, vni: number): string {
  return `${asn}:${vni}`
}

/**
 * The circuit id a Fabric group's DHCP relays send (option 82): the name of the group's
 * interface on each DPU, `vlan<N>` with N its VLAN id, as Carbide reads it.
 */
export function fabricCircuitIdOf(vlan: number): string {
  return `vlan${vlan}`
}

/** What one run did for a Fabric group. */
export type FabricGroupResult =
  | {
      readonly group: string
      readonly observedVersion: number
      readonly ovnChanged: false
      readonly fabric: FabricIds
      /** Hosts whose `host.attach` was started again for this version (a new DHCP server). */
      readonly reconfigured?: readonly string[]
    }
  | {
      readonly group: string
      readonly observedVersion: 0
      readonly ovnChanged: false
      readonly skipped: string
    }

/**
 * Takes the group's identifiers (the same ones on a re-run) and its IPAM network, and
 * reports the group Ready, `FabricConfigured=True`, with them in `status.fabric`. A pool
 * with none free fails the group naming the setting that widens it
 * (`FabricAllocated=False`, retried later); a network IPAM refuses fails it for good
 * (`NetworkAllocated=False`); without `HYDRAZINE_FABRIC_ASN` it is Failed,
 * `FabricConfigured=False` (`FABRIC_NOT_AVAILABLE`). A new spec that changed what its hosts'
 * DPUs are sent (its DHCP server) starts each host's `host.attach` again.
 */
export async function provisionFabricGroup(
  deps: Pick<HandlerDeps, 'store' | 'ipam' | 'checkpoint' | 'fabricAsn' | 'jobs'>,
  group: ResourceGroup,
  attempt: number,
): Promise<FabricGroupResult> {
  const { name, specVersion } = group
  await deps.checkpoint('create:fabric-ids')
  const fabric = await deps.ipam
    .allocateFabricIds(name)
    .catch(groupFailsOn(deps, group, attempt, 'FabricAllocated'))
  // A delete that ran while the ids were taken released nothing: give them back here.
  const now = await deps.store.groups.get(name)
  if (!now || now.deletion) {
    await deps.ipam.releaseFabricIds(name)
    return { group: name, observedVersion: 0, ovnChanged: false, skipped: 'being deleted' }
  }
  const held = {
    type: 'FabricAllocated',
    status: 'True',
    reason: 'IdentifiersHeld',
    message: `VNI ${fabric.vni} and VLAN ${fabric.vlan} are held for ${name}`,
  } as const
  const asn = deps.fabricAsn
  if (asn === undefined) {
    await setGroupStatus(
      deps,
      name,
      (current) => {
        const failed = groupFailed(current, {
          type: 'FabricConfigured',
          status: 'False',
          reason: FABRIC_NOT_AVAILABLE,
          message: `the fabric's AS number is not configured (HYDRAZINE_FABRIC_ASN): ${name} holds VNI ${fabric.vni} and VLAN ${fabric.vlan}, but no DPU can be configured for it and no host can attach to it; delete it, or use an Overlay group`,
        })
        return {
          ...failed,
          conditions: setCondition(failed.conditions, held),
          fabric,
          observedVersion: specVersion,
        }
      },
      specVersion,
      attempt,
    )
    return { group: name, observedVersion: specVersion, ovnChanged: false, fabric }
  }
  await deps.checkpoint('create:defining-network')
  await defineGroupNetwork(deps, group, attempt)
  await setGroupStatus(
    deps,
    name,
    ({ dhcpCircuitId: _previous, ...current }) => ({
      ...current,
      phase: 'Ready',
      conditions: setCondition(setCondition(current.conditions, held), {
        type: 'FabricConfigured',
        status: 'True',
        reason: 'VrfDefined',
        message: `${name} is VRF VNI ${fabric.vni} (route target ${routeTargetOf(asn, fabric.vni)}) on the fabric; each DPU with a host of it builds the VRF when the host attaches`,
      }),
      fabric,
      // The relays' circuit id while the group relays DHCP; gone with its dhcpServer.
      ...(group.spec.dhcpServer ? { dhcpCircuitId: fabricCircuitIdOf(fabric.vlan) } : {}),
      observedVersion: specVersion,
    }),
    specVersion,
    attempt,
  )
  // What the DPUs are sent changed (its DHCP server, its networks): each host's DPU anew.
  const reconfigured = await reconfigureMembers(deps, group, await deps.store.hosts.inGroup(name))
  return {
    group: name,
    observedVersion: specVersion,
    ovnChanged: false,
    fabric,
    ...(reconfigured.length > 0 ? { reconfigured } : {}),
  }
}

/**
 * A dry run of a Fabric group's spec: nothing in OVN, no agent job; what it would hold
 * (its VNI and VLAN id, the ones it holds already) and how it would end, as notes.
 */
export function fabricGroupPlan(
  name: string,
  held: FabricIds | undefined,
  asn: number | undefined,
): ChangePlan {
  const ids = held
    ? `it keeps VNI ${held.vni} and VLAN ${held.vlan}`
    : "it would take a VNI and a VLAN id from the operator's pools"
  return {
    dryRun: true,
    nb: { central: null, insert: [], update: [], delete: [] },
    frr: { announce: [], withdraw: [] },
    agentJobs: [],
    addresses: { allocate: [], release: [] },
    notes: [
      asn === undefined
        ? `${name} is a Fabric group: ${ids}, and would report Failed (the fabric's AS number, HYDRAZINE_FABRIC_ASN, is not configured); nothing is written to OVN`
        : `${name} is a Fabric group: ${ids} (route target ${asn}:VNI); its hosts' DPUs build its VRF as they attach; nothing is written to OVN`,
    ],
  }
}
