/**
 * The `/metrics` listener the controller and the DPU agent share: Prometheus' text
 * format from one registry, on its own address, apart from the API.
 *
 * Plaintext and open on loopback; anywhere else it serves HTTPS and answers only
 * `Authorization: Bearer <token>` (the configuration refuses one without the other, see
 * `lib/config/metrics.ts` and the agent's `--metrics-listen`). The token is compared as a
 * SHA-256 digest in constant time.
 *
 * @example
 * const metrics = await serveMetrics({ registry, listen: { host: '127.0.0.1', port: 9464 } })
 * // curl http://127.0.0.1:9464/metrics
 * await metrics.close()
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import type { Registry } from 'prom-client'
import { ConfigError } from '../errors.ts'
import { isLoopback } from '../process/ports.ts'
import type { MetricsListen } from './listen.ts'

export { type MetricsListen, parseMetricsListen } from './listen.ts'

export interface MetricsServerOptions {
  readonly registry: Pick<Registry, 'metrics' | 'contentType'>
  readonly listen: MetricsListen
  /** Required off loopback: callers must present it as `Authorization: Bearer <token>`. */
  readonly token?: string
  /** PEM certificate (chain) and key; required off loopback (HTTPS). */
  readonly tls?: { readonly cert: string | Buffer; readonly key: string | Buffer }
  /** Sees a failure to render the metrics (answered 500). */
  readonly onError?: (error: unknown) => void
}

export interface MetricsServer {
  /** `http(s)://host:port/metrics`, with the bound port. */
  readonly url: string
  readonly port: number
  /**
   * Serves connections made from now on with another certificate and key (a renewed
   * identity); a no-op for a plaintext listener.
   */
  useTls(tls: { readonly cert: string | Buffer; readonly key: string | Buffer }): void
  close(): Promise<void>
}

/** Starts the listener; throws ConfigError for an open or plaintext listener off loopback. */
export async function serveMetrics(options: MetricsServerOptions): Promise<MetricsServer> {
  const { registry, listen, token, tls, onError = () => {} } = options
  if (!isLoopback(listen.host) && (token === undefined || tls === undefined)) {
    throw new ConfigError(
      `metrics listener ${listen.host}: off loopback it needs a token and a TLS certificate`,
    )
  }
  const expected = token === undefined ? undefined : digest(token)

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0]
    if (path !== '/metrics') return answer(res, 404, 'not found: try /metrics\n')
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.setHeader('Allow', 'GET, HEAD')
      return answer(res, 405, 'method not allowed\n')
    }
    if (expected && !presents(req.headers.authorization, expected)) {
      res.setHeader('WWW-Authenticate', 'Bearer realm="hydrazine-metrics"')
      return answer(res, 401, 'a valid bearer token is required\n')
    }
    registry.metrics().then(
      (body) => {
        res.writeHead(200, { 'Content-Type': registry.contentType })
        res.end(req.method === 'HEAD' ? undefined : body)
      },
      (error: unknown) => {
        onError(error)
        answer(res, 500, 'metrics could not be collected\n')
      },
    )
  }

  const https = tls ? createHttpsServer({ ...tls }, handle) : undefined
  const server: Server = https ?? createServer(handle)
  const port = await new Promise<number>((resolve, reject) => {
    server.once('error', reject)
    server.listen(listen.port, listen.host, () => {
      server.off('error', reject)
      const address = server.address()
      resolve(typeof address === 'object' && address ? address.port : listen.port)
    })
  })
  const host = listen.host.includes(':') ? `[${listen.host}]` : listen.host
  return {
    url: `${tls ? 'https' : 'http'}://${host}:${port}/metrics`,
    port,
    useTls: (renewed) => https?.setSecureContext({ ...renewed }),
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}

const digest = (text: string) => createHash('sha256').update(text).digest()

/** True when `authorization` is `Bearer <token>` with the expected token. */
function presents(authorization: string | undefined, expected: Buffer): boolean {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '')
  return match?.[1] !== undefined && timingSafeEqual(digest(match[1]), expected)
}

function answer(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8' })
  res.end(text)
}
