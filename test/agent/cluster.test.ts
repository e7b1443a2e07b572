/**
 * The real agent (userspace OVS, ovn-controller) on a 3-master Redis Cluster: it connects
 * with `redis+cluster://` as the Redis user its DPU was issued (known to every master),
 * heartbeats, and binds and unbinds a host through its own queue.
 */
import type { Job } from 'bullmq'
import t from 'tap'
import { startAgentRuntime } from '../../agent/runtime.ts'
import { createCredentialIssuer } from '../../infra/credentials.ts'
import {
  agentJobId,
  buildConfigurePayload,
  buildIsolatePayload,
  type ConfigureAck,
  type IsolateAck,
} from '../../lib/agent-protocol/index.ts'
import { asUser } from '../pipeline/fixtures.ts'
import { startAgentLab } from './fixture.ts'

t.test("configure and isolate through a Redis Cluster, as the DPU's own user", async (t) => {
  const lab = await startAgentLab(t, { redisCluster: true })
  const issued = await createCredentialIssuer({
    redis: lab.redis,
    queuePrefix: lab.queuePrefix,
  }).issue(lab.dpuId)
  const redisUrl = asUser(lab.redisUrl, issued.redis)
  t.match(redisUrl, /^redis\+cluster:\/\/dpu-/, 'the agent is given a cluster URL')
  const runtime = await startAgentRuntime(lab.config({ redisUrl }), () => {})
  lab.later(() => runtime.stop())

  const beat = await lab.heartbeat()
  t.equal(beat?.dpuId, lab.dpuId, 'its heartbeat is in the cluster')

  const configure = buildConfigurePayload('2.0', lab.input)
  const job = (await lab.queue.add('configure', configure, {
    jobId: agentJobId('configure', configure),
  })) as Job<unknown, ConfigureAck>
  const ack = (await job.waitUntilFinished(lab.events, 40_000)) as ConfigureAck
  t.equal(ack.ovnInstalled, true, 'ovn-controller installed the port')
  t.equal(
    await lab.boundChassis(lab.input.host.logicalPort),
    lab.dpuId,
    'SB binds the host on this chassis',
  )

  const isolate = buildIsolatePayload('2.0', {
    dpuId: lab.dpuId,
    specVersion: 2,
    group: { name: lab.input.group.name },
    host: { name: 'h1', logicalPort: lab.input.host.logicalPort, hostPort: lab.host.hostPort },
  })
  const isolated = (await (
    await lab.queue.add('isolate', isolate, { jobId: agentJobId('isolate', isolate) })
  ).waitUntilFinished(lab.events, 40_000)) as IsolateAck
  t.equal(isolated.unbound, true, 'isolate acked')
  t.equal(await lab.boundChassis(lab.input.host.logicalPort), '', 'SB Port_Binding unbound')
})
