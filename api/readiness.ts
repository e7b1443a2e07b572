/**
 * Readiness: named probes (Redis answers, the OVN NB answers, …), each given at most
 * `PROBE_TIMEOUT_MS`. HTTP `/readyz` answers with them, and the gRPC health service
 * (`grpc.health.v1`) reports SERVING only while every one passes: one meaning on both.
 *
 * @example
 * const { ready, checks } = await checkReadiness({ redis: async () => (await redis.ping()) === 'PONG' })
 */

/** Named readiness probes; ready only when every one resolves true. */
export type ReadinessProbes = Readonly<Record<string, () => Promise<boolean>>>

export const PROBE_TIMEOUT_MS = 2000

export interface Readiness {
  readonly ready: boolean
  /** Each probe: `ok`, or `unavailable` (false, failed or too slow). */
  readonly checks: Readonly<Record<string, 'ok' | 'unavailable'>>
}

/** Runs every probe at once, each bounded by `timeoutMs`. */
export async function checkReadiness(
  probes: ReadinessProbes,
  timeoutMs = PROBE_TIMEOUT_MS,
): Promise<Readiness> {
  const entries = await Promise.all(
    Object.entries(probes).map(async ([name, probe]) => {
      const ok = await Promise.race([
        probe().catch(() => false),
        new Promise<boolean>((r) => setTimeout(() => r(false), timeoutMs).unref()),
      ])
      return [name, ok ? 'ok' : 'unavailable'] as const
    }),
  )
  return {
    ready: entries.every(([, state]) => state === 'ok'),
    checks: Object.fromEntries(entries),
  }
}
