/**
 * The agent's own metrics (`--metrics-listen`): how its `configure` and `isolate` jobs
 * went and took, whether its ovn-controller runs and follows its Southbound, and its
 * heartbeats. Names and meanings are listed in docs/metrics.md.
 */
import { Counter, Gauge, Histogram, type Registry } from 'prom-client'
import type { ObservedState } from '../lib/agent-protocol/index.ts'

/** What the agent's runtime reports as it works. */
export interface AgentInstruments {
  /** A `configure` or `isolate` job ended: `completed`, or `failed` (it may be retried). */
  jobDone(job: string, outcome: 'completed' | 'failed', seconds: number): void
  /** A heartbeat was written, or failed to be. */
  heartbeat(written: boolean): void
  /** What the agent last observed on the DPU (at each heartbeat). */
  observed(state: Pick<ObservedState, 'ovnController' | 'boundPorts'>): void
}

const JOB_BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60]

/** Registers the agent's metrics on `registry` and returns what reports to them. */
export function agentInstruments(registry: Registry): AgentInstruments {
  const registers = [registry]
  const seconds = new Histogram({
    name: 'hydrazine_agent_job_duration_seconds',
    help: 'One configure or isolate job on this DPU, by job and outcome',
    labelNames: ['job', 'outcome'] as const,
    buckets: JOB_BUCKETS,
    registers,
  })
  const jobs = new Counter({
    name: 'hydrazine_agent_jobs_total',
    help: 'configure and isolate jobs run on this DPU, by job and outcome (completed, failed)',
    labelNames: ['job', 'outcome'] as const,
    registers,
  })
  const up = new Gauge({
    name: 'hydrazine_agent_ovn_controller_up',
    help: "1 while this DPU's ovn-controller runs, else 0 (as of the last heartbeat)",
    registers,
  })
  const connected = new Gauge({
    name: 'hydrazine_agent_ovn_controller_connected',
    help: "1 while this DPU's ovn-controller is connected to its Southbound, else 0",
    registers,
  })
  const bound = new Gauge({
    name: 'hydrazine_agent_bound_ports',
    help: 'Host ports bound to logical ports on this DPU (as of the last heartbeat)',
    registers,
  })
  const beats = new Counter({
    name: 'hydrazine_agent_heartbeats_total',
    help: 'Heartbeats this agent wrote to Redis (outcome written), or failed to (failed)',
    labelNames: ['outcome'] as const,
    registers,
  })
  return {
    jobDone(job, outcome, s) {
      seconds.observe({ job, outcome }, s)
      jobs.inc({ job, outcome })
    },
    heartbeat: (written) => beats.inc({ outcome: written ? 'written' : 'failed' }),
    observed({ ovnController, boundPorts }) {
      up.set(ovnController.running ? 1 : 0)
      connected.set(ovnController.connected ? 1 : 0)
      bound.set(boundPorts.length)
    },
  }
}
