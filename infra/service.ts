import { randomBytes } from 'node:crypto'
import { chmod, mkdir, readFile } from 'node:fs/promises'
import type { Server } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import { join } from 'node:path'
import * as grpc from '@grpc/grpc-js'
import { serve } from '@hono/node-server'
import type { Logger } from 'pino'
import { collectDefaultMetrics, Registry } from 'prom-client'
import { createGrpcServer } from '../api/grpc/server.ts'
import { createApp } from '../api/http/app.ts'
import { loadTokens } from '../api/http/tokens.ts'
import { RedisSessions } from '../api/http/ui/session.ts'
import { type ProducerIngress, startProducerIngress } from '../api/producers/ingress.ts'
import { loadProducers } from '../api/producers/producers-file.ts'
import { createOperations } from '../app/index.ts'
import { createFrrSync } from '../functions/frr-sync.ts'
import { storeAnnouncementSource } from '../functions/internal/announcements.ts'
import { controllerOvsdbTls } from '../lib/config/client-tls.ts'
import type { Config } from '../lib/config/index.ts'
import { ConfigError } from '../lib/errors.ts'
import { writeFileAtomic } from '../lib/files/index.ts'
import {
  type BgpSettings,
  createFrrController,
  createVty,
  parseBgpSettings,
  type Vty,
} from '../lib/frr/index.ts'
import type { Producer } from '../lib/jobs/producers.ts'
import { type MetricsServer, serveMetrics } from '../lib/metrics/server.ts'
import { natIpsAdmitted } from '../lib/model/southbound-admission.ts'
import type { OvnCentralProvider } from '../lib/ovn/central.ts'
import type { CertificateAuthority, CertificateSigner } from '../lib/pki/index.ts'
import { canConnect, isLoopback } from '../lib/process/ports.ts'
import type { RedisEndpoint } from '../lib/redis/connection.ts'
import { controllerHolderId, type Leadership } from '../lib/state/leases.ts'
import type { StateStore } from '../lib/state/store.ts'
import { type FrrConsumer, startFrrConsumer } from '../queues/frr.ts'
import type { CentralDatabases } from './centrals/local.ts'
import { bullConnection, type Controller, startController } from './controller.ts'
import { syncProducerUsers } from './credentials.ts'
import {
  announcedCollector,
  centralDatabasesCollector,
  ingressInstruments,
} from './metrics/service.ts'
import { holdEmbeddedCentral, leadFrrConsumer } from './replicas.ts'

/** Where Hydrazine's dependencies live, embedded or external. */
export interface Endpoints {
  /** Redis URL with its credentials (secret: never log it). */
  readonly redisUrl: string
  /** PEM file of the CA that signed a `rediss://` server's certificate. */
  readonly redisCaFile?: string
  /**
   * The agents' Redis (the DPUs' queues, heartbeats and Redis users), apart from the
   * store's so that no DPU can make the store or the API refuse a write. Absent: the
   * store's Redis holds them too (an external `REDIS_URL` without `AGENTS_REDIS_URL`).
   */
  readonly agentsRedis?: RedisEndpoint
  /** Where each group's OVN central is: one shared, or one per group. */
  readonly ovn: OvnCentralProvider
  readonly frrVtyDir?: string
  /** Whether bgpd saves its configuration before a change is acknowledged. */
  readonly frrSaveConfig?: boolean
  /**
   * True when this process runs the OVN central(s) itself (embedded): no other controller
   * on the same Redis may (`holdEmbeddedCentral`).
   */
  readonly embeddedCentral?: boolean
  /** Hydrazine's CA, when it runs one: DPU credentials then carry a certificate. */
  readonly pki?: CertificateAuthority
  /**
   * The CA of the DPUs' identities (Hydrazine's, or the operator's): identities the agents
   * present in their heartbeats are recorded when it issued them for their DPU.
   */
  readonly dpuIdentities?: Pick<CertificateSigner, 'issued'>
  /** The embedded per-group centrals' damaged and remade databases, for the metrics. */
  readonly centralDatabases?: () => CentralDatabases
}

export interface RunningService {
  readonly url: string
  /** `host:port` of the gRPC API, when it is on. */
  readonly grpc?: string
  readonly operatorTokenFile?: string
  /** `http(s)://host:port/metrics`, when the metrics listener is on. */
  readonly metrics?: string
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

