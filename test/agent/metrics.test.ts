/**
 * The agent's own metrics (`--metrics-listen`) on a simulated DPU: what a scrape shows
 * after a real `configure` and `isolate`.
 */
import type { Job } from 'bullmq'
import t from 'tap'
import { startAgentRuntime } from '../../agent/runtime.ts'
import {
  agentJobId,
  buildConfigurePayload,
  buildIsolatePayload,
  type ConfigureAck,
} from '../../lib/agent-protocol/index.ts'
import { sampleValue, scrape } from '../helpers/metrics.ts'
import { startAgentLab } from './fixture.ts'

const TOKEN = 'agent-metrics-token-0123'

t.test(
  '--metrics-listen: configure and isolate durations, ovn-controller up, heartbeats',
  async (t) => {
    const lab = await startAgentLab(t)
    const runtime = await startAgentRuntime(
      lab.config({ metricsListen: '127.0.0.1:0', metricsToken: TOKEN }),
    )
    lab.later(() => runtime.stop())
    const url = runtime.metricsUrl ?? ''
    t.match(url, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/, 'plaintext on loopback')
    t.equal((await fetch(url)).status, 401, 'the token it was given is required')
    const auth = { headers: { authorization: `Bearer ${TOKEN}` } }
    const before = await scrape(url, auth)
    t.equal(sampleValue(before, 'hydrazine_agent_ovn_controller_up'), 0, 'no ovn-controller yet')
    t.ok(
      (sampleValue(before, 'hydrazine_agent_heartbeats_total', { outcome: 'written' }) ?? 0) >= 1,
      'the start-up heartbeat',
    )

    const configure = buildConfigurePayload('2.0', lab.input)
    const job = (await lab.queue.add('configure', configure, {
      jobId: agentJobId('configure', configure),
    })) as Job<unknown, ConfigureAck>
    t.equal(((await job.waitUntilFinished(lab.events, 40_000)) as ConfigureAck).ovnInstalled, true)
    const isolate = buildIsolatePayload('2.0', { ...lab.input, specVersion: 2 })
    await (
      await lab.queue.add('isolate', isolate, { jobId: agentJobId('isolate', isolate) })
    ).waitUntilFinished(lab.events, 40_000)
    // ovn-controller runs from the configure on; the next heartbeat observes it.
    await runtime.beat()

    const samples = await scrape(url, auth)
    const value = (name: string, labels?: Record<string, string>) =>
      sampleValue(samples, name, labels)
    for (const job of ['configure', 'isolate']) {
      const done = { job, outcome: 'completed' }
      t.equal(value('hydrazine_agent_job_duration_seconds_count', done), 1, `one ${job}`)
      t.ok((value('hydrazine_agent_job_duration_seconds_sum', done) ?? 0) > 0, `${job} took time`)
      t.equal(value('hydrazine_agent_jobs_total', done), 1)
    }
    t.equal(
      value('hydrazine_agent_ovn_controller_up'),
      1,
      'ovn-controller runs since the configure',
    )
    t.equal(value('hydrazine_agent_bound_ports'), 0, 'nothing bound after the isolate')
    t.ok((value('hydrazine_agent_heartbeats_total', { outcome: 'written' }) ?? 0) >= 2)
    t.type(value('hydrazine_agent_process_resident_memory_bytes'), 'number', "the process's own")
  },
)
