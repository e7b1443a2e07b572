/**
 * Each object's history as the API shows it (`GET /v1/{kind}/{name}/events`): its events,
 * and the events a status change makes. The store keeps them (`lib/state/events.ts`).
 */
import { INFORMATIONAL_CONDITIONS } from './attempts.ts'
import type { Condition } from './objects.ts'

/** The kinds of object that have events (the store's own kind names). */
export type EventKind = 'rg' | 'mr' | 'dpu'

export interface ObjectEvent {
  /** ISO time it happened. */
  readonly at: string
  /** `Warning` when something went wrong or was repaired, `Normal` otherwise. */
  readonly type: 'Normal' | 'Warning'
  /** A stable CamelCase reason (`Ready`, `PoolExhausted`, `Repaired`, `HeartbeatLost`, …). */
  readonly reason: string
  readonly message: string
}

/**
 * A DPU's event as the store keeps it: with whose it is. A DPU serves one tenant at a time,
 * and its events name that tenant's groups, hosts and ports, so each belongs to the tenant
 * it is about — the one holding the DPU when it happened, or the tenant of the group a port
 * it names is of — and only that tenant reads it; `null`: operators only (a port of a group
 * gone). Absent (written by an earlier version, which cleared a DPU's history when it
 * changed tenant): the DPU's current tenant's.
 */
export interface StoredDpuEvent extends ObjectEvent {
  readonly tenant?: string | null
}

/** Whether `tenant` may read this DPU event (operators read them all). */
export function dpuEventVisibleTo(event: StoredDpuEvent, tenant: string): boolean {
  return event.tenant === undefined || event.tenant === tenant
}

interface Observed {
  readonly phase: string
  readonly conditions: readonly Condition[]
}

/**
 * The events a status change makes: one per phase transition, and one per condition
 * whose status or reason changed (a condition that went away is not an event).
 */
export function transitionEvents(
  before: Observed | undefined,
  after: Observed,
): Omit<ObjectEvent, 'at'>[] {
  const events: Omit<ObjectEvent, 'at'>[] = []
  if (before?.phase !== after.phase) {
    const cause = [...after.conditions]
      .reverse()
      .find((c) => c.status === 'False' && !sameCondition(before, c))
    events.push({
      type: after.phase === 'Failed' ? 'Warning' : 'Normal',
      reason: after.phase,
      message: `${before ? `${before.phase} → ` : ''}${after.phase}${cause ? `: ${cause.reason}: ${cause.message}` : ''}`,
    })
  }
  for (const c of after.conditions) {
    if (sameCondition(before, c)) continue
    events.push({
      type: c.status === 'False' && !INFORMATIONAL_CONDITIONS.has(c.type) ? 'Warning' : 'Normal',
      reason: c.reason,
      message: `${c.type}=${c.status}${c.message ? `: ${c.message}` : ''}`,
    })
  }
  return events
}

function sameCondition(before: Observed | undefined, c: Condition): boolean {
  const old = before?.conditions.find((o) => o.type === c.type)
  return old !== undefined && old.status === c.status && old.reason === c.reason
}

/** A status with a phase and conditions (groups' and hosts'), whose changes are events. */
export function isObserved(status: unknown): status is Observed {
  return (
    typeof status === 'object' &&
    status !== null &&
    typeof (status as { phase?: unknown }).phase === 'string' &&
    Array.isArray((status as { conditions?: unknown }).conditions)
  )
}
