/**
 * In-process stand-ins for DPU agents: each answers its queue as the real agent does,
 * leaving in the SB what ovn-controller would (through `FakeChassis`). Re-exported by
 * `fixtures.ts`.
 */
import { isIPv4 } from 'node:net'
import { type Job, UnrecoverableError, Worker } from 'bullmq'
import { Heartbeats } from '../../lib/agent-protocol/heartbeats.ts'
import {
  agentQueueName,
  type ConfigureAck,
  type FabricConfigureAck,
  type FabricIsolateAck,
  type Heartbeat,
  type IsolateAck,
  parseAgentJob,
} from '../../lib/agent-protocol/index.ts'
import { createRedis } from '../../lib/redis/connection.ts'
import type { FakeChassis } from '../helpers/fake-chassis.ts'
import type { Teardown } from '../helpers/stack.ts'

export interface TestAgent {
  readonly jobs: Job[]
  close(): Promise<void>
}

/**
 * An in-process agent for a DPU that answers its queue like the real one (see
 * `Pipeline.agent`), on `redisUrl` (a single Redis or a cluster) under BullMQ `prefix`.
 * Leaves in the SB what ovn-controller would when given a `chassis`.
 */
export async function startStandInAgent(
  t: Teardown,
  options: {
    readonly redisUrl: string
    readonly prefix?: string
    readonly dpuId: string
    readonly protocolVersions?: string[]
    /** The ovn-controller version its heartbeat reports (with `protocolVersions`). */
    readonly ovnVersion?: string
    readonly tamper?: (ack: ConfigureAck | IsolateAck) => object
    readonly chassis?: FakeChassis
    /** Refuses every `isolate`, as an agent that cannot unbind the host does. */
    readonly refuseIsolate?: boolean
    /** Answers an `isolate` only once this settles, as a DPU slow to unbind that host. */
    readonly isolateAfter?: (job: Job) => Promise<void>
  },
): Promise<TestAgent> {
  const { dpuId, protocolVersions, tamper, chassis, refuseIsolate, isolateAfter } = options
  const jobs: Job[] = []
  // Stopping the agent ends a job still waiting for its binding: it fails and is retried.
  const stopping = new AbortController()
  const connection = createRedis({ url: options.redisUrl }, { maxRetriesPerRequest: null })
  // A stand-in agent rides out a Redis restart as the real one does: reconnecting.
  connection.on('error', () => {})
  const heartbeats = new Heartbeats(connection)
  if (protocolVersions) {
    await heartbeats.write(heartbeat(dpuId, protocolVersions, options.ovnVersion), 60_000)
  }
  const worker = new Worker(
    agentQueueName(dpuId),
    async (job) => {
      jobs.push(job)
      if (protocolVersions) {
        try {
          parseAgentJob(job.name, job.data, protocolVersions)
        } catch (error) {
          throw new UnrecoverableError(String(error))
        }
      }
      if (refuseIsolate && job.name === 'isolate') {
        throw new UnrecoverableError('ovs-vsctl del-port failed: the host port is busy')
      }
      if (isolateAfter && job.name === 'isolate') await isolateAfter(job)
      // A Fabric host's job (protocol 3): its VRF and announcements, no OVN.
      if (String(job.data?.protocolVersion).startsWith('3.')) return answerFabric(dpuId, job)
      const ack = await answer(dpuId, job, chassis, stopping.signal)
      return tamper ? tamper(ack) : ack
    },
    { connection, ...(options.prefix ? { prefix: options.prefix } : {}), concurrency: 8 },
  )
  worker.on('error', () => {})
  await worker.waitUntilReady()
  // Once: a test may stop it (its DPU goes silent) before its teardown does.
  let closed: Promise<void> | undefined
  const close = () => {
    closed ??= (async () => {
      stopping.abort(new Error(`the agent of ${dpuId} stopped`))
      await worker.close()
      if (protocolVersions) await heartbeats.remove(dpuId)
      connection.disconnect()
    })()
    return closed
  }
  t.teardown(close)
  return { jobs, close }
}

function observed(dpuId: string) {
  return {
    chassis: dpuId,
    bridges: ['br-int', 'br-phy'],
    ovnRemote: null,
    ovnController: { running: true, connected: true },
    boundPorts: [],
    relays: [],
  }
}

/** The heartbeat a stand-in agent writes, now. */
export function heartbeat(
  dpuId: string,
  protocolVersions: string[],
  ovnVersion?: string,
): Heartbeat {
  return {
    ...(ovnVersion ? { ovnVersion } : {}),
    dpuId,
    agentVersion: '0.0.0-test',
    protocolVersions,
    fabricIps: [],
    at: new Date().toISOString(),
    intervalMs: 20_000,
    observed: observed(dpuId),
  }
}

/**
 * What a DPU agent does for a job: binds or releases the port in the SB (as its
 * ovn-controller would) and returns the ack shapes of lib/agent-protocol.
 */
export async function answer(
  dpuId: string,
  job: Job,
  chassis: FakeChassis | undefined,
  signal?: AbortSignal,
): Promise<ConfigureAck | IsolateAck> {
  const data = job.data as {
    specVersion: number
    protocolVersion: string
    host: { logicalPort: string }
    group: { sbRemote?: string }
  }
  const hostPort = `hp-${data.host.logicalPort}`.slice(0, 15)
  if (job.name === 'configure') {
    if (data.group.sbRemote) {
      await chassis?.bind(data.group.sbRemote, dpuId, data.host.logicalPort, signal)
    }
    return {
      dpuId,
      specVersion: data.specVersion,
      protocolVersion: data.protocolVersion,
      hostPort,
      ovnInstalled: true,
      chassis: dpuId,
      observed: observed(dpuId),
    }
  }
  await chassis?.release(dpuId, data.host.logicalPort)
  return {
    dpuId,
    specVersion: data.specVersion,
    protocolVersion: data.protocolVersion,
    hostPort,
    unbound: true,
    chassis: dpuId,
    observed: observed(dpuId),
  }
}

/**
 * What a DPU agent does for a Fabric host's job (protocol 3): puts it in its group's VRF and
 * announces its addresses (and public IP) from there, or withdraws them.
 */
function answerFabric(dpuId: string, job: Job): FabricConfigureAck | FabricIsolateAck {
  const data = job.data as {
    specVersion: number
    protocolVersion: string
    group: { vni: number }
    host: { name: string; hostPort?: string; addresses: string[]; publicIp?: string }
  }
  const hostPort = data.host.hostPort ?? 'pf0hpf'
  const common = {
    dpuId,
    specVersion: data.specVersion,
    protocolVersion: data.protocolVersion,
    hostPort,
    chassis: dpuId,
  }
  if (job.name === 'configure') {
    const prefixes = [...data.host.addresses, ...(data.host.publicIp ? [data.host.publicIp] : [])]
    return {
      ...common,
      vrf: `vrf${data.group.vni}`,
      announced: prefixes.map((a) => `${a}/${isIPv4(a) ? 32 : 128}`),
    }
  }
  return { ...common, withdrawn: true }
}
