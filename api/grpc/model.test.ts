/**
 * HTTP and gRPC share one model: every field of each valibot spec and status schema
 * (`lib/model/objects.ts`, `statuses.ts`, the agent's `ObservedState`) has its proto
 * counterpart in `proto/hydrazine/v1/resources.proto` — camelCase ⇄ snake_case, of a
 * matching kind (string, bool, number, timestamp, list, record ⇄ map, message, enum with the
 * same values, optional where the schema's field is) — and the proto has no field the schema lacks.
 * The OpenAPI document's spec schemas list the same fields. A host's spec is read back as
 * stored, with what Hydrazine fills in (`STORED_ONLY`: the host an interface's own
 * ManagedResource belongs to; `STORED_DPU_ONLY`, from the inventory: none today): such
 * fields are output only — in the proto and, `readOnly`, in the OpenAPI document. Change a
 * schema without the proto (or the other way round) and this fails, naming the field.
 */
import type * as protobuf from 'protobufjs'
import t from 'tap'
import * as v from 'valibot'
import { ObservedState } from '../../lib/agent-protocol/index.ts'
import {
  DpuSpec,
  HostInterface,
  ManagedResourceRequest,
  type ManagedResourceSpec,
  PublicIpSpec,
  ResourceGroupSpec,
} from '../../lib/model/objects.ts'
import {
  ManagedResourceStatus,
  PublicIpStatus,
  ResourceGroupStatus,
} from '../../lib/model/statuses.ts'
import { protoRoot } from '../../proto/load.ts'
import { openApiDocument } from '../http/openapi.ts'
import { snakeCase, upperSnakeCase } from './fields.ts'
import { HYDRAZINE_PROTO } from './protocol.ts'

type Schema = v.GenericSchema & {
  readonly wrapped?: Schema
  readonly item?: Schema
  /** A record's values. */
  readonly value?: Schema
  readonly entries?: Readonly<Record<string, Schema>>
  readonly options?: readonly string[]
  readonly pipe?: readonly { readonly type: string }[]
}

const OPTIONAL = new Set(['optional', 'exact_optional', 'nullable', 'nullish'])
const OBJECT = new Set(['object', 'strict_object', 'loose_object'])
const NUMBER_TYPES = new Set(['int32', 'int64', 'uint32', 'uint64', 'sint32', 'sint64', 'double'])
const TIMESTAMP = '.google.protobuf.Timestamp'

/** The schema inside optional wrappers, and whether there was one. */
function unwrap(schema: Schema): { schema: Schema; optional: boolean } {
  let s = schema
  let optional = false
  while (OPTIONAL.has(s.type) && s.wrapped) {
    optional = true
    s = s.wrapped
  }
  return { schema: s, optional }
}

/** What `schema` is, as the proto must mirror it. */
function kindOf(schema: Schema): string {
  if (OBJECT.has(schema.type)) return 'message'
  if (schema.type === 'picklist') return 'enum'
  if (schema.type === 'string')
    return schema.pipe?.some((a) => a.type === 'iso_timestamp') ? 'timestamp' : 'string'
  if (schema.type === 'boolean') return 'bool'
  if (schema.type === 'number') return 'number'
  return schema.type
}

function protoKindOf(field: protobuf.Field): string {
  const resolved = field.resolvedType
  if (resolved && 'values' in resolved) return 'enum'
  if (resolved?.fullName === TIMESTAMP) return 'timestamp'
  if (resolved) return 'message'
  if (NUMBER_TYPES.has(field.type)) return 'number'
  return field.type
}

/** Every difference between `entries` and `message`, as `path: problem` lines. */
function drift(
  entries: Readonly<Record<string, Schema>>,
  message: protobuf.Type,
  at = message.name,
): string[] {
  const problems: string[] = []
  const fields = new Map(message.fieldsArray.map((f) => [f.name, f]))
  const expected = new Set<string>()
  for (const [key, entry] of Object.entries(entries)) {
    const name = snakeCase(key)
    expected.add(name)
    const field = fields.get(name)
    if (!field) {
      problems.push(`${at}.${name}: missing from the proto (schema field ${key})`)
      continue
    }
    problems.push(...fieldDrift(entry, field, `${at}.${name}`))
  }
  for (const name of fields.keys()) {
    if (!expected.has(name)) problems.push(`${at}.${name}: not in the schema`)
  }
  return problems
}

