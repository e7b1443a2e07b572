/**
 * `npm start`: Hydrazine's main job. Parses configuration, starts the embedded stack for
 * every service that is not configured externally (Redis, OVN central, FRR), then the
 * HTTP API and the job workers. Ctrl-C (SIGINT) or SIGTERM stops everything it started.
 */
import { pino } from 'pino'
import { type Config, loadConfig } from '../lib/config/index.ts'
import { HydrazineError } from '../lib/errors.ts'
import { renderBgpdConfig } from '../lib/frr/index.ts'
import { type LocalStack, startLocalStack } from './local/stack.ts'
import { bgpSettingsOf, startService } from './service.ts'

let config: Config
try {
  config = loadConfig(process.env)
} catch (error) {
  process.stderr.write(`hydrazine: ${(error as Error).message}\n`)
  process.exit(2)
}

const logger = pino({ level: config.logLevel, base: { service: 'hydrazine' } })
let stack: LocalStack | undefined
let shuttingDown = false

async function shutdown(reason: string, code: number, close?: () => Promise<void>) {
  if (shuttingDown) return
  shuttingDown = true
  logger.info({ reason }, 'shutting down')
  await close?.().catch((error: unknown) => logger.error({ err: error }, 'error while closing'))
  await stack?.stop()
  process.exit(code)
}

try {
  const embedRedis = !config.redisUrl
  const embedOvn = !config.ovn
  const embedFrr = !config.frrVtyDir
  if (embedRedis || embedOvn || embedFrr) {
    stack = await startLocalStack({
      dataDir: config.dataDir,
      redis: embedRedis ? { listenAddress: config.embeddedListen, port: 16379 } : false,
      ovn: embedOvn ? { listenAddress: config.embeddedListen, nbPort: 6641, sbPort: 6642 } : false,
      frr: embedFrr
        ? {
            bgpdConfig: renderBgpdConfig(bgpSettingsOf(config)),
            listenAddress: config.embeddedListen,
            bgpPort: config.embeddedListen === '127.0.0.1' ? 1179 : 179,
          }
        : false,
      log: (line) => logger.info(line),
    })
  }
  const redisUrl = config.redisUrl ?? stack?.redis?.url
  const ovn =
    config.ovn ?? (stack?.ovn ? { nb: stack.ovn.nb.unix, sb: stack.ovn.sb.tcp } : undefined)
  const frrVtyDir = config.frrVtyDir ?? stack?.frr?.vtyDir
  if (!redisUrl || !ovn) throw new Error('no Redis or OVN central available')

  const service = await startService(
    config,
    { redisUrl, ovn, ...(frrVtyDir ? { frrVtyDir } : {}) },
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
      ...(service.grpc ? [`  gRPC:            ${service.grpc} (hydrazine.v1.Hydrazine)`] : []),
      `  data:            ${config.dataDir}`,
      service.operatorTokenFile
        ? `  operator token:  ${service.operatorTokenFile}`
        : `  tokens:          ${config.tokensFile}`,
      `  OVN NB / SB:     ${ovn.nb}  /  ${ovn.sb}`,
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
