/**
 * The schemas of the OpenAPI description (`openapi.ts`) that the model has, generated
 * from its valibot schemas by `@valibot/to-json-schema`: each kind's spec
 * (`lib/model/objects.ts`, `policies.ts`, `group-network.ts`), its status (`statuses.ts`)
 * and the Carbide webhook event (`events.ts`). A field added to the model is in the
 * document; its `v.description`, `v.examples` and `v.metadata` are its documentation there.
 *
 * What an answer wraps around a spec and a status (a stored object, a DPU, a public IP) is
 * a TypeScript type, not a schema: it is composed here from the model's schemas, and the
 * compiler checks that it names every field of its type and no other.
 */
import { type ConversionConfig, toJsonSchemaDefs } from '@valibot/to-json-schema'
import * as v from 'valibot'
import type { DpuView } from '../../app/index.ts'
import { ObservedState } from '../../lib/agent-protocol/index.ts'
import type { PortNetwork } from '../../lib/model/admin-network.ts'
import {
  DpuSpec,
  HostInterface,
  ManagedResourceRequest,
  type PublicIp as PublicIpAnswer,
  PublicIpSpec,
  ResourceGroupSpec,
  type ManagedResourceSpec as StoredHostSpec,
  type StoredObject,
} from '../../lib/model/objects.ts'
import { Policy } from '../../lib/model/policies.ts'
import {
  DpuStatus,
  IsoTime,
  ManagedResourceStatus,
  PublicIpStatus,
  ResourceGroupStatus,
} from '../../lib/model/statuses.ts'
import { CarbideEvent } from './events.ts'

const count = v.pipe(v.number(), v.integer())

/** A stored object as the API answers it: its spec and status, and the store's fields. */
function storedObject(spec: v.GenericSchema, status: v.GenericSchema) {
  const fields = {
    name: v.string(),
    spec,
    specVersion: count,
    status,
    deletion: v.optional(v.object({ requestedAt: v.string(), force: v.boolean() })),
    createdAt: v.string(),
    updatedAt: v.string(),
  } satisfies Record<keyof StoredObject<unknown, unknown>, v.GenericSchema>
  return v.object(fields)
}

/** What a stored host spec has beyond the request's: filled in by Hydrazine, output only. */
const STORED_HOST_ONLY = {
  interfaceOf: v.optional(
    v.pipe(
      v.string(),
      v.metadata({ readOnly: true }),
      v.description(
        "output only, set on an interface's own ManagedResource (`<host>-<name>`): the host it is an interface of",
      ),
    ),
  ),
} satisfies Record<Exclude<keyof StoredHostSpec, keyof ManagedResourceRequest>, v.GenericSchema>

/** A host's spec: what a PUT asks for, and what a GET answers (with `STORED_HOST_ONLY`). */
const ManagedResourceSpec = v.strictObject({
  ...ManagedResourceRequest.entries,
  ...STORED_HOST_ONLY,
})

/** Each heartbeat state of a DPU (`DpuView.state`), every one of them. */
const DPU_STATES = { Online: 0, Stale: 1, Lost: 2, Unknown: 3 } satisfies Record<
  DpuView['state'],
  number
>

const DpuAgent = v.object({
  version: v.string(),
  protocolVersions: v.array(v.string()),
  lastHeartbeat: IsoTime,
  heartbeatIntervalMs: count,
  observed: ObservedState,
} satisfies Record<keyof NonNullable<DpuView['agent']>, v.GenericSchema>)

/** A DPU's host port and the network it is on (`PortNetwork`). */
const DpuPort = v.object({
  port: v.string(),
  network: v.pipe(
    v.picklist(['admin', 'tenant', 'none']),
    v.description(
      "admin: the admin network's port holds it; tenant: a tenant's host holds it; none: nothing does (reason says why)",
    ),
  ),
  group: v.optional(v.pipe(v.string(), v.description('the group of the host that holds it'))),
  host: v.optional(v.pipe(v.string(), v.description('the host (or admin port) that holds it'))),
  phase: v.optional(
    v.pipe(v.string(), v.description("that host's phase: the port is on its network once Ready")),
  ),
  reason: v.optional(v.string()),
} satisfies Record<keyof PortNetwork, v.GenericSchema>)

/** A DPU as the API answers it (`DpuView`). */
const Dpu = v.object({
  id: v.string(),
  spec: v.optional(DpuSpec),
  specVersion: v.optional(count),
  state: v.pipe(
    v.picklist(Object.keys(DPU_STATES) as (keyof typeof DPU_STATES)[]),
    v.description(
      "from the age of its newest heartbeat, in the beat's own interval: Online under 1.5 intervals, Stale under 2, Lost after (its hosts then carry DpuHealthy=False HeartbeatLost); Unknown when its agent was never heard from",
    ),
  ),
  lastHeartbeat: v.optional(
    v.pipe(IsoTime, v.description('when its agent last beat; kept after it went silent')),
  ),
  hosts: DpuStatus.entries.hosts,
  ports: v.optional(
    v.pipe(
      v.array(DpuPort),
      v.description(
        "each host port and the network it is on: a tenant's (the host holding it), the admin network (HYDRAZINE_ADMIN_NETWORK), or none and why",
      ),
    ),
  ),
  agent: v.optional(DpuAgent),
} satisfies Record<keyof DpuView, v.GenericSchema>)

/** A public IP of the pools as the API answers it: the address, and whom it is allocated to. */
const PublicIp = v.object({
  ...PublicIpSpec.entries,
  ...PublicIpStatus.entries,
} satisfies Record<keyof PublicIpAnswer, v.GenericSchema>)

/**
 * The model's schemas by their name in `components.schemas`. One that another names is a
 * `$ref` there (`ResourceGroup.spec` is `ResourceGroupSpec`'s).
 */
export const MODEL = {
  ResourceGroupSpec,
  Policy,
  ManagedResourceSpec,
  HostInterface,
  ResourceGroup: storedObject(ResourceGroupSpec, ResourceGroupStatus),
  ManagedResource: storedObject(ManagedResourceSpec, ManagedResourceStatus),
  PublicIp,
  DpuSpec,
  Dpu,
  CarbideEvent,
} satisfies Record<string, v.GenericSchema>

/**
 * How the model becomes JSON Schema (OpenAPI 3.1's dialect is 2020-12). Any schema or
 * action the converter cannot express fails (`errorMode: 'throw'`), except these, which
 * a JSON Schema does not need to say:
 * - `check`, `raw_check`: rules beyond a field's type and pattern (an address's family, a
 *   gateway inside its network, a name used once); the API checks them, and a 400 names
 *   each field that breaks one. A field's description says the rule where it matters.
 * - `transform`: each of the model's turns a string into its canonical spelling (a MAC's
 *   case, an IPv6 address), so the type stays what the document says.
 * - `readonly`: TypeScript's `readonly`, nothing on the wire.
 */
export const CONVERSION: ConversionConfig = {
  target: 'draft-2020-12',
  errorMode: 'throw',
  ignoreActions: ['check', 'raw_check', 'transform', 'readonly'],
  overrideRef: ({ referenceId }) => `#/components/schemas/${referenceId}`,
}

/** `components.schemas` generated from the model. */
export const modelSchemas = toJsonSchemaDefs(MODEL, CONVERSION)