function fieldDrift(entry: Schema, field: protobuf.Field, at: string): string[] {
  const { schema: outer, optional } = unwrap(entry)
  if (outer.type === 'record' || field.map) {
    // A record of strings ⇄ a `map<string, V>`: the values' kinds match.
    if (outer.type !== 'record' || !field.map) {
      return [`${at}: ${field.map ? 'not a record' : 'a record'} in the schema, not in the proto`]
    }
    const value = outer.value ? kindOf(unwrap(outer.value).schema) : 'unknown'
    const protoValue = protoKindOf(field)
    return value === protoValue ? [] : [`${at}: a record of ${value}, a map of ${protoValue}`]
  }
  const list = outer.type === 'array' && outer.item
  if (Boolean(list) !== field.repeated) {
    return [`${at}: ${list ? 'a list' : 'not a list'} in the schema, not in the proto`]
  }
  const { schema } = list && outer.item ? unwrap(outer.item) : { schema: outer }
  const kind = kindOf(schema)
  const protoKind = protoKindOf(field)
  if (kind !== protoKind) return [`${at}: ${kind} in the schema, ${protoKind} in the proto`]
  const scalar = ['string', 'bool', 'number'].includes(kind) && !list
  const protoOptional = field.options?.proto3_optional === true
  if (scalar && optional !== protoOptional) {
    return [`${at}: ${optional ? 'optional' : 'required'} in the schema, not in the proto`]
  }
  const resolved = field.resolvedType
  if (kind === 'message' && schema.entries && resolved && 'fieldsArray' in resolved) {
    return drift(schema.entries, resolved as protobuf.Type, at)
  }
  if (kind === 'enum' && resolved && 'values' in resolved) {
    const prefix = upperSnakeCase(resolved.name)
    const wanted = [
      `${prefix}_UNSPECIFIED`,
      ...(schema.options ?? []).map((o) => `${prefix}_${upperSnakeCase(o)}`),
    ]
    const values = (resolved as protobuf.Enum).values
    const names = Object.keys(values)
    if (values[`${prefix}_UNSPECIFIED`] !== 0) return [`${at}: ${prefix}_UNSPECIFIED must be 0`]
    if (JSON.stringify([...names].sort()) !== JSON.stringify([...wanted].sort())) {
      return [`${at}: enum ${resolved.name} is [${names}], the schema's [${wanted}]`]
    }
  }
  return []
}

const entriesOf = (schema: Schema) => schema.entries ?? {}
const openApiSchemas: Readonly<Record<string, unknown>> = openApiDocument.components.schemas
const root = protoRoot(HYDRAZINE_PROTO)
const message = (name: string) => root.lookupType(`hydrazine.v1.${name}`)

/**
 * What a stored host spec has beyond the request's, at its top level: every such field of
 * the `ManagedResourceSpec` type, and no other (the compiler checks both).
 */
const STORED_ONLY = { interfaceOf: v.optional(v.string()) } satisfies Record<
  Exclude<keyof ManagedResourceSpec, keyof ManagedResourceRequest>,
  Schema
>
/** The same for its `dpu`. */
const STORED_DPU_ONLY = {} satisfies Record<
  Exclude<keyof ManagedResourceSpec['dpu'], keyof ManagedResourceRequest['dpu']>,
  Schema
>

/** A host's spec as stored: the request's fields and the stored-only ones. */
const storedHostSpec = (() => {
  const request = entriesOf(ManagedResourceRequest)
  const dpu = request.dpu ? entriesOf(request.dpu) : {}
  return { ...request, dpu: v.object({ ...dpu, ...STORED_DPU_ONLY }), ...STORED_ONLY }
})()
/** The stored-only fields as paths (`<field>`, `dpu.<field>`). */
const STORED_ONLY_PATHS = [
  ...Object.keys(STORED_ONLY),
  ...Object.keys(STORED_DPU_ONLY).map((key) => `dpu.${key}`),
]

t.test('every schema field has its proto field, and the proto nothing more', async (t) => {
  const pairs: [string, Readonly<Record<string, Schema>>, string][] = [
    ['ResourceGroupSpec', entriesOf(ResourceGroupSpec), 'ResourceGroupSpec'],
    ['ManagedResourceRequest, as stored', storedHostSpec, 'ManagedResourceSpec'],
    ['HostInterface', entriesOf(HostInterface), 'HostInterface'],
    ['DpuSpec', entriesOf(DpuSpec), 'DpuSpec'],
    ['ResourceGroupStatus', entriesOf(ResourceGroupStatus), 'ResourceGroupStatus'],
    ['ManagedResourceStatus', entriesOf(ManagedResourceStatus), 'ManagedResourceStatus'],
    ['ObservedState', entriesOf(ObservedState), 'ObservedState'],
    [
      'PublicIpSpec + PublicIpStatus',
      { ...entriesOf(PublicIpSpec), ...entriesOf(PublicIpStatus) },
      'PublicIp',
    ],
  ]
  for (const [schema, entries, proto] of pairs) {
    t.same(drift(entries, message(proto)), [], `${schema} ⇄ hydrazine.v1.${proto}`)
  }
})