  // One registry for the whole process, scraped on its own listener (config.metrics).
  const registry = config.metrics ? new Registry() : undefined
  if (registry) collectDefaultMetrics({ register: registry, prefix: 'hydrazine_' })
  const ingress = registry ? ingressInstruments(registry) : undefined
  if (registry && endpoints.centralDatabases) {
    centralDatabasesCollector(registry, endpoints.centralDatabases)
  }

  // Read before the controller starts: it bounds their keys and shows their queues.
  const producers = config.producersFile ? await loadProducers(config.producersFile) : undefined
  // The certificate the controller presents to `ssl:` NBs and SBs (the Kubernetes centrals'
  // controller SB port included).
  const ovsdbTls = controllerOvsdbTls(config)
  const controller = await startController({
    redisUrl: endpoints.redisUrl,
    ...(endpoints.redisCaFile ? { redisCaFile: endpoints.redisCaFile } : {}),
    ...(endpoints.agentsRedis ? { agentsRedis: endpoints.agentsRedis } : {}),
    ovn: endpoints.ovn,
    fabric: config.fabric,
    ...(config.dnsZone ? { dnsZone: config.dnsZone } : {}),
    geneveIpsec: config.geneveIpsec,
    parkForCommit: config.parkForCommit,
    dhcpServers: config.dhcpServers,
    quotas: config.quotas,
    ...(config.maxCentrals !== undefined ? { maxCentrals: config.maxCentrals } : {}),
    ...(config.centralIdleMs !== undefined
      ? { centralsOnDemand: { idleMs: config.centralIdleMs } }
      : {}),
    ...(config.kubernetes?.dpuCidrs ? { southboundCidrs: config.kubernetes.dpuCidrs } : {}),
    ...(ovsdbTls.nb ? { nbTls: ovsdbTls.nb } : {}),
    ...(ovsdbTls.sb ? { sbTls: ovsdbTls.sb } : {}),
    ...(config.adminNetwork ? { adminNetwork: config.adminNetwork } : {}),
    networkImplementation: config.networkImplementation,
    dpuHealthEveryMs: config.dpuHealthEveryMs,
    ...(config.dpuRedisMaxBytes > 0
      ? { dpuRedisBound: { limitBytes: config.dpuRedisMaxBytes } }
      : {}),
    ...(producers ? { producers } : {}),
    ...(producers && config.producerRedisMaxBytes > 0
      ? { producerRedisBound: { limitBytes: config.producerRedisMaxBytes } }
      : {}),
    lockDurationMs: config.jobLockMs,
    logger,
    ...(endpoints.pki ? { certificates: dpuCertificates(endpoints.pki) } : {}),
    ...(endpoints.dpuIdentities ? { dpuIdentities: endpoints.dpuIdentities } : {}),
    ...(registry ? { metrics: registry } : {}),
  })
  const { client } = controller
  if (config.kubernetes?.dpuCidrs) {
    await refuseAdmittedNatIps(controller.store, config.kubernetes.dpuCidrs).catch(
      async (error: unknown) => {
        await controller.close()
        throw error
      },
    )
  }
  // This process among the replicas on the same Redis (`replicas.ts`).
  const holder = controllerHolderId(config.dataDir)
  const releaseCentral = endpoints.embeddedCentral
    ? await holdEmbeddedCentral(controller.store.leases, holder, logger).catch(
        async (error: unknown) => {
          await controller.close()
          throw error
        },
      )
    : undefined
  let frrLeadership: Leadership | undefined
  let frrVty: Vty | undefined
  if (endpoints.frrVtyDir) {
    const vty = createVty({ vtyDir: endpoints.frrVtyDir })
    frrVty = vty
    const frr = createFrrController({ vty, saveConfig: endpoints.frrSaveConfig ?? false })
    if (registry) announcedCollector(registry, () => frr.announced())
    const redis = {
      url: endpoints.redisUrl,
      ...(endpoints.redisCaFile ? { caFile: endpoints.redisCaFile } : {}),
    }
    frrLeadership = leadFrrConsumer(
      controller.store.leases,
      holder,
      frr,
      async () => {
        const connection = bullConnection(redis)
        const consumer: FrrConsumer = await startFrrConsumer({
          connection,
          frr,
          source: storeAnnouncementSource(controller.store, controller.ipam, {
            fabric6: config.fabric.dummyIp6 !== undefined,
          }),
          handler: createFrrSync({ frr }),
          onResync: (result) => {
            if (result.held.length > 0 || result.failed.length > 0) {
              logger.warn({ resync: result }, 'FRR resync held back or failed some prefixes')
            }
          },
        }).catch((error: unknown) => {
          connection.disconnect()
          throw error
        })
        logger.info({ resynced: consumer.resynced }, 'FRR consumer resynced and running')
        return async () => {
          await consumer.close()
          connection.disconnect()
        }
      },
      logger,
    )
  }

