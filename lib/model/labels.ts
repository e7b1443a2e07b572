/**
 * The name format every Hydrazine object and rule name follows, apart from the schemas
 * that use it (`objects.ts`, `policies.ts`), so that both can import it.
 */
import * as v from 'valibot'

/** RFC 1123 label: lowercase letters, digits and `-`, 1–63 characters, no `-` at either end. */
export const Rfc1123Label = v.pipe(
  v.string(),
  v.regex(
    /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/,
    'must be an RFC 1123 label: lowercase letters, digits and -, at most 63, not starting or ending with -',
  ),
)

/**
 * The controller's certificate name, which DPU agents answer on gRPC by default
 * (`--grpc-clients`): a DPU's certificate is named for its id, so no DPU may take it.
 */
export const CONTROLLER_IDENTITY = 'hydrazine-controller'

/** A DPU's id: an RFC 1123 label other than the controller's identity. */
export const DpuId = v.pipe(
  Rfc1123Label,
  v.check(
    (id) => id !== CONTROLLER_IDENTITY,
    `is reserved: ${CONTROLLER_IDENTITY} is the controller's identity`,
  ),
)
