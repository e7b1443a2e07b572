/**
 * Wires the agent to the outside: its BullMQ queue (jobs in, acks out), the heartbeat in
 * Redis and the gRPC server. `startAgentRuntime` is what `agent/main.ts` runs and what
 * tests start in-process.
 *
 * With the DPU's TLS identity the gRPC server requires client certificates from the same
 * CA (mTLS) and Redis sees the DPU's certificate; without it gRPC listens on loopback
 * only (`config.ts` refuses anything else). Every log line goes through `redactingLog`:
 * the Redis password never reaches the log.
 */
import { execFile } from 'node:child_process'
import { readFileSync } from 'node:fs'
import { readFile } from 'node:fs/promises'
import type { ConnectionOptions } from 'node:tls'
import { promisify } from 'node:util'
import * as grpc from '@grpc/grpc-js'
import { type Job, UnrecoverableError, Worker } from 'bullmq'

import { collectDefaultMetrics, Registry } from 'prom-client'
import { type AgentHandlers, agentServiceDefinition } from '../lib/agent-protocol/grpc.ts'
import { HEARTBEAT_TTL_INTERVALS, Heartbeats } from '../lib/agent-protocol/heartbeats.ts'
import {
  agentQueueName,
  type ConfigureAck,
  type FabricConfigureAck,
  type FabricIsolateAck,
  type Heartbeat,
  type IsolateAck,
  parseAgentJob,
} from '../lib/agent-protocol/index.ts'
import { ConfigError, HydrazineError } from '../lib/errors.ts'
import { parseMetricsListen } from '../lib/metrics/listen.ts'
import { type MetricsServer, serveMetrics } from '../lib/metrics/server.ts'
import { ovnVersionIn } from '../lib/ovn/install.ts'
import { createRedis, duplicateClient } from '../lib/redis/connection.ts'
import { timestampOf } from '../proto/load.ts'
import { Agent } from './agent.ts'
import { type AgentConfig, describeConfig, isLoopback, redactingLog } from './config.ts'
import { agentInstruments } from './metrics.ts'
import { queuedJobs } from './queued-jobs.ts'
import { type AgentTls, loadAgentTls } from './tls.ts'
import { ServingCertificates, watchIdentity } from './tls-reload.ts'

export const AGENT_VERSION: string = (
  JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as {
    version: string
  }
).version

export interface AgentRuntime {
  readonly agent: Agent
  readonly worker: Worker
  /** `host:port` the gRPC server listens on. */
  readonly grpcAddress: string
  /** `http(s)://host:port/metrics`, with `--metrics-listen`. */
  readonly metricsUrl?: string
  /** Writes one heartbeat now (also done every `heartbeatMs`). */
  beat(): Promise<Heartbeat>
  stop(): Promise<void>
}

/**
 * Turns what the agent throws into what BullMQ must do: a bad payload, an unknown
 * protocol version or any non-retryable Hydrazine error fails the job at once.
 */
function forQueue(err: unknown): unknown {
  if (err instanceof HydrazineError && !err.retryable) {
    return new UnrecoverableError(`${err.code}: ${err.message}`)
  }
  return err
}

/**
 * Connection options for the controller's Redis: TLS for `rediss://` (the private CA of
 * `--redis-ca`, the DPU's certificate when it has one).
 */
async function redisOptions(
  config: AgentConfig,
  tls: AgentTls | undefined,
): Promise<{ maxRetriesPerRequest: null; tls?: ConnectionOptions }> {
  const options = { maxRetriesPerRequest: null }
  if (!config.redisUrl.startsWith('rediss')) return options
  let ca: string | undefined
  if (config.redisCa) {
    ca = await readFile(config.redisCa, 'utf8').catch((err: Error) => {
      throw new ConfigError(`--redis-ca (or HZ_REDIS_CA) cannot be read: ${err.message}`)
    })
  }
  return {
    ...options,
    tls: {
      ...(ca ? { ca } : {}),
      ...(tls ? { cert: tls.cert, key: tls.key } : {}),
    },
  }
}

/** The version `ovn-controller --version` prints (`23.03.1`); undefined when it cannot run. */
async function ovnControllerVersion(): Promise<string | undefined> {
  const { stdout } = await promisify(execFile)('ovn-controller', ['--version']).catch(() => ({
    stdout: '',
  }))
  return ovnVersionIn(stdout)
}

/** Logs a client's errors, each once until another comes: a Redis that is down logs one line. */
function logErrors(what: string, log: (line: string) => void): (err: unknown) => void {
  let last = ''
  return (err) => {
    const line = `${what}: ${String(err)}`
    if (line !== last) log(line)
    last = line
  }
}

