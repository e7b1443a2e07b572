/**
 * A DPU runs its jobs one at a time, but a `configure` that waits out a retry's backoff
 * runs after the `isolate` the controller sent later: it must not plug the isolated host
 * back into its group.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import type { Job } from 'bullmq'
import t from 'tap'
import { jobSentKey } from '../../agent/ovs.ts'
import { startAgentRuntime } from '../../agent/runtime.ts'
import {
  agentJobId,
  buildConfigurePayload,
  buildIsolatePayload,
  type ConfigureAck,
  type IsolateAck,
  pickProtocolVersion,
} from '../../lib/agent-protocol/index.ts'
import { startAgentLab } from './fixture.ts'

/** An agent lab with the agent running, and the protocol version its heartbeat offers. */
async function startAgent(t: Parameters<typeof startAgentLab>[0]) {
  const lab = await startAgentLab(t)
  const runtime = await startAgentRuntime(lab.config(), (line) => console.error(line))
  lab.later(() => runtime.stop())
  const version = pickProtocolVersion((await lab.heartbeat())?.protocolVersions ?? [])
  return { lab, version }
}

/** Puts the isolate of host `name` (logical port `logicalPort`) on the DPU's queue. */
async function queueIsolate(
  lab: Awaited<ReturnType<typeof startAgentLab>>,
  version: ReturnType<typeof pickProtocolVersion>,
  name: string,
  logicalPort: string,
): Promise<Job<unknown, IsolateAck>> {
  const isolate = buildIsolatePayload(version, {
    dpuId: lab.dpuId,
    specVersion: 1,
    group: { name: lab.input.group.name },
    host: { name, logicalPort, hostPort: lab.host.hostPort },
  })
  return (await lab.queue.add('isolate', isolate, {
    jobId: agentJobId('isolate', isolate),
  })) as Job<unknown, IsolateAck>
}

t.test(
  'a configure sent before an isolate that already ran is refused, not retried, and touches nothing',
  async (t) => {
    const { lab, version } = await startAgent(t)
    const { logicalPort } = lab.input.host
    const configure = buildConfigurePayload(version, lab.input)
    const configured = (await lab.queue.add('configure', configure, {
      jobId: agentJobId('configure', configure),
    })) as Job<unknown, ConfigureAck>
    t.equal((await configured.waitUntilFinished(lab.events, 40_000)).ovnInstalled, true, 'bound')

    // The same host's configure, sent now and run only in 3 s: a retry waiting out its
    // backoff (BullMQ keeps a job's `timestamp` across retries, as it does across a delay).
    const late = (await lab.queue.add('configure', configure, {
      jobId: agentJobId('configure', configure, 2),
      delay: 3000,
      attempts: 3,
      backoff: { type: 'fixed', delay: 500 },
    })) as Job<unknown, ConfigureAck>
    await sleep(20)
    // The detach's isolate, sent after it, runs at once.
    const isolated = await queueIsolate(lab, version, 'h1', logicalPort)
    t.equal((await isolated.waitUntilFinished(lab.events, 40_000)).unbound, true, 'isolated')

    await t.rejects(
      late.waitUntilFinished(lab.events, 30_000),
      /AGENT_JOB_SUPERSEDED: .*this configure of tenant-a-h1 was sent at .*, before a job of it sent at .* that already ran here/,
      'the late configure is refused, saying why',
    )
    t.equal((await lab.queue.getJob(late.id ?? ''))?.attemptsMade, 1, 'and not retried')
    t.notOk(
      (await lab.dpu.vsctl('list-ports', 'br-int')).split('\n').includes(lab.host.hostPort),
      'the host port stays off br-int',
    )
    t.equal(await lab.boundChassis(logicalPort), '', 'the SB binds the host nowhere')
    t.match(
      await lab.dpu.vsctl('br-get-external-id', 'br-int', jobSentKey(logicalPort)),
      `${isolated.timestamp}`,
      "the isolate's moment is what the DPU keeps for the host",
    )

    // A configure sent after the isolate (the host attached again) is taken.
    const again = (await lab.queue.add('configure', configure, {
      jobId: agentJobId('configure', configure, 3),
    })) as Job<unknown, ConfigureAck>
    t.equal((await again.waitUntilFinished(lab.events, 40_000)).ovnInstalled, true, 'bound again')
    t.equal(await lab.boundChassis(logicalPort), lab.dpuId, 'on this chassis')
  },
)

t.test(
  "a configure waiting for its host's flows stops when a later job of the host is queued behind it",
  async (t) => {
    const { lab, version } = await startAgent(t)
    // A logical port the NB does not have: ovn-controller never installs it, and the
    // configure would wait out its install timeout (20 s here), holding the DPU's queue.
    const logicalPort = `${lab.input.group.name}-ghost`
    const host = { ...lab.input.host, name: 'ghost', logicalPort }
    const configure = buildConfigurePayload(version, { ...lab.input, host })
    const waiting = (await lab.queue.add('configure', configure, {
      jobId: agentJobId('configure', configure),
    })) as Job<unknown, ConfigureAck>
    const taken = async () => (await lab.queue.getJob(waiting.id ?? ''))?.processedOn
    for (let i = 0; i < 200 && !(await taken()); i++) await sleep(50)
    t.ok(await taken(), 'the agent took the configure')
    await sleep(1500)

    // The host's detach, sent now: queued behind the configure the DPU is running.
    const queuedAt = Date.now()
    const isolated = await queueIsolate(lab, version, 'ghost', logicalPort)
    await t.rejects(
      waiting.waitUntilFinished(lab.events, 30_000),
      /AGENT_JOB_SUPERSEDED: .*this configure of .*-ghost, sent at .*, stopped waiting for the host's flows: a job of it sent at .* is queued behind it/,
      'the configure stops waiting, saying why',
    )
    const stoppedAfter = Date.now() - queuedAt
    t.ok(stoppedAfter < 5_000, `within seconds of the isolate being queued (${stoppedAfter} ms)`)
    t.equal((await lab.queue.getJob(waiting.id ?? ''))?.attemptsMade, 1, 'and is not retried')
    t.equal((await isolated.waitUntilFinished(lab.events, 40_000)).unbound, true, 'isolated')
    t.notOk(
      (await lab.dpu.vsctl('list-ports', 'br-int')).split('\n').includes(lab.host.hostPort),
      'the host port is off br-int',
    )
  },
)