  const tokens = await loadTokens({
    dataDir: config.dataDir,
    ...(config.tokensFile ? { tokensFile: config.tokensFile } : {}),
  })
  // Queue producers: each on its own queue in the agents' Redis, as its own Redis user,
  // making its requests as the principal the producers file gives it.
  const producerIngress = producers
    ? await startProducers(producers, controller, logger).catch(async (error: unknown) => {
        await frrLeadership?.stop()
        await releaseCentral?.()
        await controller.close()
        throw error
      })
    : undefined
  // What `/readyz` and the gRPC health service report.
  const readiness = {
    redis: async () => (await controller.redis.ping()) === 'PONG',
    agentsRedis: async () => (await controller.agentsRedis.ping()) === 'PONG',
    // The shared central, when there is one; a group's own central is reported in the
    // group's status instead (a probe must not open a connection per group).
    ovnNb: async () => {
      const shared = (await endpoints.ovn.list()).filter((c) => c.group === undefined)
      return (await Promise.all(shared.map((c) => canConnectRemote(c.nb)))).every(Boolean)
    },
  }
  // Ends the admin UI's live streams, so that closing the server does not wait on them.
  const uiClosing = new AbortController()
  const app = createApp({
    readiness,
    v1: { client, tokens },
    ...(config.webhookSecret ? { events: { secret: config.webhookSecret, client } } : {}),
    dashboard: { tokens, queues: () => controller.queues() },
    ui: {
      client,
      tokens,
      // In Redis: every replica knows every session, and a restart signs no one out.
      sessions: new RedisSessions(controller.redis),
      closing: uiClosing.signal,
      logError: (error) => logger.error({ err: error }, 'admin UI 500'),
    },
    ...(ingress ? { observeRequest: ingress.httpRequest } : {}),
    logError: (error) => logger.error({ err: error }, 'HTTP 500'),
  })
  const tls = config.tls
    ? {
        cert: await readFile(config.tls.certFile),
        key: await readFile(config.tls.keyFile),
      }
    : undefined
  const server = await listen(app.fetch, config.http.host, config.http.port, tls)
  const grpcIngress =
    config.grpcPort > 0
      ? createGrpcServer({
          client,
          tokens,
          readiness,
          logError: (error) => logger.error({ err: error }, 'gRPC INTERNAL'),
          ...(ingress ? { interceptors: [ingress.grpcInterceptor] } : {}),
        })
      : undefined
  const grpcAddress = `${config.http.host.includes(':') ? `[${config.http.host}]` : config.http.host}:${config.grpcPort}`
  if (grpcIngress) {
    await grpcIngress.bind(
      grpcAddress,
      tls
        ? grpc.ServerCredentials.createSsl(null, [{ cert_chain: tls.cert, private_key: tls.key }])
        : grpc.ServerCredentials.createInsecure(),
    )
  }
  const url = `${tls ? 'https' : 'http'}://${config.http.host.includes(':') ? `[${config.http.host}]` : config.http.host}:${config.http.port}`
  logger.info({ url }, 'HTTP API listening')
  const metrics: MetricsServer | undefined =
    registry && config.metrics
      ? await serveMetrics({
          registry,
          listen: config.metrics.listen,
          ...(config.metrics.token ? { token: config.metrics.token } : {}),
          // Plaintext on loopback; elsewhere HTTPS with the API's certificate.
          ...(tls && !isLoopback(config.metrics.listen.host) ? { tls } : {}),
          onError: (error) => logger.warn({ err: error }, 'metrics scrape failed'),
        })
      : undefined
  if (metrics) logger.info({ url: metrics.url }, 'metrics listening')