export async function startAgentRuntime(
  config: AgentConfig,
  rawLog: (line: string) => void = () => {},
): Promise<AgentRuntime> {
  const log = redactingLog(config, rawLog)
  log(`starting: ${describeConfig(config)}`)
  // Read and check the DPU's identity before touching anything.
  const tls = await loadAgentTls(config)
  if (tls && !tls.serves) {
    log(
      'warning: --tls-cert is a client certificate only (clientAuth) and no ' +
        '--tls-server-cert is given: gRPC and metrics clients will refuse this agent',
    )
  }
  const connection = await redisOptions(config, tls)
  // The identity in use: renewed while the agent runs (`watchIdentity`, below).
  let identity = tls
  const agent = await Agent.create(config, log, tls)
  const redis = createRedis({ url: config.redisUrl }, connection)
  redis.on('error', logErrors('redis', log))
  const heartbeats = new Heartbeats(redis)
  agent.watchQueue(
    queuedJobs(
      redis,
      agentQueueName(config.dpuId),
      config.queuePrefix ?? 'bull',
      config.protocolVersions,
    ),
  )
  const ovnVersion = await ovnControllerVersion()
  // The agent's one metrics registry, served with --metrics-listen.
  const registry = new Registry()
  const metrics = agentInstruments(registry)
  const cleanups: (() => Promise<unknown>)[] = [() => agent.close(), () => redis.quit()]
  const stop = async () => {
    for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => {})
  }

  try {
    const beat = async (): Promise<Heartbeat> => {
      const observed = await agent.observe().catch((err: unknown) => {
        metrics.heartbeat(false)
        throw err
      })
      metrics.observed(observed)
      const heartbeat: Heartbeat = {
        dpuId: config.dpuId,
        agentVersion: AGENT_VERSION,
        protocolVersions: [...config.protocolVersions],
        fabricIps: [...config.fabricIps],
        // Stamped once observed: a slow OVS read does not make the beat look older.
        at: new Date().toISOString(),
        intervalMs: config.heartbeatMs,
        observed,
        ...(ovnVersion ? { ovnVersion } : {}),
        ...(identity ? { identity: identity.cert } : {}),
      }
      await heartbeats.write(heartbeat, HEARTBEAT_TTL_INTERVALS * config.heartbeatMs).then(
        () => metrics.heartbeat(true),
        (err: unknown) => {
          metrics.heartbeat(false)
          throw err
        },
      )
      return heartbeat
    }
    await beat()
    const timer = setInterval(() => {
      beat().catch((err) => log(`heartbeat failed: ${String(err)}`))
    }, config.heartbeatMs)
    cleanups.push(async () => {
      clearInterval(timer)
      await heartbeats.remove(config.dpuId)
    })

    const server = new grpc.Server()
    server.addService(
      agentServiceDefinition(),
      tls
        ? onlyClients(config.grpcClients, grpcHandlers(agent, config))
        : grpcHandlers(agent, config),
    )
    // With the DPU's identity: TLS, and clients must show a certificate from the same CA.
    const serving = tls ? new ServingCertificates(tls) : undefined
    const credentials = serving
      ? grpc.experimental.createCertificateProviderServerCredentials(serving, serving, true)
      : grpc.ServerCredentials.createInsecure()
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(config.grpcListen, credentials, (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    )
    cleanups.push(() => new Promise<void>((resolve) => server.tryShutdown(() => resolve())))
    const host = config.grpcListen.slice(0, config.grpcListen.lastIndexOf(':'))

    const process = async (
      job: Job,
    ): Promise<ConfigureAck | IsolateAck | FabricConfigureAck | FabricIsolateAck> => {
      const started = performance.now()
      const done = (outcome: 'completed' | 'failed') =>
        metrics.jobDone(jobLabel(job.name), outcome, (performance.now() - started) / 1000)
      try {
        const parsed = parseAgentJob(job.name, job.data, config.protocolVersions)
        log(`job ${job.id} ${job.name} (protocol ${parsed.payload.protocolVersion})`)
        // Placed by when the controller sent it (kept across retries): `job-order.ts`.
        const ack = await agent.run(parsed, job.timestamp)
        done('completed')
        return ack
      } catch (err) {
        done('failed')
        log(`job ${job.id} ${job.name} failed: ${String(err)}`)
        throw forQueue(err)
      }
    }
    const workerConnection = duplicateClient(redis)
    workerConnection.on('error', logErrors('redis (worker)', log))
    cleanups.push(async () => workerConnection.disconnect())
    const worker = new Worker(agentQueueName(config.dpuId), process, {
      connection: workerConnection,
      concurrency: 1,
      lockDuration: config.lockMs,
      stalledInterval: config.lockMs,
      ...(config.queuePrefix ? { prefix: config.queuePrefix } : {}),
    })
    worker.on('error', (err) => log(`worker error: ${String(err)}`))
    cleanups.push(() => worker.close())
    await worker.waitUntilReady()
    const metricsServer = await serveAgentMetrics(config, registry, tls, log)
    if (metricsServer) cleanups.push(metricsServer.close)

    if (tls) {
      // A renewed identity is presented by everything at once, between two jobs: the
      // worker pauses (its job under way finishes first) while ovn-controller takes it.
      const renewed = async (next: AgentTls) => {
        await worker.pause()
        try {
          await agent.useIdentity(next)
        } finally {
          worker.resume()
        }
        // New Redis connections (every client of this process shares these options).
        if (connection.tls) Object.assign(connection.tls, { cert: next.cert, key: next.key })
        serving?.use(next)
        metricsServer?.useTls({ cert: next.serverCert, key: next.key })
        identity = next
        // The controller records it now, and certifies the new key from then on.
        await beat().catch((err: unknown) => log(`heartbeat failed: ${String(err)}`))
      }
      const stopWatching = watchIdentity(config, tls, renewed, log)
      cleanups.push(async () => stopWatching())
    }

    return {
      agent,
      worker,
      grpcAddress: `${host}:${port}`,
      ...(metricsServer ? { metricsUrl: metricsServer.url } : {}),
      beat,
      stop,
    }
  } catch (err) {
    await stop()
    throw err
  }
}

