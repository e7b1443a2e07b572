/**
 * `HYDRAZINE_METRICS_LISTEN` and `HYDRAZINE_METRICS_TOKEN`: where Prometheus scrapes
 * `GET /metrics`, apart from the API, and what it must present there.
 *
 * - `HYDRAZINE_METRICS_LISTEN` (default `127.0.0.1:9464`): `host:port` (`[v6]:port`), or
 *   `off`. On loopback the listener is plaintext and open to this machine.
 * - Anywhere else it needs `HYDRAZINE_METRICS_TOKEN` (at least 16 characters; scrapers
 *   send `Authorization: Bearer <token>`) and `HYDRAZINE_TLS_CERT`/`_KEY` (it serves
 *   HTTPS with the API's certificate): plaintext only on loopback, as for the API.
 * - A token given for a loopback listener is required there too.
 *
 * @example
 * HYDRAZINE_METRICS_LISTEN=0.0.0.0:9464 HYDRAZINE_METRICS_TOKEN=… HYDRAZINE_TLS_CERT=… HYDRAZINE_TLS_KEY=…
 */
import * as v from 'valibot'
import { type MetricsListen, parseMetricsListen } from '../metrics/listen.ts'
import { isLoopback } from '../process/ports.ts'

export const MetricsListenVariable = v.optional(
  v.pipe(
    v.string(),
    v.rawTransform(({ dataset, addIssue, NEVER }) => {
      const parsed = parseMetricsListen(dataset.value)
      if (parsed !== undefined) return parsed
      addIssue({ message: 'must be host:port ([v6]:port for IPv6) or off' })
      return NEVER
    }),
  ),
  '127.0.0.1:9464',
)

export const MetricsTokenVariable = v.optional(
  v.pipe(v.string(), v.minLength(16, 'must be at least 16 characters')),
)

/** The metrics listener as the configuration holds it; absent when `off`. */
export interface MetricsConfig {
  readonly listen: MetricsListen
  /** Scrapers must send `Authorization: Bearer <token>`; required off loopback. */
  readonly token?: string
}

/**
 * The metrics listener from its two variables, or the variable that is wrong and why:
 * off loopback, a token and the API's TLS certificate are required.
 */
export function metricsConfig(
  listen: MetricsListen | 'off',
  token: string | undefined,
  hasTls: boolean,
): { ok: true; metrics: MetricsConfig | undefined } | { ok: false; path: string; message: string } {
  if (listen === 'off') return { ok: true, metrics: undefined }
  if (!isLoopback(listen.host)) {
    if (token === undefined) {
      return {
        ok: false,
        path: 'HYDRAZINE_METRICS_TOKEN',
        message: `required: HYDRAZINE_METRICS_LISTEN ${listen.host} is not loopback, and metrics there answer only a bearer token`,
      }
    }
    if (!hasTls) {
      return {
        ok: false,
        path: 'HYDRAZINE_METRICS_LISTEN',
        message: `${listen.host} is not loopback: serving metrics there needs HYDRAZINE_TLS_CERT and HYDRAZINE_TLS_KEY (plaintext is only allowed on loopback)`,
      }
    }
  }
  return { ok: true, metrics: { listen, ...(token !== undefined ? { token } : {}) } }
}