  return {
    url,
    ...(operatorTokenFile ? { operatorTokenFile } : {}),
    ...(grpcIngress ? { grpc: grpcAddress } : {}),
    ...(metrics ? { metrics: metrics.url } : {}),
    async close() {
      await metrics?.close()
      uiClosing.abort()
      await new Promise<void>((r) => server.close(() => r()))
      await grpcIngress?.close()
      await producerIngress?.close()
      await frrLeadership?.stop()
      frrVty?.close()
      await releaseCentral?.()
      await controller.close()
    },
  }
}

/**
 * The producers (of the producers file, or read from `file`): their Redis users made
 * exactly these (others removed), then a worker on each one's queue making its requests
 * as its principal.
 */
export async function startProducers(
  from: string | readonly Producer[],
  controller: Controller,
  logger: Logger,
): Promise<ProducerIngress> {
  const producers = typeof from === 'string' ? await loadProducers(from) : from
  const removed = await syncProducerUsers(controller.agentsRedis, producers, controller.prefix)
  if (removed.length > 0) logger.warn({ producers: removed }, 'producer users removed')
  const operations = createOperations({ client: controller.client })
  const ingress = await startProducerIngress({
    producers,
    connection: () => controller.agentsConnection(),
    prefix: controller.prefix,
    operations,
    onFailed: (producer, job, reason) =>
      logger.info({ producer, job, reason }, 'producer request refused or failed'),
  })
  logger.info({ producers: producers.map((p) => p.id) }, "consuming the producers' queues")
  return ingress
}

/**
 * A DPU's identity from Hydrazine's CA: CN and DNS name = the DPU id (its chassis name for
 * OVN RBAC), a client certificate (Redis, the Southbound) and, for the same key, a server
 * certificate (the agent's gRPC and metrics).
 */
function dpuCertificates(pki: CertificateAuthority) {
  return async (dpuId: string) => {
    const issued = await pki.issueIdentity({ commonName: dpuId, dnsNames: [dpuId] })
    return { ...issued, ca: pki.caCert }
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

/** Serves `fetch` over HTTP, or over HTTPS with `tls` (PEM certificate chain and key). */
function listen(
  fetch: Parameters<typeof serve>[0]['fetch'],
  hostname: string,
  port: number,
  tls: { cert: Buffer; key: Buffer } | undefined,
): Promise<Server> {
  return new Promise((resolve, reject) => {
    const options = tls
      ? { fetch, hostname, port, createServer: createHttpsServer, serverOptions: tls }
      : { fetch, hostname, port }
    const server = serve(options, () => resolve(server as Server)) as Server
    server.once('error', reject)
  })
}

/** The embedded default: a random operator token in `<dataDir>/operator-token`, mode 0600. */
async function ensureOperatorToken(dataDir: string): Promise<string> {
  await mkdir(dataDir, { recursive: true, mode: 0o700 })
  const file = join(dataDir, 'operator-token')
  const existing = await readFile(file, 'utf8').catch(() => '')
  if (existing.trim().length < 32) {
    await writeFileAtomic(file, `${randomBytes(32).toString('hex')}\n`, { mode: 0o600 })
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

/**
 * Refuses to start when a DPU of the inventory has a NAT address inside
 * `HYDRAZINE_K8S_DPU_CIDRS`: its tenant hosts would reach every group's Southbound
 * (`lib/model/southbound-admission.ts`). Requests refuse such a DPU; this finds one stored
 * before the CIDRs were set or widened.
 */
export async function refuseAdmittedNatIps(
  store: Pick<StateStore, 'dpus'>,
  cidrs: readonly string[],
): Promise<void> {
  const found = (await store.dpus.list()).flatMap((dpu) =>
    natIpsAdmitted(dpu.spec, cidrs).map(
      (a) => `DPU ${dpu.name}'s NAT address ${a.ip} (in ${a.cidr})`,
    ),
  )
  if (found.length === 0) return
  throw new ConfigError(
    `HYDRAZINE_K8S_DPU_CIDRS admits ${found.join(', ')} to every group's Southbound: the tenant hosts behind those DPUs leave from their NAT addresses and would reach it; narrow HYDRAZINE_K8S_DPU_CIDRS to the DPUs' encap addresses, or give those DPUs NAT addresses outside it`,
    [{ path: 'HYDRAZINE_K8S_DPU_CIDRS', message: 'contains NAT addresses of the inventory' }],
  )
}
