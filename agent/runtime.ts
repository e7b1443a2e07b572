/**
 * Wires the agent to the outside: its BullMQ queue (jobs in, acks out), the heartbeat in
 * Redis and the gRPC server. `startAgentRuntime` is what `agent/main.ts` runs and what
 * tests start in-process.
 */
import { readFileSync } from 'node:fs'
import * as grpc from '@grpc/grpc-js'
import { type Job, UnrecoverableError, Worker } from 'bullmq'
import { Redis } from 'ioredis'
import { type AgentHandlers, agentServiceDefinition } from '../lib/agent-protocol/grpc.ts'
import { Heartbeats } from '../lib/agent-protocol/heartbeats.ts'
import {
  agentQueueName,
  type ConfigureAck,
  type Heartbeat,
  type IsolateAck,
  parseAgentJob,
} from '../lib/agent-protocol/index.ts'
import { HydrazineError } from '../lib/errors.ts'
import { Agent } from './agent.ts'
import type { AgentConfig } from './config.ts'

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

export async function startAgentRuntime(
  config: AgentConfig,
  log: (line: string) => void = () => {},
): Promise<AgentRuntime> {
  const agent = await Agent.create(config, log)
  const redis = new Redis(config.redisUrl, { maxRetriesPerRequest: null })
  const heartbeats = new Heartbeats(redis)
  const cleanups: (() => Promise<unknown>)[] = [() => agent.close(), () => redis.quit()]
  const stop = async () => {
    for (const fn of cleanups.splice(0).reverse()) await fn().catch(() => {})
  }

  try {
    const beat = async (): Promise<Heartbeat> => {
      const heartbeat: Heartbeat = {
        dpuId: config.dpuId,
        agentVersion: AGENT_VERSION,
        protocolVersions: [...config.protocolVersions],
        fabricIps: [...config.fabricIps],
        at: new Date().toISOString(),
        intervalMs: config.heartbeatMs,
        observed: await agent.observe(),
      }
      await heartbeats.write(heartbeat, 3 * config.heartbeatMs)
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
    server.addService(agentServiceDefinition(), grpcHandlers(agent, config))
    const port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(config.grpcListen, grpc.ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    )
    cleanups.push(() => new Promise<void>((resolve) => server.tryShutdown(() => resolve())))
    const host = config.grpcListen.slice(0, config.grpcListen.lastIndexOf(':'))

    const process = async (job: Job): Promise<ConfigureAck | IsolateAck> => {
      try {
        const parsed = parseAgentJob(job.name, job.data, config.protocolVersions)
        log(`job ${job.id} ${job.name} (protocol ${parsed.payload.protocolVersion})`)
        return parsed.name === 'configure'
          ? await agent.configure(parsed.payload)
          : await agent.isolate(parsed.payload)
      } catch (err) {
        log(`job ${job.id} ${job.name} failed: ${String(err)}`)
        throw forQueue(err)
      }
    }
    const workerConnection = redis.duplicate()
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

    return { agent, worker, grpcAddress: `${host}:${port}`, beat, stop }
  } catch (err) {
    await stop()
    throw err
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
        at: new Date().toISOString(),
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
            observedAt: new Date().toISOString(),
          }),
        (err: unknown) =>
          callback({ code: grpc.status.UNAVAILABLE, details: `cannot observe: ${String(err)}` }),
      )
    },
  }
}
