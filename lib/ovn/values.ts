/**
 * OVSDB value encodings (RFC 7047 §5.1) ↔ plain TypeScript values, driven by the
 * column's schema type:
 *
 * | column type            | TypeScript          | wire                              |
 * |------------------------|---------------------|-----------------------------------|
 * | atom (min 1, max 1)    | `T`                 | atom                              |
 * | optional (min 0, max 1)| `T \| null`         | atom, or `["set", []]`            |
 * | set                    | `T[]`               | `["set", [...]]` (or a bare atom) |
 * | map                    | `Record<K, V>`      | `["map", [[k, v], ...]]`          |
 * | uuid atom              | `string`            | `["uuid", u]`, or `["named-uuid", n]` when `n` is not a UUID |
 */
import type { WireAtom, WireValue } from './protocol.ts'
import type { BaseType, ColumnType } from './schema-types.ts'

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

export function isUuid(s: string): boolean {
  return UUID_RE.test(s)
}

/** Plain value of a column, as the generated row types declare it. */
export type PlainAtom = string | number | boolean
export type PlainValue =
  | PlainAtom
  | null
  | readonly PlainAtom[]
  | Readonly<Record<string | number, PlainAtom>>

export function encodeAtom(base: BaseType, value: PlainAtom): WireAtom {
  if (base.type === 'uuid') {
    const s = String(value)
    return isUuid(s) ? ['uuid', s] : ['named-uuid', s]
  }
  if ((base.type === 'integer' || base.type === 'real') && typeof value === 'string') {
    return Number(value)
  }
  return value
}

export function decodeAtom(value: WireAtom): PlainAtom {
  return Array.isArray(value) ? (value[1] as string) : (value as PlainAtom)
}

/**
 * Encodes a column value. For a map column, an array means a set of keys (what a
 * `delete` mutation takes).
 */
export function encodeValue(column: ColumnType, value: PlainValue | undefined): WireValue {
  const { key, value: valueType } = column
  if (valueType) {
    if (Array.isArray(value)) return ['set', value.map((k) => encodeAtom(key, k))]
    const entries = Object.entries((value ?? {}) as Record<string, PlainAtom>)
    return ['map', entries.map(([k, v]) => [encodeAtom(key, k), encodeAtom(valueType, v)] as const)]
  }
  if (value === null || value === undefined) return ['set', []]
  if (Array.isArray(value)) return ['set', value.map((v) => encodeAtom(key, v))]
  return encodeAtom(key, value as PlainAtom)
}

export function decodeValue(column: ColumnType, value: WireValue): PlainValue {
  if (Array.isArray(value) && value[0] === 'map') {
    const out: Record<string, PlainAtom> = {}
    for (const [k, v] of value[1] as readonly (readonly [WireAtom, WireAtom])[]) {
      out[String(decodeAtom(k))] = decodeAtom(v)
    }
    return out
  }
  const elements =
    Array.isArray(value) && value[0] === 'set'
      ? (value[1] as readonly WireAtom[]).map(decodeAtom)
      : [decodeAtom(value as WireAtom)]
  if (column.value) return {}
  if (column.max === 1) return elements[0] ?? null
  return elements
}
