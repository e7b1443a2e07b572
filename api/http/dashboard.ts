/**
 * The queue dashboard (bull-board) at `/admin/queues`: every queue the controller feeds
 * — its own, FRR's and each DPU agent's — with their jobs, for operators only (a tenant
 * token is 403, no token 401, as for the operator-only `/v1` routes).
 *
 * The queues are read again whenever the dashboard asks for them, so a DPU seen after
 * start-up shows up without a restart. The queue objects come from the composition root.
 *
 * @example
 * app.route(DASHBOARD_PATH, dashboardRoutes({ tokens, queues: async () => [queue] }))
 */
import { createBullBoard } from '@bull-board/api'
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter'
import { HonoAdapter } from '@bull-board/hono'
import { serveStatic } from '@hono/node-server/serve-static'
import type { Queue } from 'bullmq'
import { Hono } from 'hono'
import { displayQueueName } from '../../lib/redis/slots.ts'
import type { Tokens } from './tokens.ts'
import { bearerTokens, operatorOnly } from './v1.ts'

/** Where the dashboard is mounted on the HTTP API. */
export const DASHBOARD_PATH = '/admin/queues'

export interface DashboardDeps {
  readonly tokens: Tokens
  /** The queues to show, asked again each time the dashboard lists them. */
  queues(): Promise<readonly Queue[]>
}

export function dashboardRoutes(deps: DashboardDeps): Hono {
  const adapter = new HonoAdapter(serveStatic).setBasePath(DASHBOARD_PATH)
  const board = createBullBoard({
    queues: [],
    serverAdapter: adapter,
    options: { uiConfig: { boardTitle: 'Hydrazine queues' } },
  })

  const app = new Hono()
  app.use('*', bearerTokens(deps.tokens), operatorOnly)
  // The UI lists queues through its API: show the queues as they are now.
  app.use('/api/*', async function currentQueues(_c, next) {
    board.replaceQueues(
      (await deps.queues()).map(
        (queue) => new BullMQAdapter(queue, { displayName: displayQueueName(queue.name) }),
      ),
    )
    await next()
  })
  app.route('/', adapter.registerPlugin())
  return app
}
