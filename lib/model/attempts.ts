/**
 * Attempts: how a Failed object is tried again at the same spec version, and what its
 * status says while it is. Conditions describe the current attempt; only health
 * conditions (what is observed of the world, like a DPU's heartbeat) outlive it.
 */
import type { Condition } from './objects.ts'

/**
 * Conditions that report the world, not an attempt: a new attempt keeps them, and a Ready
 * object may show them False (a DPU's heartbeat; a group whose OVN central does not run
 * because it has no hosts).
 */
export const HEALTH_CONDITIONS: ReadonlySet<string> = new Set(['DpuHealthy', 'CentralRunning'])

/** Conditions whose False is a fact, not a fault: its event is Normal, not a Warning. */
export const INFORMATIONAL_CONDITIONS: ReadonlySet<string> = new Set(['CentralRunning'])

/**
 * Failure reasons retrying cannot cure: the spec itself is refused. Every other reason
 * (a pool that was empty, a central or agent that did not answer, retries spent) may go
 * away, and the controller tries again with backoff.
 */
export const SPEC_FAILURES: ReadonlySet<string> = new Set([
  'IPAM_INVALID',
  'OVERLAP',
  'TOPOLOGY_SPEC_INVALID',
  'TOPOLOGY_NAT_CONFLICT',
  // A Fabric group: this version has no DPU side for Fabric mode.
  'FABRIC_NOT_AVAILABLE',
])

/** The first automatic retry waits this long; each next one twice as long. */
export const RETRY_BASE_MS = 15_000
/** The longest wait between automatic retries. */
export const RETRY_MAX_MS = 10 * 60_000

interface Attempted {
  readonly phase: string
  readonly conditions: readonly Condition[]
  readonly configsSynced: boolean
  readonly attempt?: number
}

/** The attempt a status belongs to (1 before any re-drive). */
export function attemptOf(status: { readonly attempt?: number }): number {
  return status.attempt ?? 1
}

/**
 * The status of a new attempt: the next attempt number, the given phase, the health
 * conditions kept and `cause` as the one condition saying why it started.
 */
export function startAttempt<S extends Attempted>(
  status: S,
  phase: S['phase'],
  cause: Omit<Condition, 'lastTransitionTime'>,
  now = new Date(),
): S {
  const kept = status.conditions.filter((c) => HEALTH_CONDITIONS.has(c.type))
  return {
    ...status,
    phase,
    attempt: attemptOf(status) + 1,
    configsSynced: false,
    conditions: [...kept, { ...cause, lastTransitionTime: now.toISOString() }],
  }
}

/** Conditions once the object is Ready: none left False from an earlier step or attempt. */
export function withoutFailures(conditions: readonly Condition[]): Condition[] {
  return conditions.filter((c) => c.status !== 'False' || HEALTH_CONDITIONS.has(c.type))
}

/**
 * A host's or group's conditions once it is in `phase`: what the phase makes meaningless goes, so
 * that no condition outlives what it describes (health conditions always stay).
 *
 * - Past attaching (`Configuring`, `Ready`, `Detaching`): `Attached` unless True — an
 *   attempt's start (`Unknown Retrying`) or an earlier failure no longer holds once the
 *   host's port is in its group's topology, or once it leaves it.
 * - `Ready`: nothing False or Unknown (no step is pending, none failed).
 * - `Failed`: nothing Unknown (the attempt that started ended) and no wait
 *   (`AwaitingAgent`): the failure condition says where it stands.
 * - `Detaching`: no `AgentConfigured` unless True (nobody waits for a `configure` now).
 * - A group's `Terminating`: nothing Unknown (no attempt at its spec goes on).
 *
 * @example
 * conditionsOnEntering('Configuring', [retrying]) // [] — `Attached=Unknown Retrying` is gone
 */
export function conditionsOnEntering(phase: string, conditions: readonly Condition[]): Condition[] {
  return conditions.filter((c) => HEALTH_CONDITIONS.has(c.type) || meaningfulIn(phase, c))
}

function meaningfulIn(phase: string, c: Condition): boolean {
  switch (phase) {
    case 'Configuring':
      return c.type !== 'Attached' || c.status === 'True'
    case 'Ready':
      return c.status === 'True'
    case 'Failed':
      return c.status !== 'Unknown' && c.reason !== 'AwaitingAgent'
    case 'Detaching':
      return (c.type !== 'Attached' && c.type !== 'AgentConfigured') || c.status === 'True'
    case 'Terminating':
      return c.status !== 'Unknown'
    default:
      return true
  }
}

/** The condition that made a Failed status fail (the newest False one that is not health). */
export function failureOf(status: Attempted): Condition | undefined {
  if (status.phase !== 'Failed') return undefined
  return status.conditions
    .filter((c) => c.status === 'False' && !HEALTH_CONDITIONS.has(c.type))
    .sort((a, b) => (a.lastTransitionTime < b.lastTransitionTime ? -1 : 1))
    .at(-1)
}

/** How long after failing attempt `attempt` the controller tries again. */
export function retryDelayMs(attempt: number): number {
  return Math.min(RETRY_MAX_MS, RETRY_BASE_MS * 2 ** Math.max(0, attempt - 1))
}

/**
 * When a Failed status is tried again by the controller: undefined when it is not Failed
 * or its failure is the spec's own (only a new spec can cure it).
 */
export function retryAt(status: Attempted): Date | undefined {
  const failure = failureOf(status)
  if (!failure || SPEC_FAILURES.has(failure.reason)) return undefined
  const failedAt = Date.parse(failure.lastTransitionTime)
  if (Number.isNaN(failedAt)) return new Date(0)
  return new Date(failedAt + retryDelayMs(attemptOf(status)))
}
