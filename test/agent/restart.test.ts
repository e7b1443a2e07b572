import { fileURLToPath } from 'node:url'
import type { Job } from 'bullmq'
import t from 'tap'
import {
  agentJobId,
  buildConfigurePayload,
  type ConfigureAck,
  pickProtocolVersion,
  relayPortName,
} from '../../lib/agent-protocol/index.ts'
import { type Daemon, startDaemon } from '../../lib/process/daemon.ts'
import { eventually, processesMentioning } from '../helpers/processes.ts'
import { type AgentLab, startAgentLab } from './fixture.ts'

const repo = fileURLToPath(new URL('../..', import.meta.url))

/** Runs `agent/main.ts` as its own process, as `npm run agent` would, until killed. */
async function startAgentProcess(lab: AgentLab, since: number): Promise<Daemon> {
  const c = lab.config({ protocolVersions: ['1.0'] })
  const flags: [string, string][] = [
    ['dpu-id', c.dpuId],
    ['fabric-ips', c.fabricIps.join(',')],
    ['ovs-db', c.ovsDb],
    ['ovs-rundir', c.ovsRunDir],
    ['redis-url', c.redisUrl],
    ['grpc-listen', c.grpcListen],
    ['run-dir', c.runDir],
    ['netns', c.netns ?? ''],
    ['datapath-type', c.datapathType],
    ['uplink-interface', c.uplinkInterface ?? ''],
    ['relay-uplink-ips', c.relayUplinkIps.join(',')],
    ['host-ports', c.hostPorts.join(',')],
    ['heartbeat-ms', String(c.heartbeatMs)],
    ['lock-ms', String(c.lockMs)],
    ['protocol-versions', '1.0'],
    ['queue-prefix', c.queuePrefix ?? ''],
    // The DPU's identity: the Southbound here is ssl:.
    ['tls-cert', c.tlsCert ?? ''],
    ['tls-key', c.tlsKey ?? ''],
    ['tls-ca', c.tlsCa ?? ''],
  ]
  return startDaemon({
    name: 'hydrazine-agent',
    command: process.execPath,
    args: ['--import', 'tsx', 'agent/main.ts', ...flags.flatMap(([f, v]) => [`--${f}`, v])],
    cwd: repo,
    logFile: `${lab.dataDir}/agent.out`,
    // Ready once this process has written a heartbeat.
    ready: async () => Date.parse((await lab.heartbeat())?.at ?? '') >= since,
    readyTimeoutMs: 20_000,
  })
}

/** Processes whose command is `binary` (not the reaper or `ip netns exec` around it). */
async function running(binary: string, mentioning: string): Promise<string[]> {
  return (await processesMentioning(mentioning)).filter((l) =>
    new RegExp(`^\\d+ \\S*/${binary} `).test(l),
  )
}

t.test('an agent killed mid-configure completes the job after a restart', async (t) => {
  const lab = await startAgentLab(t)
  let agent = await startAgentProcess(lab, Date.now())
  lab.later(() => agent.stop())

  // This agent is at protocol v1 while v2 exists: the controller must speak v1 to it.
  const beat = await lab.heartbeat()
  t.same(beat?.protocolVersions, ['1.0'])
  const payload = buildConfigurePayload(pickProtocolVersion(beat?.protocolVersions ?? []), {
    ...lab.input,
    host: { ...lab.input.host, mtu: 9000 },
  })
  t.equal(payload.protocolVersion, '1.0')
  const job = (await lab.queue.add('configure', payload, {
    jobId: agentJobId('configure', payload),
    attempts: 3,
  })) as Job<unknown, ConfigureAck>

  // Kill the agent (SIGKILL, no clean-up) once it has started ovn-controller and made
  // the relay port, before the job is done.
  const relayPort = relayPortName(lab.input.group.name)
  t.ok(
    await eventually(
      async () => (await lab.dpu.vsctl('list-ports', 'br-int').catch(() => '')).includes(relayPort),
      15_000,
    ),
    'the agent got as far as the relay port',
  )
  process.kill(-agent.pid, 'SIGKILL')
  await agent.exited
  t.equal(await job.getState(), 'active', 'killed mid-job')

  const restartedAt = Date.now()
  agent = await startAgentProcess(lab, restartedAt)
  const ack = (await job.waitUntilFinished(lab.events, 40_000)) as ConfigureAck
  t.equal(ack.ovnInstalled, true)
  t.equal(ack.protocolVersion, '1.0')
  t.equal(await lab.boundChassis(lab.input.host.logicalPort), lab.dpuId)

  // One host port, one relay port, one ovn-controller, one relay.
  const ports = (await lab.dpu.vsctl('list-ports', 'br-int')).trim().split('\n').sort()
  t.same(ports, [lab.host.hostPort, relayPort].sort())
  const runDir = lab.config().runDir
  t.equal((await running('ovn-controller', runDir)).length, 1, 'one ovn-controller')
  t.equal((await running('dhcrelay', runDir)).length, 1, 'one dhcrelay')
  // v1 has no MTU: the host port keeps the default.
  t.equal((await lab.dpu.vsctl('get', 'Interface', lab.host.hostPort, 'mtu_request')).trim(), '[]')
  t.ok(Date.now() - restartedAt < 30_000)
})