t.test('the check finds a drift in either direction, naming the field', async (t) => {
  const spec = entriesOf(ResourceGroupSpec)
  const { dhcpServer: _dropped, ...fewer } = spec
  t.same(drift(fewer, message('ResourceGroupSpec')), [
    'ResourceGroupSpec.dhcp_server: not in the schema',
  ])
  t.same(drift({ ...spec, vlanId: v.number() }, message('ResourceGroupSpec')), [
    'ResourceGroupSpec.vlan_id: missing from the proto (schema field vlanId)',
  ])
  t.same(drift({ ...spec, tenantId: v.optional(v.string()) }, message('ResourceGroupSpec')), [
    'ResourceGroupSpec.tenant_id: optional in the schema, not in the proto',
  ])
  t.same(
    drift(
      { ...spec, networkImplementationType: v.picklist(['Overlay', 'Fabric', 'Other']) },
      message('ResourceGroupSpec'),
    ),
    [
      "ResourceGroupSpec.network_implementation_type: enum NetworkImplementationType is [NETWORK_IMPLEMENTATION_TYPE_UNSPECIFIED,NETWORK_IMPLEMENTATION_TYPE_OVERLAY,NETWORK_IMPLEMENTATION_TYPE_FABRIC], the schema's [NETWORK_IMPLEMENTATION_TYPE_UNSPECIFIED,NETWORK_IMPLEMENTATION_TYPE_OVERLAY,NETWORK_IMPLEMENTATION_TYPE_FABRIC,NETWORK_IMPLEMENTATION_TYPE_OTHER]",
    ],
  )
  const network = v.object({ cidr: v.string(), gateway: v.array(v.string()) })
  t.same(drift({ ...spec, network }, message('ResourceGroupSpec')), [
    'ResourceGroupSpec.network.gateway: a list in the schema, not in the proto',
  ])
})

/**
 * The property names of an OpenAPI object schema and of its nested objects (followed
 * through `$ref`s to `components.schemas`), as paths; with `readOnly`, only those marked
 * `readOnly` (output only).
 */
function openApiPaths(schema: unknown, at = '', readOnly = false): string[] {
  const s = schema as { properties?: Record<string, unknown>; items?: unknown; $ref?: string }
  const referenced = s.$ref?.replace('#/components/schemas/', '')
  if (referenced) return openApiPaths(openApiSchemas[referenced], at, readOnly)
  if (s.items) return openApiPaths(s.items, at, readOnly)
  return Object.entries(s.properties ?? {}).flatMap(([key, value]) => [
    ...(!readOnly || (value as { readOnly?: boolean }).readOnly === true ? [`${at}${key}`] : []),
    ...openApiPaths(value, `${at}${key}.`, readOnly),
  ])
}

/** The property at `path` of an OpenAPI object schema, or undefined. */
const propertyAt = (schema: unknown, ...path: string[]): unknown =>
  path.reduce(
    (s, key) => (s as { properties?: Record<string, unknown> } | undefined)?.properties?.[key],
    schema,
  )

/** The same for a valibot schema. */
function schemaPaths(entries: Readonly<Record<string, Schema>>, at = ''): string[] {
  return Object.entries(entries).flatMap(([key, entry]) => {
    const { schema: outer } = unwrap(entry)
    const { schema } = outer.type === 'array' && outer.item ? unwrap(outer.item) : { schema: outer }
    return [`${at}${key}`, ...schemaPaths(schema.entries ?? {}, `${at}${key}.`)]
  })
}

t.test('the OpenAPI document describes the same spec fields', async (t) => {
  const pairs: [string, Readonly<Record<string, Schema>>, string[]][] = [
    ['ResourceGroupSpec', entriesOf(ResourceGroupSpec), []],
    ['ManagedResourceSpec', storedHostSpec, STORED_ONLY_PATHS],
    ['HostInterface', entriesOf(HostInterface), []],
    ['DpuSpec', entriesOf(DpuSpec), []],
  ]
  for (const [name, entries, readOnly] of pairs) {
    t.same(
      openApiPaths(openApiSchemas[name]).sort(),
      schemaPaths(entries).sort(),
      `components.schemas.${name}`,
    )
    t.same(
      openApiPaths(openApiSchemas[name], '', true).sort(),
      readOnly,
      `components.schemas.${name}: output-only fields are readOnly`,
    )
  }
})

t.test("the OpenAPI document describes a host's addresses as its status has them", async (t) => {
  const hostAccessIPs = propertyAt(openApiSchemas.ManagedResource, 'status', 'hostAccessIPs')
  const status = entriesOf(ManagedResourceStatus).hostAccessIPs
  t.same(
    openApiPaths(hostAccessIPs).sort(),
    schemaPaths(status ? entriesOf(unwrap(status).schema) : {}).sort(),
    'components.schemas.ManagedResource: status.hostAccessIPs',
  )
})
