/**
 * The application: what a request means. Every front door — HTTP and webhooks, gRPC, the
 * admin UI (and through HTTP the `hz` command line), other systems' producers — asks
 * through here: `HydrazineClient` for trusted callers, `createOperations` for a caller
 * scoped to its tenant, `createPlanOperations` for their dry runs, and the refusals they
 * answer with.
 */

export type { Caller } from '../lib/model/placement.ts'
export {
  compareVersions,
  isResourceVersion,
  ResourceVersionTooOld,
} from '../lib/state/changes.ts'
export { HydrazineClient, type Plans } from './client.ts'
export {
  AddressesHeld,
  CredentialsUnavailable,
  DryRunUnavailable,
  ForbiddenError,
  ImmutableField,
  LeakedAddressTaken,
  MAX_ISSUES,
  NameTaken,
  NotFoundError,
  ValidationError,
  validate,
} from './errors.ts'
export type { PreparedGroup } from './groups.ts'
export type { PreparedHost } from './hosts.ts'
export {
  createOperations,
  type DpuView,
  type Operations,
  type OperationsDeps,
} from './operations.ts'
export type { Accepted } from './outcomes.ts'
export { createPlanOperations, type PlanOperations } from './plan-operations.ts'
export type { ClientPolicy } from './policy.ts'
export { createTracer, type TraceAnswer, type Tracer, type TracerDeps } from './trace.ts'
