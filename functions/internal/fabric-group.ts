/**
 * `group.create` for a Fabric group, as far as this version goes: the group takes its VNI
 * and VLAN id from the operator's pools (held until the group is deleted) and then says,
 * as a Failed status that retrying cannot change, that Fabric mode's DPU side is not
 * available. No OVN central, no IPAM network and no DPU is touched: nothing pretends the
 * group works.
 */
import type { FabricIds } from '../../lib/ipam/index.ts'
import { type ResourceGroup, setCondition } from '../../lib/model/objects.ts'
import type { ChangePlan } from '../../lib/model/plans.ts'
import type { HandlerDeps } from './deps.ts'
import { failOrRetry } from './errors.ts'
import { groupFailed, setGroupStatus } from './status.ts'

/** The failure reason of a Fabric group: a spec this version cannot build (never retried). */
export const FABRIC_NOT_AVAILABLE = 'FABRIC_NOT_AVAILABLE'

/** What one run did for a Fabric group. */
export type FabricGroupResult =
  | {
      readonly group: string
      readonly observedVersion: number
      readonly ovnChanged: false
      readonly fabric: FabricIds
    }
  | {
      readonly group: string
      readonly observedVersion: 0
      readonly ovnChanged: false
      readonly skipped: string
    }

/**
 * Takes the group's identifiers (the same ones on a re-run) and reports the group Failed,
 * `FabricConfigured=False`, with them in `status.fabric`. A pool with none free fails the
 * group naming the setting that widens it (`FabricAllocated=False`, retried later).
 */
export async function provisionFabricGroup(
  deps: Pick<HandlerDeps, 'store' | 'ipam' | 'checkpoint'>,
  group: ResourceGroup,
  attempt: number,
): Promise<FabricGroupResult> {
  const { name, specVersion } = group
  await deps.checkpoint('create:fabric-ids')
  const fabric = await deps.ipam.allocateFabricIds(name).catch((error: unknown) =>
    failOrRetry(error, (e) =>
      setGroupStatus(
        deps,
        name,
        (current) =>
          groupFailed(current, {
            type: 'FabricAllocated',
            status: 'False',
            reason: e.code,
            message: e.message,
          }),
        specVersion,
        attempt,
      ),
    ),
  )
  // A delete that ran while the ids were taken released nothing: give them back here.
  const now = await deps.store.groups.get(name)
  if (!now || now.deletion) {
    await deps.ipam.releaseFabricIds(name)
    return { group: name, observedVersion: 0, ovnChanged: false, skipped: 'being deleted' }
  }
  await setGroupStatus(
    deps,
    name,
    (current) => {
      const failed = groupFailed(current, {
        type: 'FabricConfigured',
        status: 'False',
        reason: FABRIC_NOT_AVAILABLE,
        message: `Fabric mode's DPU side is not available in this version of Hydrazine: ${name} holds VNI ${fabric.vni} and VLAN ${fabric.vlan}, but no DPU is configured for it and no host can attach to it; delete it, or use an Overlay group`,
      })
      return {
        ...failed,
        conditions: setCondition(failed.conditions, {
          type: 'FabricAllocated',
          status: 'True',
          reason: 'IdentifiersHeld',
          message: `VNI ${fabric.vni} and VLAN ${fabric.vlan} are held for ${name}`,
        }),
        fabric,
        observedVersion: specVersion,
      }
    },
    specVersion,
    attempt,
  )
  return { group: name, observedVersion: specVersion, ovnChanged: false, fabric }
}

/**
 * A dry run of a Fabric group's spec: nothing in OVN, no agent job; what it would hold
 * (its VNI and VLAN id, the ones it holds already) and how it would end, as notes.
 */
export function fabricGroupPlan(name: string, held: FabricIds | undefined): ChangePlan {
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
      `${name} is a Fabric group: ${ids}, and would report Failed (Fabric mode's DPU side is not available in this version of Hydrazine); nothing is written to OVN`,
    ],
  }
}
