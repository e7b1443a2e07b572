/**
 * Status writers: each handler reports what it observed through these, never over the
 * status of a newer spec version.
 */
import {
  type Condition,
  type ManagedResourceStatus,
  type ResourceGroupStatus,
  setCondition,
} from '../../lib/state/objects.ts'
import type { HandlerDeps } from './deps.ts'

export type ConditionChange = Omit<Condition, 'lastTransitionTime'>

export interface HostStatusChange {
  readonly phase: ManagedResourceStatus['phase']
  readonly condition: ConditionChange
  readonly configsSynced?: boolean
  readonly hostAccessIPs?: ManagedResourceStatus['hostAccessIPs']
  readonly logicalPortReference?: ManagedResourceStatus['logicalPortReference']
  readonly agent?: ManagedResourceStatus['agent']
  readonly publicIp?: string
  /** The host no longer has a public IP (its access was lowered). */
  readonly clearPublicIp?: boolean
}

/** Writes a host's status for `specVersion`, never over a newer version's status. */
export async function setHostStatus(
  deps: Pick<HandlerDeps, 'store'>,
  name: string,
  specVersion: number,
  change: HostStatusChange,
): Promise<void> {
  await deps.store.updateHostStatus(name, (current) => {
    const previous = current.status
    if (previous.observedVersion > specVersion) return undefined
    const { publicIP: previousPublicIp, ...kept } = previous.hostAccessIPs ?? {}
    const hostAccessIPs = {
      // New host and fabric IPs replace the old ones as a whole (a lowered access drops
      // the fabric IP); the public IP stays until it is released.
      ...(change.hostAccessIPs ? {} : kept),
      ...(previousPublicIp && !change.clearPublicIp ? { publicIP: previousPublicIp } : {}),
      ...change.hostAccessIPs,
      ...(change.publicIp ? { publicIP: change.publicIp } : {}),
    }
    return {
      ...previous,
      phase: change.phase,
      conditions: setCondition(previous.conditions, change.condition),
      ...(Object.keys(hostAccessIPs).length > 0 ? { hostAccessIPs } : {}),
      ...(change.logicalPortReference ? { logicalPortReference: change.logicalPortReference } : {}),
      ...(change.agent ? { agent: change.agent } : {}),
      observedVersion: change.configsSynced ? specVersion : previous.observedVersion,
      configsSynced: change.configsSynced ?? false,
    }
  })
}

/**
 * Updates a group's status with `change` (given the current status), never over the
 * status of a newer spec version than `specVersion` when one is given.
 */
export async function setGroupStatus(
  deps: Pick<HandlerDeps, 'store'>,
  name: string,
  change: (current: ResourceGroupStatus) => ResourceGroupStatus,
  specVersion?: number,
): Promise<void> {
  await deps.store.updateGroupStatus(name, (current) => {
    if (specVersion !== undefined && current.status.observedVersion > specVersion) return undefined
    return change(current.status)
  })
}

/** The group failed for good with this reason (a network IPAM refuses, …). */
export function groupFailed(
  current: ResourceGroupStatus,
  condition: ConditionChange,
): ResourceGroupStatus {
  return {
    ...current,
    phase: 'Failed',
    configsSynced: false,
    conditions: setCondition(current.conditions, condition),
  }
}
