/**
 * What the writes share: what a write answers (`Accepted`), the condition an object the
 * same spec is applied to again while Failed starts its new attempt with, and the planner
 * a dry run needs.
 */
import type { Planner } from '../lib/model/plans.ts'
import { DryRunUnavailable } from './errors.ts'

export interface Accepted<T> {
  readonly object: T
  /** The job that converges it; absent when nothing changed and nothing was enqueued. */
  readonly jobId?: string
}

/** The condition a re-driven object starts its new attempt with. */
export function sameSpecAgain(type: string) {
  return {
    type,
    status: 'Unknown',
    reason: 'Retrying',
    message: 'the same spec was applied again while Failed: a new attempt started',
  } as const
}

/** The planner, or DryRunUnavailable when this client was built without one. */
export function plannerOf(deps: { readonly planner?: Planner | undefined }): Planner {
  if (!deps.planner) throw new DryRunUnavailable()
  return deps.planner
}