/** A job's name as a metric label: only the two the agent knows, so no label can grow. */
function jobLabel(name: string): string {
  return name === 'configure' || name === 'isolate' ? name : 'unknown'
}

/**
 * Serves the agent's metrics on `--metrics-listen` (with the process's own, prefixed
 * `hydrazine_agent_`): plaintext on loopback, else HTTPS with the DPU's certificate and
 * the bearer token (`config.ts` refuses anything else). A token given for loopback is
 * required there too.
 */
async function serveAgentMetrics(
  config: AgentConfig,
  registry: Registry,
  tls: AgentTls | undefined,
  log: (line: string) => void,
): Promise<MetricsServer | undefined> {
  const listen = config.metricsListen ? parseMetricsListen(config.metricsListen) : 'off'
  if (listen === undefined || listen === 'off') return undefined
  collectDefaultMetrics({ register: registry, prefix: 'hydrazine_agent_' })
  return serveMetrics({
    registry,
    listen,
    ...(config.metricsToken ? { token: config.metricsToken } : {}),
    ...(tls && !isLoopback(listen.host) ? { tls: { cert: tls.serverCert, key: tls.key } } : {}),
    onError: (err) => log(`metrics scrape failed: ${String(err)}`),
  })
}

/**
 * The handlers, answering only callers whose client certificate's CN is in `allowed`
 * (mTLS has already checked it comes from Hydrazine's CA); anyone else gets
 * PERMISSION_DENIED. Every DPU's own certificate comes from that CA too, so without this
 * one DPU could read another's bound ports, relays and Southbound.
 */
function onlyClients(allowed: readonly string[], handlers: AgentHandlers): AgentHandlers {
  const names = new Set(allowed)
  const refusal = (call: grpc.ServerUnaryCall<unknown, unknown>): grpc.ServiceError | null => {
    const cn = call.getAuthContext().sslPeerCertificate?.subject?.CN
    const name = Array.isArray(cn) ? cn.join(',') : cn
    if (name !== undefined && names.has(name)) return null
    return Object.assign(new Error('not allowed'), {
      code: grpc.status.PERMISSION_DENIED,
      details: `client certificate CN=${name ?? '(none)'} may not call this agent (--grpc-clients: ${allowed.join(',')})`,
      metadata: new grpc.Metadata(),
    })
  }
  return {
    Init: (call, callback) => {
      const denied = refusal(call)
      denied ? callback(denied) : handlers.Init(call, callback)
    },
    Ping: (call, callback) => {
      const denied = refusal(call)
      denied ? callback(denied) : handlers.Ping(call, callback)
    },
    GetStatus: (call, callback) => {
      const denied = refusal(call)
      denied ? callback(denied) : handlers.GetStatus(call, callback)
    },
  }
}

function grpcHandlers(agent: Agent, config: AgentConfig): AgentHandlers {
  return {
    Init(_call, callback) {
      callback(null, {
        dpuId: config.dpuId,
        chassis: config.systemId,
        fabricIps: [...config.fabricIps],
        agentVersion: AGENT_VERSION,
        protocolVersions: [...config.protocolVersions],
        queue: agentQueueName(config.dpuId),
      })
    },
    Ping(call, callback) {
      callback(null, {
        nonce: call.request.nonce,
        dpuId: config.dpuId,
        answeredAt: timestampOf(new Date()),
      })
    },
    GetStatus(_call, callback) {
      agent.observe().then(
        (o) =>
          callback(null, {
            dpuId: config.dpuId,
            chassis: o.chassis,
            bridges: o.bridges,
            ovnRemote: o.ovnRemote ?? '',
            ovnControllerRunning: o.ovnController.running,
            ovnControllerConnected: o.ovnController.connected,
            boundPorts: o.boundPorts,
            relays: o.relays,
            observedAt: timestampOf(new Date()),
          }),
        (err: unknown) =>
          callback({ code: grpc.status.UNAVAILABLE, details: `cannot observe: ${String(err)}` }),
      )
    },
  }
}
