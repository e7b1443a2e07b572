import { randomBytes } from 'node:crypto'
import { chmod, readFile, writeFile } from 'node:fs/promises'
import type { Server } from 'node:http'
import { join } from 'node:path'
import { serve } from '@hono/node-server'
import type { Logger } from 'pino'
import { createGrpcServer } from '../api/grpc/server.ts'
import { createApp } from '../api/http/app.ts'
import { loadTokens } from '../api/http/tokens.ts'
import { createFrrSync } from '../functions/frr-sync.ts'
import { storeAnnouncementSource } from '../functions/internal/announcements.ts'
import type { Config } from '../lib/config/index.ts'
import {
  type BgpSettings,
  createFrrController,
  createVtysh,
  parseBgpSettings,
} from '../lib/frr/index.ts'
import { sharedCentralProvider } from '../lib/ovn/central.ts'
import { canConnect } from '../lib/process/ports.ts'
import { type FrrConsumer, startFrrConsumer } from '../queues/frr.ts'
import { bullConnection, startController } from './controller.ts'

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
  const operatorTokenFile = config.tokensFile
    ? undefined
    : await ensureOperatorToken(config.dataDir)

  const controller = await startController({
    redisUrl: endpoints.redisUrl,
    ovn: sharedCentralProvider(endpoints.ovn),
    fabric: config.fabric,
    dhcpServers: config.dhcpServers,
    logger,
  })
  const { client } = controller
  let frrConsumer: FrrConsumer | undefined
  if (endpoints.frrVtyDir) {
    const frr = createFrrController({ vtysh: createVtysh({ vtyDir: endpoints.frrVtyDir }) })
    frrConsumer = await startFrrConsumer({
      connection: bullConnection(endpoints.redisUrl),
      frr,
      source: storeAnnouncementSource(controller.store, controller.ipam),
      handler: createFrrSync({ frr }),
    })
    logger.info({ resynced: frrConsumer.resynced }, 'FRR consumer resynced and running')
  }

  const tokens = await loadTokens({
    dataDir: config.dataDir,
    ...(config.tokensFile ? { tokensFile: config.tokensFile } : {}),
  })
  const app = createApp({
    readiness: {
      redis: async () => (await controller.redis.ping()) === 'PONG',
      ovnNb: () => canConnectRemote(endpoints.ovn.nb),
    },
    v1: { client, tokens },
    ...(config.webhookSecret ? { events: { secret: config.webhookSecret, client } } : {}),
    logError: (error) => logger.error({ err: error }, 'HTTP 500'),
  })
  const server = await listen(app.fetch, config.http.host, config.http.port)
  const grpcIngress =
    config.grpcPort > 0
      ? createGrpcServer({
          client,
          tokens,
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
      await controller.close()
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
