/**
 * The OpenAPI document's schemas against the model they come from: each model schema's
 * component names every field of it and no other (so a field added to the model and
 * missing from the document fails here, naming it), no hand-written schema takes a model
 * schema's name, every `$ref` names a component, and the hand-written schemas name the
 * fields of their TypeScript types (checked by the compiler).
 */
import t from 'tap'
import * as v from 'valibot'
import type { NetworkUsage as UsageType } from '../../lib/ipam/index.ts'
import { ResourceGroupSpec } from '../../lib/model/objects.ts'
import type {
  PlannedAddress,
  PlannedPrefix,
  ChangePlan as PlanType,
} from '../../lib/model/plans.ts'
import type { ErrorBody } from './errors.ts'
import { openApiDocument } from './openapi.ts'
import { ipamSchemas } from './openapi-ipam.ts'
import { MODEL, modelSchemas } from './openapi-model.ts'
import { schemas } from './openapi-schemas.ts'

/** What the walk reads of a valibot schema. */
type Schema = {
  readonly type: string
  readonly wrapped?: Schema
  readonly item?: Schema
  readonly entries?: Readonly<Record<string, Schema>>
  readonly options?: readonly Schema[]
}
/** What the walk reads of a JSON Schema. */
type JsonSchema = {
  readonly $ref?: string
  readonly properties?: Readonly<Record<string, JsonSchema>>
  readonly items?: JsonSchema
  readonly oneOf?: readonly JsonSchema[]
  readonly anyOf?: readonly JsonSchema[]
}

const components: Readonly<Record<string, unknown>> = openApiDocument.components.schemas
const WRAPPERS = new Set(['optional', 'exact_optional', 'nullable', 'nullish'])
const CHOICES = new Set(['variant', 'union'])

/** Every field of a valibot schema as a path (`dpu.id`; an array's items share its path). */
function modelFields(schema: Schema, at = ''): string[] {
  if (WRAPPERS.has(schema.type) && schema.wrapped) return modelFields(schema.wrapped, at)
  if (schema.type === 'array' && schema.item) return modelFields(schema.item, at)
  if (CHOICES.has(schema.type)) return (schema.options ?? []).flatMap((o) => modelFields(o, at))
  return Object.entries(schema.entries ?? {}).flatMap(([key, entry]) => [
    `${at}${key}`,
    ...modelFields(entry, `${at}${key}.`),
  ])
}

/** The same for a JSON Schema of the document, following `$ref`s to its components. */
function documentFields(schema: JsonSchema, at = ''): string[] {
  const referenced = schema.$ref?.replace('#/components/schemas/', '')
  if (referenced !== undefined) return documentFields(component(referenced), at)
  if (schema.items) return documentFields(schema.items, at)
  const choices = [...(schema.oneOf ?? []), ...(schema.anyOf ?? [])]
  if (choices.length) return choices.flatMap((c) => documentFields(c, at))
  return Object.entries(schema.properties ?? {}).flatMap(([key, property]) => [
    `${at}${key}`,
    ...documentFields(property, `${at}${key}.`),
  ])
}

const component = (name: string) => (components[name] ?? {}) as JsonSchema

/** Each field only one side has, as `path: where` lines. */
function fieldDrift(document: JsonSchema, model: v.GenericSchema): string[] {
  const inDocument = new Set(documentFields(document))
  const inModel = new Set(modelFields(model as Schema))
  return [
    ...[...inModel].filter((f) => !inDocument.has(f)).map((f) => `${f}: not in the document`),
    ...[...inDocument].filter((f) => !inModel.has(f)).map((f) => `${f}: not in the model`),
  ].sort()
}

t.test('each model schema has its component, with every field of it and no other', async (t) => {
  for (const [name, schema] of Object.entries(MODEL)) {
    t.ok(components[name], `components.schemas.${name}`)
    t.same(fieldDrift(component(name), schema), [], `components.schemas.${name}`)
  }
})

t.test('the check finds a field on either side only, naming it', async (t) => {
  const document = component('ResourceGroupSpec')
  const grown = v.strictObject({
    ...ResourceGroupSpec.entries,
    vlanId: v.optional(v.number()),
    network: v.optional(v.object({ cidr: v.string(), gateway: v.string(), mtu: v.number() })),
  })
  t.same(fieldDrift(document, grown), [
    'network.mtu: not in the document',
    'vlanId: not in the document',
  ])
  const { dhcpServer: _dropped, ...fewer } = ResourceGroupSpec.entries
  t.same(fieldDrift(document, v.strictObject(fewer)), ['dhcpServer: not in the model'])
})

t.test('no hand-written schema takes the name of a model schema', async (t) => {
  for (const name of Object.keys(MODEL)) {
    t.equal(components[name], modelSchemas[name as keyof typeof modelSchemas], name)
  }
  const handWritten = [...Object.keys(schemas), ...Object.keys(ipamSchemas)]
  t.same(
    handWritten.filter((name) => name in MODEL),
    [],
  )
})

t.test('every $ref of the document names one of its components', async (t) => {
  const refs = new Set<string>()
  const collect = (node: unknown): void => {
    if (Array.isArray(node)) node.forEach(collect)
    else if (node && typeof node === 'object') {
      for (const [key, value] of Object.entries(node)) {
        if (key === '$ref' && typeof value === 'string') refs.add(value)
        else collect(value)
      }
    }
  }
  collect(openApiDocument)
  t.ok(refs.size > 10, `${refs.size} references`)
  for (const ref of refs) {
    const name = ref.replace('#/components/schemas/', '')
    t.ok(ref.startsWith('#/components/schemas/') && components[name], ref)
  }
})

/** True when A and B are the same keys; `true satisfies SameKeys<…>` fails to compile else. */
type SameKeys<A, B> = [Exclude<A, B> | Exclude<B, A>] extends [never] ? true : false
type Keys<T> = keyof T

/**
 * The schemas written by hand describe TypeScript types that have no valibot schema; the
 * compiler checks that each names its type's fields (`npm run check`).
 */
const HAND_WRITTEN_NAME_THEIR_FIELDS = {
  Error: true satisfies SameKeys<
    Keys<typeof schemas.Error.properties.error.properties>,
    keyof ErrorBody['error']
  >,
  ChangePlan: true satisfies SameKeys<Keys<typeof schemas.ChangePlan.properties>, keyof PlanType>,
  'ChangePlan.nb': true satisfies SameKeys<
    Keys<typeof schemas.ChangePlan.properties.nb.properties>,
    keyof PlanType['nb']
  >,
  'ChangePlan.agentJobs': true satisfies SameKeys<
    Keys<typeof schemas.ChangePlan.properties.agentJobs.items.properties>,
    keyof PlanType['agentJobs'][number]
  >,
  PlannedPrefix: true satisfies SameKeys<
    Keys<typeof schemas.PlannedPrefix.properties>,
    keyof PlannedPrefix
  >,
  PlannedAddress: true satisfies SameKeys<
    Keys<typeof schemas.PlannedAddress.properties>,
    keyof PlannedAddress
  >,
  NetworkUsage: true satisfies SameKeys<
    Keys<typeof ipamSchemas.NetworkUsage.properties>,
    keyof UsageType
  >,
}

t.test('the hand-written schemas name the fields of their types', async (t) => {
  t.same(Object.keys(HAND_WRITTEN_NAME_THEIR_FIELDS).sort(), [
    'ChangePlan',
    'ChangePlan.agentJobs',
    'ChangePlan.nb',
    'Error',
    'NetworkUsage',
    'PlannedAddress',
    'PlannedPrefix',
  ])
})
