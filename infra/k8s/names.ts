/**
 * The names and labels Hydrazine gives the Kubernetes objects it generates or creates:
 * one place, so that selectors, RBAC and the objects agree.
 */
import { createHash } from 'node:crypto'

/** Every object Hydrazine generates or creates carries it. */
export const MANAGED_BY = { 'app.kubernetes.io/managed-by': 'hydrazine' } as const
/** The resource group a central belongs to (its name: an RFC 1123 label, a valid value). */
export const GROUP_LABEL = 'hydrazine.io/group'
/** The DPU an agent DaemonSet runs for. */
export const DPU_LABEL = 'hydrazine.io/dpu-id'
export const PART_OF = { 'app.kubernetes.io/part-of': 'hydrazine' } as const

/** Labels of one component: its name, `part-of` and `managed-by`. */
export function componentLabels(name: string): Record<string, string> {
  return { 'app.kubernetes.io/name': name, ...PART_OF, ...MANAGED_BY }
}

/**
 * A DNS-1035 label (what Service names must be: it starts with a letter) at most `max`
 * characters long, made of `prefix`, as much of `key` as fits, and 16 hex digits of
 * `key`'s SHA-256: deterministic, and distinct for distinct keys whatever their length
 * or characters (a DPU id may hold `_`, `.` and capitals).
 *
 * @example
 * hashedName('ovn', 'tenant-a', 52) // 'ovn-tenant-a-' + 16 hex digits
 */
export function hashedName(prefix: string, key: string, max: number): string {
  const hash = createHash('sha256').update(key).digest('hex').slice(0, 16)
  const room = max - prefix.length - hash.length - 2
  if (room < 0) throw new RangeError(`${prefix}: no room for a name of at most ${max} characters`)
  const readable = key
    .toLowerCase()
    .replace(/[^a-z0-9-]+/g, '-')
    .slice(0, room)
    .replace(/^-+|-+$/g, '')
  return readable ? `${prefix}-${readable}-${hash}` : `${prefix}-${hash}`
}

/**
 * `prefix-key` when that is a DNS-1123 label of at most `max` characters, else
 * `hashedName`: readable names for keys the operator chooses (DPU ids), which it types
 * into `kubectl` (never for names tenants choose: those are always hashed).
 *
 * @example
 * readableName('hydrazine-dpu', 'dpu-1', 63) // 'hydrazine-dpu-dpu-1'
 * readableName('hydrazine-dpu', 'BF3_dpu.2', 63) // 'hydrazine-dpu-bf3-dpu-2-' + 16 hex digits
 */
export function readableName(prefix: string, key: string, max: number): string {
  const name = `${prefix}-${key}`
  return name.length <= max && /^[a-z]([a-z0-9-]*[a-z0-9])?$/.test(name)
    ? name
    : hashedName(prefix, key, max)
}
