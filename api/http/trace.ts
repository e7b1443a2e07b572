/**
 * `GET /v1/trace`: its query string as the client's trace request — `from`, `to`, and
 * optionally `proto`, `port`, `raw`, each given once; a missing, repeated, unknown or
 * malformed one is a 400 naming it. What the values mean (a host, an address, a port only
 * with tcp/udp) the client checks (`app/trace.ts`), naming the same fields. A central
 * or ovn-trace that cannot answer now is a 503 (`TRACE_UNAVAILABLE`).
 */
import * as v from 'valibot'
import type { Operations } from '../../app/index.ts'
import { type TraceAnswer, ValidationError } from '../../app/index.ts'

const BOOLEAN = { true: true, false: false, '1': true, '0': false } as const

const TraceQuery = v.strictObject(
  {
    from: v.string(),
    to: v.string(),
    proto: v.optional(v.string()),
    port: v.optional(
      v.pipe(
        v.string(),
        v.regex(/^\d{1,5}$/, 'must be an integer from 1 to 65535'),
        v.transform(Number),
      ),
    ),
    raw: v.optional(
      v.pipe(
        v.picklist(['true', 'false', '1', '0'], 'must be true or false'),
        v.transform((s) => BOOLEAN[s]),
      ),
    ),
  },
  (issue) =>
    issue.expected === 'never'
      ? 'is not a parameter of /v1/trace (from, to, proto, port, raw)'
      : 'is required',
)

/**
 * The trace request a query string asks for (every value of each parameter, as hono's
 * `c.req.queries()` gives them).
 *
 * @example traceRequestOf({ from: ['h1'], to: ['10.0.0.3'], proto: ['tcp'], port: ['22'] })
 */
export function traceRequestOf(query: Readonly<Record<string, readonly string[]>>) {
  const once: Record<string, string> = {}
  const issues: { path: string; message: string }[] = []
  for (const [name, values] of Object.entries(query)) {
    if (values.length > 1) issues.push({ path: name, message: 'must be given once' })
    if (values[0] !== undefined) once[name] = values[0]
  }
  const parsed = v.safeParse(TraceQuery, once)
  if (!parsed.success) {
    for (const issue of parsed.issues) {
      issues.push({ path: v.getDotPath(issue) ?? '(query)', message: issue.message })
    }
  }
  if (issues.length > 0 || !parsed.success) throw new ValidationError(issues)
  return parsed.output
}

/** The answer to `GET /v1/trace?…` for this caller's operations. */
export async function traceAnswer(
  query: Readonly<Record<string, readonly string[]>>,
  operations: Pick<Operations, 'trace'>,
): Promise<TraceAnswer> {
  // TRACE_UNAVAILABLE is a 503 by its error class (api/errors.ts).
  return operations.trace(traceRequestOf(query))
}
