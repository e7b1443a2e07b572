/**
 * Status writers: each handler reports what it observed through these, never over the
 * status of a newer spec version or a newer attempt at the same one. A host's write drops
 * the conditions its new phase makes meaningless (`conditionsOnEntering`): a Ready status
 * keeps no False or Unknown condition from an earlier step or attempt (health aside).
 */
import { attemptOf, conditionsOnEntering, withoutFailures } from '../../lib/model/attempts.ts'
import {
  type Condition,
  type ManagedResource,
  type ManagedResourceStatus,
  type ResourceGroupStatus,
  type StoredObject,
  setCondition,
} from '../../lib/model/objects.ts'
import type { KeptObject } from '../../lib/state/object-records.ts'
import type { HandlerDeps } from './deps.ts'

export type ConditionChange = Omit<Condition, 'lastTransitionTime'>

/** A host as a status write reads it. */
export type StoredHost = StoredObject<unknown, ManagedResourceStatus>

/** A host as a job works on it: its stored object and the attempt the job is. */
export type HostAttempt = ManagedResource & { readonly attempt: number }

export interface HostStatusChange {
  readonly phase: ManagedResourceStatus['phase']
  readonly condition: ConditionChange
  readonly configsSynced?: boolean
  readonly hostAccessIPs?: ManagedResourceStatus['hostAccessIPs']
  readonly logicalPortReference?: ManagedResourceStatus['logicalPortReference']
  readonly agent?: ManagedResourceStatus['agent']
  readonly publicIp?: string
  readonly publicIp6?: string
  /** The host no longer has a public IP (its access was lowered). */
  readonly clearPublicIp?: boolean
  /** The host no longer has a public IPv6 address (IPv6 no longer leaves its group). */
  readonly clearPublicIp6?: boolean
  /** The attempt this report is from (default 1); an older attempt's report is dropped. */
  readonly attempt?: number
}

/**
 * Writes a host's status for `specVersion`, never over a newer version's status. A write
 * that turns the host Ready tells `onHostReady` how long it took since its spec was
 * accepted. `change` may depend on the host as the write finds it (its current spec
 * version, say): a function of it, called with each read the write makes. `read`: the
 * host as the job read it (`hosts.getKept`), which the write starts from instead of
 * reading it again, unless it changed since.
 */
export async function setHostStatus(
  deps: Pick<HandlerDeps, 'store' | 'onHostReady' | 'groupHosts'>,
  host: Pick<ManagedResource, 'name' | 'specVersion' | 'spec'>,
  changeOf: HostStatusChange | ((current: StoredHost) => HostStatusChange),
  read?: KeptObject<ManagedResource>,
): Promise<void> {
  const { name, specVersion } = host
  /** When the spec this write turns Ready was accepted (ms), if it does. */
  let acceptedAt: number | undefined
  const written = await deps.store.hosts.updateStatus(
    name,
    (current) => {
      const previous = current.status
      const change = typeof changeOf === 'function' ? changeOf(current) : changeOf
      acceptedAt = undefined
      if (previous.observedVersion > specVersion) return undefined
      if (attemptOf(previous) > (change.attempt ?? 1)) return undefined
      if (change.phase === 'Ready' && previous.phase !== 'Ready') {
        acceptedAt = Date.parse(current.updatedAt)
      }
      const {
        publicIP: previousPublicIp,
        publicIPv6: previousPublicIp6,
        ...kept
      } = previous.hostAccessIPs ?? {}
      const hostAccessIPs = {
        // New host and fabric IPs replace the old ones as a whole (a lowered access drops
        // the fabric IP); the public IP stays until it is released.
        ...(change.hostAccessIPs ? {} : kept),
        ...(previousPublicIp && !change.clearPublicIp ? { publicIP: previousPublicIp } : {}),
        ...(previousPublicIp6 && !change.clearPublicIp && !change.clearPublicIp6
          ? { publicIPv6: previousPublicIp6 }
          : {}),
        ...change.hostAccessIPs,
        ...(change.publicIp ? { publicIP: change.publicIp } : {}),
        ...(change.publicIp6 ? { publicIPv6: change.publicIp6 } : {}),
      }
      // What the new phase makes meaningless goes first; the change's own condition stays.
      const conditions = setCondition(
        conditionsOnEntering(change.phase, previous.conditions),
        change.condition,
      )
      return {
        ...previous,
        phase: change.phase,
        conditions: change.phase === 'Ready' ? withoutFailures(conditions) : conditions,
        ...(Object.keys(hostAccessIPs).length > 0 ? { hostAccessIPs } : {}),
        ...(change.logicalPortReference
          ? { logicalPortReference: change.logicalPortReference }
          : {}),
        ...(change.agent ? { agent: change.agent } : {}),
        observedVersion: change.configsSynced ? specVersion : previous.observedVersion,
        configsSynced: change.configsSynced ?? false,
      }
    },
    read,
  )
  // The group's status follows shortly; the host's job does not wait for it.
  if (written) void deps.groupHosts?.touch(host.spec.resourceGroup)
  if (written && acceptedAt !== undefined && Number.isFinite(acceptedAt)) {
    deps.onHostReady?.(Math.max(0, Date.now() - acceptedAt) / 1000)
  }
}

/**
 * Updates a group's status with `change` (given the current status), never over the
 * status of a newer spec version than `specVersion`, or of a newer attempt than
 * `attempt`, when they are given.
 */
export async function setGroupStatus(
  deps: Pick<HandlerDeps, 'store'>,
  name: string,
  change: (current: ResourceGroupStatus) => ResourceGroupStatus,
  specVersion?: number,
  attempt?: number,
): Promise<void> {
  await deps.store.groups.updateStatus(name, (current) => {
    if (specVersion !== undefined && current.status.observedVersion > specVersion) return undefined
    if (attempt !== undefined && attemptOf(current.status) > attempt) return undefined
    const changed = change(current.status)
    // A transition drops what the new phase makes meaningless; the change's own stay.
    const next =
      changed.phase === current.status.phase
        ? changed
        : { ...changed, conditions: conditionsOnEntering(changed.phase, changed.conditions) }
    return next.phase === 'Ready' ? { ...next, conditions: withoutFailures(next.conditions) } : next
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
    conditions: setCondition(conditionsOnEntering('Failed', current.conditions), condition),
  }
}
