/**
 * `HYDRAZINE_QUOTAS`: how many resource groups, hosts and public IPs each tenant may have
 * (`lib/state/quotas.ts` enforces them). JSON; every part may be left out, and what is
 * left out takes the built-in defaults (`DEFAULT_QUOTA_LIMITS`: 100 groups, 10,000 hosts,
 * 1,000 public IPs per tenant).
 *
 * @example
 * HYDRAZINE_QUOTAS='{"default": {"groups": 50, "publicIps": 100}, "tenants": {"tenant-a": {"hosts": 5000}}}'
 * // tenant-a: 50 groups, 5,000 hosts, 100 public IPs; any other: 50, 10,000, 100
 */
import * as v from 'valibot'
import { Rfc1123Label } from '../model/objects.ts'
import {
  DEFAULT_QUOTA_LIMITS,
  QUOTA_NAMES,
  type QuotaLimits,
  type Quotas,
} from '../model/quotas.ts'

/** The largest limit accepted: far beyond what one controller serves. */
export const MAX_QUOTA = 1_000_000_000

const LIMIT = `must be a whole number from 0 to ${MAX_QUOTA}`
const SHAPE = '{"default"?: LIMITS, "tenants"?: {"<tenant>": LIMITS}}'
const LIMITS = `LIMITS is {${QUOTA_NAMES.map((q) => `"${q}"?: N`).join(', ')}}`

const Limit = v.pipe(
  v.number(LIMIT),
  v.integer(LIMIT),
  v.minValue(0, LIMIT),
  v.maxValue(MAX_QUOTA, LIMIT),
)

const Limits = v.strictObject(
  {
    groups: v.exactOptional(Limit),
    hosts: v.exactOptional(Limit),
    publicIps: v.exactOptional(Limit),
  },
  (issue) =>
    issue.expected === 'never' ? `is not a quota (${LIMITS})` : `must be an object: ${LIMITS}`,
)

const QuotasSchema = v.strictObject(
  {
    default: v.exactOptional(Limits),
    tenants: v.exactOptional(
      v.record(Rfc1123Label, Limits, `must be an object: tenant → ${LIMITS}`),
    ),
  },
  (issue) =>
    issue.expected === 'never' ? `is not a field (${SHAPE})` : `must be a JSON object: ${SHAPE}`,
)

/**
 * The quotas a `HYDRAZINE_QUOTAS` text sets, or every problem with it, each saying where
 * (`tenants.tenant-a.hosts: must be a whole number …`).
 */
export function parseQuotas(
  text: string,
): { ok: true; quotas: Quotas } | { ok: false; issues: string[] } {
  let data: unknown
  try {
    data = JSON.parse(text)
  } catch {
    return { ok: false, issues: [`is not valid JSON: ${SHAPE}`] }
  }
  if (typeof data !== 'object' || data === null || Array.isArray(data)) {
    return { ok: false, issues: [`must be a JSON object: ${SHAPE}`] }
  }
  const parsed = v.safeParse(QuotasSchema, data)
  if (!parsed.success) {
    return {
      ok: false,
      issues: parsed.issues.map((issue) => {
        const path = v.getDotPath(issue)
        // A record key that is no tenant name (an unknown field is a key issue too).
        const onKey = issue.type !== 'strict_object' && issue.path?.at(-1)?.origin === 'key'
        return path ? `${onKey ? `tenant name ${path}` : path}: ${issue.message}` : issue.message
      }),
    }
  }
  const base: QuotaLimits = { ...DEFAULT_QUOTA_LIMITS, ...parsed.output.default }
  return { ok: true, quotas: { default: base, tenants: parsed.output.tenants ?? {} } }
}

/** `HYDRAZINE_QUOTAS` as the configuration schema reads it: unset, the defaults. */
export const QuotasVariable = v.optional(
  v.pipe(
    v.string(),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      const result = parseQuotas(dataset.value)
      if (result.ok) return result.quotas
      for (const message of result.issues) addIssue({ message })
      return NEVER
    }),
  ),
  '{}',
)
