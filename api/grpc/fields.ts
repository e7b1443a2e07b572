/**
 * How names of the one model (`lib/model/objects.ts`, `statuses.ts`) read in the proto
 * (`proto/hydrazine/v1/resources.proto`): fields in lower_snake_case (`hostMAC` →
 * `host_mac`, `snatIPs` → `snat_ips`), enum values as `<ENUM>_<VALUE>` in UPPER_SNAKE_CASE
 * (`FabricAccess` of `HostAccess` → `HOST_ACCESS_FABRIC_ACCESS`), zero the unspecified one,
 * and the field paths of refusals as the request's proto paths
 * (`extraSubnets.0.gateway` → `spec.extra_subnets[0].gateway`). The conversions and the
 * check that the proto matches the schemas (`model.test.ts`) both use these rules.
 */

/** The words of a camelCase name; a capitalised acronym (`MAC`, `IPs`, `IPv6`) is one word. */
function wordsOf(name: string): string[] {
  return name.match(/IPv[46]s?|[A-Z]+s?(?![a-z])|[A-Z]?[a-z0-9]+/g) ?? [name]
}

/**
 * `hostMAC` → `host_mac`, `snatIPs` → `snat_ips`, `hostIPv6` → `host_ipv6`,
 * `lastTransitionTime` → `last_transition_time`.
 */
export function snakeCase(name: string): string {
  return wordsOf(name)
    .map((w) => w.toLowerCase())
    .join('_')
}

/** `FabricAccess` → `FABRIC_ACCESS`. */
export function upperSnakeCase(name: string): string {
  return snakeCase(name).toUpperCase()
}

/**
 * A proto enum and the model's string values it stands for: `<prefix>_UNSPECIFIED` (zero)
 * is "not given", every other value is one of `values` in UPPER_SNAKE_CASE after the
 * prefix. `proto` is the generated enum object; a value it lacks throws at once.
 *
 * @example
 * const access = protoEnum(HostAccessProto, 'HOST_ACCESS', ['None', 'FabricAccess', 'PublicAccess'])
 * access.toProto('FabricAccess') // 'HOST_ACCESS_FABRIC_ACCESS'
 * access.fromProto('HOST_ACCESS_UNSPECIFIED') // undefined
 */
export interface ProtoEnum<V extends string, P extends string> {
  readonly prefix: string
  readonly values: readonly V[]
  toProto(value: V | undefined): P
  /** The value a proto enum value stands for; undefined for UNSPECIFIED (or unknown). */
  fromProto(name: string | number | undefined): V | undefined
  /** True when `name` is neither UNSPECIFIED nor a known value (a newer client's). */
  isUnknown(name: string | number | undefined): boolean
}

export function protoEnum<P extends string, V extends string>(
  proto: Readonly<Record<P, P>>,
  prefix: string,
  values: readonly V[],
): ProtoEnum<V, P> {
  const known = new Set<string>(Object.values<P>(proto))
  const nameOf = (value: string): P => {
    const name = `${prefix}_${upperSnakeCase(value)}`
    if (!known.has(name)) throw new Error(`proto enum ${prefix} has no ${name}`)
    return name as P
  }
  const unspecified = nameOf('UNSPECIFIED')
  const byName = new Map(values.map((v) => [nameOf(v) as string, v]))
  return {
    prefix,
    values,
    toProto: (value) => (value === undefined ? unspecified : nameOf(value)),
    fromProto: (name) => (typeof name === 'string' ? byName.get(name) : undefined),
    isUnknown: (name) =>
      name !== undefined && name !== 0 && name !== unspecified && !byName.has(String(name)),
  }
}

/**
 * A refusal's field path (`getDotPath` of a valibot issue, as the client reports it) as
 * the path of the request's proto field: camelCase segments in snake_case, indexes in
 * brackets, under `under` (e.g. `spec`) unless it is one of the request's own `fields`.
 * `(body)` (the whole spec) becomes `under` itself.
 *
 * @example requestFieldPath('extraSubnets.0.gateway', 'spec') // 'spec.extra_subnets[0].gateway'
 */
export function requestFieldPath(
  path: string,
  under?: string,
  fields: ReadonlyMap<string, string> = new Map(),
): string {
  const own = fields.get(path)
  if (own !== undefined) return own
  if (path === '(body)') return under ?? ''
  const proto = path
    .split('.')
    .map((segment, i) =>
      /^\d+$/.test(segment) ? `[${segment}]` : `${i > 0 ? '.' : ''}${snakeCase(segment)}`,
    )
    .join('')
  return under ? `${under}.${proto}` : proto
}
