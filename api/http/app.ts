import { Hono } from 'hono'

/** What the HTTP API needs from the rest of Hydrazine. */
export interface ApiDeps {
  /** Named readiness probes; `/readyz` is 200 only when every one resolves true. */
  readonly readiness: Readonly<Record<string, () => Promise<boolean>>>
}

const PROBE_TIMEOUT_MS = 2000

/**
 * Hydrazine's HTTP API.
 *
 * - `GET /healthz` — 200 while the process is up.
 * - `GET /readyz` — 200 when Redis and the OVN NB answer, else 503 naming what does not.
 */
export function createApp(deps: ApiDeps): Hono {
  const app = new Hono()

  app.get('/healthz', (c) => c.json({ status: 'ok' }))

  app.get('/readyz', async (c) => {
    const entries = await Promise.all(
      Object.entries(deps.readiness).map(async ([name, probe]) => {
        const ok = await Promise.race([
          probe().catch(() => false),
          new Promise<boolean>((r) => setTimeout(() => r(false), PROBE_TIMEOUT_MS).unref()),
        ])
        return [name, ok ? 'ok' : 'unavailable'] as const
      }),
    )
    const checks = Object.fromEntries(entries)
    const ready = entries.every(([, state]) => state === 'ok')
    return c.json({ status: ready ? 'ready' : 'not ready', checks }, ready ? 200 : 503)
  })

  return app
}
