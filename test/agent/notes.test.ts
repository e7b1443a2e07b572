/**
 * The agent keeps notes about its jobs in the OVS database (when each binding's last job was
 * sent, which SBs an isolate waits on). ovn-controller recomputes all its logical flows on
 * any change to the Open_vSwitch row's external_ids: the notes live where it does not look,
 * so a host's configure and isolate cost the DPU only what changed.
 */
import { setTimeout as sleep } from 'node:timers/promises'
import type { Job } from 'bullmq'
import t from 'tap'
import { jobSentKey, releasingKey } from '../../agent/ovs.ts'
import { startAgentRuntime } from '../../agent/runtime.ts'
import {
  agentJobId,
  buildConfigurePayload,
  buildIsolatePayload,
  type ConfigureAck,
  type IsolateAck,
  pickProtocolVersion,
} from '../../lib/agent-protocol/index.ts'
import { sampleLflowRecomputes } from '../bench/lflow-recomputes.ts'
import { startAgentLab } from './fixture.ts'

t.test(
  "a host's configure and isolate make its DPU's ovn-controller recompute nothing",
  async (t) => {
    const lab = await startAgentLab(t)
    const config = lab.config()
    const runtime = await startAgentRuntime(config, (line) => console.error(line))
    lab.later(() => runtime.stop())
    const version = pickProtocolVersion((await lab.heartbeat())?.protocolVersions ?? [])
    const { logicalPort } = lab.input.host
    const configure = buildConfigurePayload(version, lab.input)
    const isolate = buildIsolatePayload(version, {
      dpuId: lab.dpuId,
      specVersion: 1,
      group: { name: lab.input.group.name },
      host: { name: 'h1', logicalPort, hostPort: lab.host.hostPort },
    })
    let n = 0
    const run = async <A>(
      name: 'configure' | 'isolate',
      payload: Parameters<typeof agentJobId>[1],
    ): Promise<A> => {
      n += 1
      const job = (await lab.queue.add(name, payload, {
        jobId: agentJobId(name, payload, n),
      })) as Job<unknown, A>
      return job.waitUntilFinished(lab.events, 40_000)
    }
    const recomputes = async () => {
      // Settled first: what ovn-controller still has to do for the last job is that job's.
      await sleep(1500)
      const now = await sampleLflowRecomputes({ dpu: lab.dpuId, runDir: config.runDir })
      if (!now) throw new Error('ovn-controller answers no inc-engine/show-stats')
      return now
    }

    t.match(await run<ConfigureAck>('configure', configure), { ovnInstalled: true }, 'bound')
    const before = await recomputes()
    t.match(await run<IsolateAck>('isolate', isolate), { unbound: true }, 'isolated')
    t.match(await run<ConfigureAck>('configure', configure), { ovnInstalled: true }, 'bound again')
    t.match(await run<IsolateAck>('isolate', isolate), { unbound: true }, 'isolated again')
    const after = await recomputes()
    t.equal(after.pid, before.pid, 'the same ovn-controller')
    t.equal(after.count - before.count, 0, 'two isolates and a configure: no full recompute')

    const notes = await lab.dpu.vsctl('br-get-external-id', 'br-int')
    t.match(notes, `${jobSentKey(logicalPort)}=`, "the host's last job is noted on br-int")
    t.notMatch(notes, releasingKey(logicalPort), 'no isolate waits any more')
    t.notMatch(
      await lab.dpu.vsctl('get', 'Open_vSwitch', '.', 'external_ids'),
      /hydrazine:(job-sent|releasing):/,
      'no note on the Open_vSwitch row',
    )

    // An agent before this one noted on the Open_vSwitch row: its notes still count.
    const later = Date.now() + 60_000
    await lab.dpu.vsctl(
      'set',
      'Open_vSwitch',
      '.',
      `external_ids:"${jobSentKey(logicalPort)}"="${later}"`,
    )
    await lab.dpu.vsctl('br-set-external-id', 'br-int', jobSentKey(logicalPort))
    await t.rejects(
      run<ConfigureAck>('configure', configure),
      /AGENT_JOB_SUPERSEDED/,
      'a configure sent before what the older agent noted is refused',
    )
  },
)
