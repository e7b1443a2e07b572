/**
 * How the application refuses a request: a malformed one with every bad field named
 * (`validate`, `ValidationError`), a missing object, a name another tenant holds, a
 * caller not allowed to, or credentials this Hydrazine cannot issue. Each ingress maps
 * their codes to its own statuses (`api/errors.ts`).
 */
import * as v from 'valibot'
import { HydrazineError } from '../lib/errors.ts'

/** The request is malformed; `issues` names every bad field (HTTP 400). */
export class ValidationError extends HydrazineError {
  constructor(readonly issues: readonly { path: string; message: string }[]) {
    super('INVALID', `invalid request: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`)
  }
}

/**
 * A group's new spec would leave a held address behind (a subnet dropped while a host
 * holds an address in it, a new gateway a host holds): HTTP 409, naming the field.
 */
export class AddressesHeld extends HydrazineError {
  constructor(readonly issues: readonly { path: string; message: string }[]) {
    super(
      'CONFLICT',
      `the change would orphan held addresses: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`,
    )
  }
}

/**
 * A Fabric host would leak, at the fabric's border, an address another host leaks already
 * (groups' CIDRs may overlap; the border's table may not): HTTP 409, naming the field.
 */
export class LeakedAddressTaken extends HydrazineError {
  constructor(readonly issues: readonly { path: string; message: string }[]) {
    super('CONFLICT', `address taken: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`)
  }
}

/** A change of a field that never changes once the object exists: HTTP 409, naming it. */
export class ImmutableField extends HydrazineError {
  constructor(readonly issues: readonly { path: string; message: string }[]) {
    super('CONFLICT', `immutable: ${issues.map((i) => `${i.path}: ${i.message}`).join('; ')}`)
  }
}

/** This Hydrazine issues no DPU credentials (its Redis is not one it manages). */
export class CredentialsUnavailable extends HydrazineError {
  constructor() {
    super('CREDENTIALS_UNAVAILABLE', 'this Hydrazine cannot issue DPU credentials')
  }
}

/** The object does not exist (HTTP 404). */
export class NotFoundError extends HydrazineError {
  constructor(
    readonly kind: string,
    readonly objectName: string,
  ) {
    super('NOT_FOUND', `${kind} ${objectName} does not exist`)
  }
}

/** The caller's credentials are valid but do not allow this (HTTP 403, gRPC PERMISSION_DENIED). */
export class ForbiddenError extends HydrazineError {
  constructor(message = 'only an operator token may do this') {
    super('FORBIDDEN', message)
  }
}

/**
 * A tenant asked for a name another tenant holds. Names are global (like DNS names): the
 * answer says only that the name is taken — never by whom, nor anything of the object.
 */
export class NameTaken extends HydrazineError {
  constructor(kind: string, name: string) {
    super('NAME_TAKEN', `the ${kind} name ${name} is not available; choose another`)
  }
}

/** This client was built without a planner (no OVN central to plan against). */
export class DryRunUnavailable extends HydrazineError {
  constructor() {
    super('DRY_RUN_UNAVAILABLE', 'dry runs are not available on this client', { retryable: false })
  }
}

/** Most field issues one refusal lists. */
export const MAX_ISSUES = 20

/**
 * `input` parsed by `schema`, or a ValidationError naming each bad field (at most
 * `MAX_ISSUES`), each path after `prefix`.
 *
 * @example validate(Rfc1123Label, name, 'name')
 */
export function validate<S extends v.GenericSchema>(
  schema: S,
  input: unknown,
  prefix = '',
): v.InferOutput<S> {
  const result = v.safeParse(schema, input)
  if (!result.success) {
    const issues = result.issues.map((i) => ({
      path: `${prefix}${v.getDotPath(i) ?? ''}` || '(body)',
      message: i.message,
    }))
    // A large bad body (thousands of bad items) gets a short answer, not one per item.
    const more = issues.length - MAX_ISSUES
    throw new ValidationError(
      more > 0
        ? [
            ...issues.slice(0, MAX_ISSUES),
            { path: '(body)', message: `and ${more} more invalid fields` },
          ]
        : issues,
    )
  }
  return result.output
}
