/**
 * Counting the HTTP API's requests for metrics: each answered request is reported with
 * its method, the route it matched (the registered path, `/v1/resource-groups/:name`,
 * never the raw URL: names stay out of the labels) and its status.
 */
import type { MiddlewareHandler } from 'hono'
import { matchedRoutes } from 'hono/route'

/** One answered HTTP request, as the metrics count it. */
export interface RequestSeen {
  readonly method: string
  /** The matched route's path, or `unmatched` when only middleware matched (a 404). */
  readonly route: string
  readonly status: number
}

/**
 * A middleware that reports every request once it is answered, errors included (the
 * app's `onError` has set the response by then). Register it first.
 *
 * @example
 * app.use('*', requestMetrics((r) => counter.inc({ method: r.method, route: r.route, status: r.status })))
 */
export function requestMetrics(observe: (request: RequestSeen) => void): MiddlewareHandler {
  return async function countRequest(c, next) {
    await next()
    const last = matchedRoutes(c).at(-1)
    // `app.use` registers middleware for every method: a request that matched only
    // middleware found no route.
    const route = last && last.method !== 'ALL' ? last.path : 'unmatched'
    observe({ method: c.req.method, route, status: c.res.status })
  }
}
