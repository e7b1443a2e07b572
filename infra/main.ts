/**
 * `npm start`: Hydrazine's main job. Parses configuration, starts the embedded stack for
 * every service that is not configured externally (Redis, OVN central, FRR), then the
 * HTTP API and the job workers. Ctrl-C (SIGINT) or SIGTERM stops everything it started.
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { type Config, loadConfig } from '../lib/config/index.ts'
import { HydrazineError } from '../lib/errors.ts'
import { announcementsIn, renderBgpdConfig } from '../lib/frr/index.ts'
import { type OvnCentralProvider, sharedCentralProvider } from '../lib/ovn/central.ts'
import { SYSTEM_OVN } from '../lib/ovn/install.ts'
import { trustedBy } from '../lib/pki/index.ts'
import { isLoopback } from '../lib/process/ports.ts'
import { redactRedisUrl } from '../lib/redis/connection.ts'
import { type ExternalCentrals, openExternalCentrals } from './centrals/external.ts'
import { centralsRoot, type PerGroupCentrals, startPerGroupCentrals } from './centrals/local.ts'
import { resolveOvnInstall } from './local/debian-ovn.ts'
import { ovnNorthdVersion } from './local/ovn-central.ts'
import { embeddedFrrDir, type LocalStack, startLocalStack } from './local/stack.ts'
import { createLogger } from './logger.ts'
import { bgpSettingsOf, startService } from './service.ts'

let config: Config
try {
  config = loadConfig(process.env)
} catch (error) {
  process.stderr.write(`hydrazine: ${(error as Error).message}\n`)
  process.exit(2)
}

const logger = createLogger(config.logLevel)
let stack: LocalStack | undefined
let centrals: PerGroupCentrals | undefined
let shuttingDown = false

async function shutdown(reason: string, code: number, close?: () => Promise<void>) {
  if (shuttingDown) return
  shuttingDown = true
  logger.info({ reason }, 'shutting down')
  await close?.().catch((error: unknown) => logger.error({ err: error }, 'error while closing'))
  await centrals?.close()
  await stack?.stop()
  process.exit(code)
}

try {
  // First: a centrals file that went bad since the configuration was checked stops
  // start-up before any daemon starts.
  const external: ExternalCentrals | undefined = config.ovnCentralsFile
    ? await openExternalCentrals({
        file: config.ovnCentralsFile,
        log: (line) => logger.info(line),
      })
    : undefined
  // Each group's central a StatefulSet the Kubernetes API runs (infra/k8s/README.md). Its
  // client is loaded only then: it costs about 2 s of start-up, which every other
  // start (and every restart after a cut) would pay for nothing.
  const kubernetesConfig = config.kubernetes
  const kubernetesCentrals = kubernetesConfig
    ? (await import('./centrals/kubernetes.ts')).openKubernetesCentrals
    : undefined
  const embedRedis = !config.redisUrl
  // The agents' Redis is never the embedded store's: a second one is started beside it. An
  // external store without AGENTS_REDIS_URL is shared with the agents (every replica must
  // reach the same agents' Redis): a shortcut that lets a DPU fill the store, warned of.
  const embedAgentsRedis = !config.agentsRedis && embedRedis
  const embedOvn = !config.ovn && !external && !kubernetesConfig
  const perGroup = embedOvn && config.ovnCentral === 'per-group'
  const embedFrr = !config.frrVtyDir
  // The OVN the embedded centrals run: the Debian 13 root is made here, once.
  const ovnInstall = embedOvn
    ? await resolveOvnInstall(config.ovnInstall, {
        cacheDir: join(config.dataDir, 'ovn-installs'),
        log: (line) => logger.info(line),
      })
    : undefined
  if (ovnInstall && ovnInstall !== SYSTEM_OVN) logger.info(`OVN centrals run ${ovnInstall.label}`)
  if (embedRedis || embedAgentsRedis || embedOvn || embedFrr) {
    stack = await startLocalStack({
      dataDir: config.dataDir,
      // Plaintext on loopback; TLS (from the stack's PKI) on any other address.
      redis: embedRedis ? { listenAddress: config.embeddedListen, port: 16379 } : false,
      agentsRedis: embedAgentsRedis ? { listenAddress: config.embeddedListen, port: 16380 } : false,
      ovn:
        embedOvn && !perGroup
          ? {
              listenAddress: config.embeddedListen,
              sbPort: 6642,
              ...(ovnInstall ? { install: ovnInstall } : {}),
            }
          : false,
      frr: embedFrr
        ? {
            // What bgpd announced when it last saved (the previous run's, kept in the
            // data dir) is announced again from its first moment: peers holding those
            // routes as stale (graceful restart) never see them withdrawn. The FRR
            // consumer's start-up resync then corrects them against the store.
            bgpdConfig: renderBgpdConfig(
              bgpSettingsOf(config),
              announcementsIn(
                await readFile(join(embeddedFrrDir(config.dataDir), 'bgpd.conf'), 'utf8').catch(
                  () => '',
                ),
              ),
            ),
            listenAddress: config.embeddedListen,
            bgpPort: config.embeddedListen === '127.0.0.1' ? 1179 : 179,
          }
        : false,
      log: (line) => logger.info(line),
    })
  }
  const redisUrl = config.redisUrl ?? stack?.redis?.url
  const redisCaFile = config.redisUrl ? config.redisCaFile : stack?.redis?.caFile
  const agentsRedis = config.agentsRedis ?? stack?.agentsRedis
  if (perGroup && stack) {
    centrals = await startPerGroupCentrals({
      dataDir: config.dataDir,
      listenAddress: config.embeddedListen,
      pki: stack.pki,
      chassisCertMs: config.chassisCertMs,
      ...(ovnInstall ? { install: ovnInstall } : {}),
      ...(config.centralsNorthdCpus !== undefined ? { northdCpus: config.centralsNorthdCpus } : {}),
      log: (line) => logger.info(line),
    })
  }
  // The CA of the DPUs' identities: the operator's (HYDRAZINE_K8S_DPU_CA, its certificate
  // only), or Hydrazine's own where it runs. An identity an agent presents is recorded when
  // that CA issued it for that DPU and it is newer than the one on record: Hydrazine's CA
  // records each as it issues it (POST /v1/dpus/{id}/credentials), and this takes those
  // an earlier version issued without a record (an upgraded site's DPUs stay in their
  // groups' SBs). Each Kubernetes-run central checks chassis against a CA of its group's own.
  const dpuIdentities = kubernetesConfig?.dpuCaFile
    ? trustedBy(await readFile(kubernetesConfig.dpuCaFile, 'utf8'))
    : stack?.pki
  const kubernetes: OvnCentralProvider | undefined =
    kubernetesConfig && kubernetesCentrals
      ? kubernetesCentrals(
          {
            ...kubernetesConfig,
            ...(dpuIdentities ? { dpuCa: dpuIdentities } : {}),
            chassisCertMs: config.chassisCertMs,
          },
          (line) => logger.info(line),
        )
      : undefined
  const shared =
    config.ovn ??
    (stack?.ovn
      ? {
          nb: stack.ovn.nb.unix,
          sb: stack.ovn.sb.remote,
          sbController: stack.ovn.sb.unix,
          northdVersion: await ovnNorthdVersion(ovnInstall),
        }
      : undefined)
  const ovn: OvnCentralProvider | undefined =
    external ?? kubernetes ?? centrals ?? (shared ? sharedCentralProvider(shared) : undefined)
  const frrVtyDir = config.frrVtyDir ?? stack?.frr?.vtyDir
  if (!redisUrl || !ovn) throw new Error('no Redis or OVN central available')
  if (!agentsRedis) {
    logger.warn(
      "AGENTS_REDIS_URL is unset: the DPU agents' queues and heartbeats share the store's Redis (REDIS_URL), which a DPU can then fill; give them a Redis of their own",
    )
  }

  const service = await startService(
    config,
    {
      redisUrl,
      ...(redisCaFile ? { redisCaFile } : {}),
      ...(agentsRedis
        ? {
            agentsRedis: {
              url: agentsRedis.url,
              ...(agentsRedis.caFile ? { caFile: agentsRedis.caFile } : {}),
              ...(agentsRedis.certFile ? { certFile: agentsRedis.certFile } : {}),
              ...(agentsRedis.keyFile ? { keyFile: agentsRedis.keyFile } : {}),
            },
          }
        : {}),
      ovn,
      ...(frrVtyDir ? { frrVtyDir, frrSaveConfig: embedFrr || config.frrSaveConfig } : {}),
      ...(stack?.pki ? { pki: stack.pki } : {}),
      ...(dpuIdentities ? { dpuIdentities } : {}),
      ...(centrals ? { centralDatabases: centrals.databases } : {}),
      embeddedCentral: embedOvn,
    },
    logger,
  )
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => void shutdown(signal, 0, () => service.close()))
  }
  void stack?.crashed.then((exit) => {
    logger.error({ daemon: exit.name, log: exit.logTail }, 'embedded daemon died')
    void shutdown(`${exit.name} died`, 1, () => service.close())
  })

  process.stdout.write(
    [
      '',
      `Hydrazine is up: ${service.url}`,
      `  health:          ${service.url}/healthz, ${service.url}/readyz`,
      `  API:             ${service.url}/v1 (OpenAPI: ${service.url}/v1/openapi.json)`,
      ...(service.grpc
        ? [`  gRPC:            ${service.grpc} (hydrazine.v1.HydrazineService)`]
        : []),
      `  queues:          ${service.url}/admin/queues (operator token)`,
      ...(service.metrics ? [`  metrics:         ${service.metrics}`] : []),
      `  data:            ${config.dataDir}`,
      service.operatorTokenFile
        ? `  operator token:  ${service.operatorTokenFile}`
        : `  tokens:          ${config.tokensFile}`,
      `  Redis:           ${redactRedisUrl(redisUrl)}${redisCaFile ? ` (CA ${redisCaFile})` : ''}`,
      ...(stack?.redis ? [`  Redis password:  ${stack.redis.passwordFile}`] : []),
      agentsRedis
        ? `  agents' Redis:   ${redactRedisUrl(agentsRedis.url)}${agentsRedis.caFile ? ` (CA ${agentsRedis.caFile})` : ''}`
        : "  agents' Redis:   the store's (AGENTS_REDIS_URL unset: a DPU can fill it)",
      ...(stack?.agentsRedis ? [`  its password:    ${stack.agentsRedis.passwordFile}`] : []),
      external
        ? `  OVN centrals:    named per group in ${external.file}`
        : config.kubernetes
          ? `  OVN centrals:    one StatefulSet per resource group in namespace ${config.kubernetes.namespace}`
          : shared
            ? `  OVN NB / SB:     ${shared.nb}  /  ${shared.sb}`
            : `  OVN centrals:    one per resource group, in ${centralsRoot(config.dataDir)}`,
      ...(stack && !isLoopback(config.embeddedListen) && (stack.ovn || centrals)
        ? [`  PKI (CA):        ${stack.pki.caFile}  (chassis: client certificate, CN = system-id)`]
        : []),
      ...(frrVtyDir ? [`  FRR:             vtysh --vty_socket ${frrVtyDir}`] : []),
      '  Ctrl-C stops Hydrazine and every daemon it started.',
      '',
    ].join('\n'),
  )
} catch (error) {
  const message = error instanceof HydrazineError ? error.message : String(error)
  logger.error({ err: error }, `start-up failed: ${message}`)
  // The log is JSON for machines; a person at the terminal gets the reason in one line.
  process.stderr.write(`hydrazine: start-up failed: ${message.split('\n')[0]}\n`)
  await shutdown('start-up failed', 1)
}
