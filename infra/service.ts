import { randomBytes } from 'node:crypto'
import { chmod, readFile, writeFile } from 'node:fs/promises'
import type { Server } from 'node:http'
import { join } from 'node:path'
import { serve } from '@hono/node-server'
import { Redis } from 'ioredis'
import type { Logger } from 'pino'
import { createGrpcServer } from '../api/grpc/server.ts'
import { createApp } from '../api/http/app.ts'
import { loadTokens } from '../api/http/tokens.ts'
import { createFrrSync } from '../functions/frr-sync.ts'
import type { Config } from '../lib/config/index.ts'
import {
  type BgpSettings,
  createFrrController,
  createVtysh,
  parseBgpSettings,
} from '../lib/frr/index.ts'
import { canConnect } from '../lib/process/ports.ts'
import { storeAnnouncementSource } from '../queues/announcements.ts'
import { type FrrConsumer, startFrrConsumer } from '../queues/frr.ts'
import { sharedCentralProvider } from '../queues/ovn-provider.ts'
import { HydrazineClient } from '../queues/producer.ts'
import { bullConnection, startWorkers } from '../queues/worker.ts'

/** Where Hydrazine's dependencies live, embedded or external. */
export interface Endpoints {
  readonly redisUrl: string
  readonly ovn: { readonly nb: string; readonly sb: string }
  readonly frrVtyDir?: string
}

export interface RunningService {
  readonly url: string
  /** `host:port` of the gRPC API, when it is on. */
  readonly grpc?: string
  readonly operatorTokenFile?: string
  /** Stops accepting work, drains, and closes every client. */
  close(): Promise<void>
}

/**
 * The one place that constructs Hydrazine's clients (Redis, OVSDB, FRR) and hands each
 * component only what it needs: the HTTP API, the job workers and the schedulers.
 */
export async function startService(
  config: Config,
  endpoints: Endpoints,
  logger: Logger,
): Promise<RunningService> {
  const redis = new Redis(endpoints.redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1 })
  redis.on('error', (error) => logger.debug({ err: error }, 'redis connection error'))
  await redis.connect()

  const operatorTokenFile = config.tokensFile
    ? undefined
    : await ensureOperatorToken(config.dataDir)

  const workers = await startWorkers({
    redisUrl: endpoints.redisUrl,
    ovn: sharedCentralProvider(endpoints.ovn),
    fabric: config.fabric,
    logger,
  })
  let frrConsumer: FrrConsumer | undefined
  if (endpoints.frrVtyDir) {
    const frr = createFrrController({ vtysh: createVtysh({ vtyDir: endpoints.frrVtyDir }) })
    frrConsumer = await startFrrConsumer({
      connection: bullConnection(endpoints.redisUrl),
      frr,
      source: storeAnnouncementSource(workers.store, workers.ipam),
      handler: createFrrSync({ frr }),
    })
    logger.info({ resynced: frrConsumer.resynced }, 'FRR consumer resynced and running')
  }

  const client = new HydrazineClient(workers.store, workers.queue, workers.ipam)
  const tokens = await loadTokens({
    dataDir: config.dataDir,
    ...(config.tokensFile ? { tokensFile: config.tokensFile } : {}),
  })
  const app = createApp({
    readiness: {
      redis: async () => (await redis.ping()) === 'PONG',
      ovnNb: () => canConnectRemote(endpoints.ovn.nb),
    },
    v1: { client, store: workers.store, ipam: workers.ipam, redis, tokens },
    ...(config.webhookSecret ? { events: { secret: config.webhookSecret, client, redis } } : {}),
    logError: (error) => logger.error({ err: error }, 'HTTP 500'),
  })
  const server = await listen(app.fetch, config.http.host, config.http.port)
  const grpcIngress =
    config.grpcPort > 0
      ? createGrpcServer({
          client,
          store: workers.store,
          ipam: workers.ipam,
          tokens,
          subscribe: () => redis.duplicate(),
          logError: (error) => logger.error({ err: error }, 'gRPC INTERNAL'),
        })
      : undefined
  const grpcAddress = `${config.http.host.includes(':') ? `[${config.http.host}]` : config.http.host}:${config.grpcPort}`
  if (grpcIngress) await grpcIngress.bind(grpcAddress)
  const url = `http://${config.http.host.includes(':') ? `[${config.http.host}]` : config.http.host}:${config.http.port}`
  logger.info({ url }, 'HTTP API listening')

  return {
    url,
    ...(operatorTokenFile ? { operatorTokenFile } : {}),
    ...(grpcIngress ? { grpc: grpcAddress } : {}),
    async close() {
      await new Promise<void>((r) => server.close(() => r()))
      await grpcIngress?.close()
      await frrConsumer?.close()
      await workers.close()
      redis.disconnect()
    },
  }
}

/** Hydrazine's BGP speaker settings, from the validated configuration. */
export function bgpSettingsOf(config: Config): BgpSettings {
  return parseBgpSettings({
    localAs: config.bgp.asn,
    routerId: config.bgp.routerId,
    peers: config.bgp.peers,
  })
}

function listen(
  fetch: Parameters<typeof serve>[0]['fetch'],
  hostname: string,
  port: number,
): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch, hostname, port }, () => resolve(server as Server)) as Server
    server.once('error', reject)
  })
}

/** The embedded default: a random operator token in `<dataDir>/operator-token`, mode 0600. */
async function ensureOperatorToken(dataDir: string): Promise<string> {
  const file = join(dataDir, 'operator-token')
  const existing = await readFile(file, 'utf8').catch(() => '')
  if (existing.trim().length < 32) {
    await writeFile(file, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 })
  }
  await chmod(file, 0o600)
  return file
}

function canConnectRemote(remote: string): Promise<boolean> {
  if (remote.startsWith('unix:')) return canConnect({ path: remote.slice('unix:'.length) })
  const match = /^(?:tcp|ssl):\[?([^\]]+?)\]?:(\d+)$/.exec(remote)
  if (!match?.[1] || !match[2]) return Promise.resolve(false)
  return canConnect({ host: match[1], port: Number(match[2]) })
}
