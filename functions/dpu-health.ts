import type { Job } from 'bullmq'
import { type DpuState, dpuStateOf, type Heartbeats } from '../lib/agent-protocol/heartbeats.ts'
import { agentQueueName, type Heartbeat } from '../lib/agent-protocol/index.ts'
import { redriveHost } from '../lib/jobs/redrive.ts'
import { type ManagedResource, setCondition } from '../lib/model/objects.ts'
import type { DpuHealthRecord, DpuHealthRecords, Stray } from '../lib/state/dpu-health.ts'
import { addFabricIsolate, addIsolate, clearIsolatedStaleBindings } from './internal/agent-jobs.ts'
import type { HandlerDeps } from './internal/deps.ts'
import { recordDpuEvent } from './internal/dpu-events.ts'
import {
  type BoundPort,
  DPU_HEALTHY,
  dpuHealthyCondition,
  hostsMissingPort,
  portsItMayHold,
  repairGraceMs,
  strayOwner,
  strayPorts,
} from './internal/dpu-observed.ts'
import { type DpuRevoked, type DpuUsageBound, revokeOverBound } from './internal/dpu-usage.ts'
import { type FabricStray, fabricHostsMissing, strayFabric } from './internal/fabric-observed.ts'
import {
  type ProducerRevoked,
  type ProducerUsageBound,
  revokeProducersOverBound,
} from './internal/producer-usage.ts'

export type DpuHealthDeps = Pick<
  HandlerDeps,
  'store' | 'children' | 'agents' | 'jobs' | 'groupHosts' | 'ipam'
> & {
  readonly heartbeats: Pick<Heartbeats, 'list'>
  readonly records: Pick<DpuHealthRecords, 'readAll' | 'write'>
  /** Each DPU's bytes in the agents' Redis, bounded (absent: not measured). */
  readonly usage?: DpuUsageBound
  /** Each queue producer's bytes in the agents' Redis, bounded (absent: not measured). */
  readonly producerUsage?: ProducerUsageBound
}

export interface DpuHealthOptions {
  /** The clock (tests). */
  readonly now?: () => Date
}

/** A repair one run made. */
export interface DpuRepair {
  readonly dpu: string
  /**
   * `PortLost` (an Overlay host's port) and `RouteLost` (a Fabric host's VRF, port or
   * announced prefix): the host was re-driven; `StrayPortIsolated` (an Overlay port) and
   * `StrayVrfIsolated` (a Fabric VRF's port, or a VRF no host wants): an `isolate` was sent.
   */
  readonly action: 'PortLost' | 'StrayPortIsolated' | 'RouteLost' | 'StrayVrfIsolated'
  /** What was repaired: the logical port (Overlay), `<vrf>` or `<vrf>/<port>` (Fabric). */
  readonly logicalPort: string
  readonly host?: string
  /** The job that carries the repair. */
  readonly jobId: string
}

/** A host's `DpuHealthy` as a run wrote it. */
export interface HealthWritten {
  readonly host: string
  readonly status: string
  readonly reason: string
}

export interface DpuHealthResult {
  readonly dpus: readonly {
    readonly id: string
    readonly state: DpuState
    readonly lastHeartbeat: string
  }[]
  /** Hosts whose `DpuHealthy` condition this run wrote. */
  readonly conditions: readonly HealthWritten[]
  readonly repairs: readonly DpuRepair[]
  /** DPUs whose credentials this run revoked (over their bound in the agents' Redis). */
  readonly revoked?: readonly DpuRevoked[]
  /** Queue producers whose Redis user this run revoked (over their bound there). */
  readonly producersRevoked?: readonly ProducerRevoked[]
  /**
   * What this run could not do, per DPU: each DPU (and each stray port) on its own; `*`
   * for what concerns none in particular (a measure, a producer's revocation).
   */
  readonly failed: readonly { readonly dpu: string; readonly error: string }[]
  /** Set when the run did nothing because another was still running in this process. */
  readonly skipped?: string
}

const STATE_EVENTS: Record<DpuState, { type: 'Normal' | 'Warning'; reason: string }> = {
  Online: { type: 'Normal', reason: 'HeartbeatResumed' },
  Stale: { type: 'Warning', reason: 'HeartbeatStale' },
  Lost: { type: 'Warning', reason: 'HeartbeatLost' },
}

/**
 * `dpu.health` (repeatable, every few seconds): the controller's view of its DPUs, kept
 * level-triggered from their heartbeats (`Heartbeats.list`, which also keeps the record
 * of every DPU ever seen). Per DPU, each run:
 *
 * 1. computes its state from its newest beat (`dpuStateOf`: Online, Stale, Lost) and, when
 *    it changed, records a DPU event;
 * 2. gives each of its hosts the `DpuHealthy` condition that state calls for
 *    (`dpuHealthyCondition`), writing only where it differs; the phase stays;
 * 3. while it is Online, compares what its agent reports bound with what should be:
 *    a host whose port it lost is re-driven (`Configuring`, `AgentConfigured=False
 *    PortLost`) with a new attempt, so its `configure` is a new job the agent runs again;
 *    a port bound for a logical port nothing wants there gets an `isolate` whose job id
 *    carries a repair number (the send time), so BullMQ never takes it for an earlier one.
 *    Neither is repeated while it is in flight: a re-driven host is Configuring until
 *    acked, and a stray's last `isolate` must have finished, and the grace
 *    (`REPAIR_GRACE_INTERVALS`) passed, before the next. Its Fabric groups' VRFs
 *    (`observed.vrfs`) likewise (`fabric-observed.ts`): a Ready Fabric host whose VRF,
 *    port or announced prefix is gone is re-driven (`RouteLost`); a VRF port, or an empty
 *    VRF, no live host wants gets a Fabric `isolate` (`StrayVrfIsolated`);
 * 4. while it is Online and its pending isolations hold addresses (a Fabric host
 *    force-detached while it was silent, `isolation-holds.ts`; the DPUs holding any are one
 *    read a run), gives back those whose `isolate` it acked (`clearIsolatedStaleBindings`).
 *
 * With bounds (`usage`, `producerUsage`), at most once per their `everyMs` it also measures
 * what each DPU and each queue producer holds in the agents' Redis and revokes the
 * credentials of those over their bound (`revoked`, `producersRevoked`).
 *
 * Runs in one process do not overlap (a run still going makes the next one skip).
 */
export function createDpuHealth(deps: DpuHealthDeps, options: DpuHealthOptions = {}) {
  const clock = options.now ?? (() => new Date())
  let running = false
  let measured = Number.NEGATIVE_INFINITY
  let producersMeasured = Number.NEGATIVE_INFINITY

  return async function dpuHealth(_job?: Job): Promise<DpuHealthResult> {
    if (running) {
      return { dpus: [], conditions: [], repairs: [], failed: [], skipped: 'a run is in progress' }
    }
    running = true
    try {
      const now = clock()
      const measure = deps.usage !== undefined && now.getTime() - measured >= deps.usage.everyMs
      if (measure) measured = now.getTime()
      const producers = deps.producerUsage
      const measureProducers =
        producers !== undefined && now.getTime() - producersMeasured >= producers.everyMs
      if (measureProducers) producersMeasured = now.getTime()
      const result = await runOnce(deps, now, measure)
      if (!measureProducers || !producers) return result
      return { ...result, ...(await boundProducers(producers, result.failed)) }
    } finally {
      running = false
    }
  }
}

/**
 * Revokes the producers over their bound; what failed joins `failed` (as `*`: no DPU's).
 * Returns the result's `producersRevoked`, when any was.
 */
async function boundProducers(
  bound: ProducerUsageBound,
  failed: DpuHealthResult['failed'],
): Promise<Pick<DpuHealthResult, 'producersRevoked' | 'failed'>> {
  const done = await revokeProducersOverBound(bound).catch((error: unknown) => ({
    revoked: [],
    failed: [{ producer: '*', error: `measuring the producers' keys failed: ${String(error)}` }],
  }))
  const more = done.failed.map(({ producer, error }) => ({
    dpu: '*',
    error: producer === '*' ? error : `producer ${producer}: ${error}`,
  }))
  return {
    failed: [...failed, ...more],
    ...(done.revoked.length > 0 ? { producersRevoked: done.revoked } : {}),
  }
}

async function runOnce(deps: DpuHealthDeps, now: Date, measure: boolean): Promise<DpuHealthResult> {
  const [beats, hosts, read, inventory, holding] = await Promise.all([
    deps.heartbeats.list(),
    deps.store.hosts.list(),
    deps.records.readAll(),
    deps.store.dpus.list(),
    deps.store.dpus.dpusHolding(),
  ])
  const holds = new Set(holding)
  const hostPortsOf = new Map(inventory.map((d) => [d.name, d.spec.hostPorts]))
  const dpus: { id: string; state: DpuState; lastHeartbeat: string }[] = []
  const conditions: HealthWritten[] = []
  const repairs: DpuRepair[] = []
  const failed: { dpu: string; error: string }[] = []
  let records = read
  let revoked: DpuRevoked[] = []
  if (measure && deps.usage) {
    const bounded = await revokeOverBound(deps, deps.usage, read, now).catch((error) => {
      failed.push({ dpu: '*', error: `measuring the DPUs' keys failed: ${String(error)}` })
      return undefined
    })
    if (bounded) {
      records = bounded.records
      revoked = bounded.revoked
      failed.push(...bounded.failed)
    }
  }
  for (const reported of beats) {
    const { held, ignored } = portsItMayHold(reported, hostPortsOf.get(reported.dpuId))
    const beat = { ...reported, observed: { ...reported.observed, boundPorts: held } }
    if (ignored.length > 0) {
      failed.push({
        dpu: beat.dpuId,
        error: `reports ports its inventory does not give it, or twice (ignored): ${ignored.slice(0, 10).join(', ')}${ignored.length > 10 ? ', …' : ''}`,
      })
    }
    const state = dpuStateOf(beat, now)
    dpus.push({ id: beat.dpuId, state, lastHeartbeat: beat.at })
    try {
      // A DPU back that acked the isolate of a host force-detached from it: what was held
      // for it (its leaked addresses, public IPs) goes back without waiting for its next host.
      if (state === 'Online' && holds.has(beat.dpuId)) {
        await clearIsolatedStaleBindings(deps, beat.dpuId)
      }
      const done = await checkDpu(deps, beat, state, hosts, records.get(beat.dpuId), now)
      conditions.push(...done.conditions)
      repairs.push(...done.repairs)
      for (const error of done.errors) failed.push({ dpu: beat.dpuId, error })
    } catch (error) {
      // One DPU whose report cannot be acted on (or a failed write) holds up no other.
      failed.push({
        dpu: beat.dpuId,
        error: error instanceof Error ? error.message : String(error),
      })
    }
  }
  return { dpus, conditions, repairs, ...(revoked.length > 0 ? { revoked } : {}), failed }
}

/**
 * One DPU: its state change, its hosts' `DpuHealthy`, and, while Online, its repairs. Its
 * record is written even when a repair fails, so that a state change is one event.
 */
async function checkDpu(
  deps: DpuHealthDeps,
  beat: Heartbeat,
  state: DpuState,
  hosts: readonly ManagedResource[],
  before: DpuHealthRecord = { strays: {} },
  now: Date,
): Promise<{ conditions: HealthWritten[]; repairs: DpuRepair[]; errors: string[] }> {
  const id = beat.dpuId
  if (before.state !== state) {
    const event = STATE_EVENTS[state]
    await recordDpuEvent(deps.store, id, {
      ...event,
      reason: before.state === undefined && state === 'Online' ? 'HeartbeatStarted' : event.reason,
      message: `DPU ${id} is ${state}: last heartbeat ${beat.at}, one expected every ${beat.intervalMs} ms`,
    })
  }
  let strays = before.strays
  try {
    const conditions: HealthWritten[] = []
    for (const host of hosts) {
      if (host.spec.dpu.id !== id || host.status.phase === 'Isolated') continue
      const written = await writeDpuHealthy(deps, host, beat, state, now, before.revoked)
      if (written) conditions.push({ host: host.name, ...written })
    }
    // A DPU whose credentials were revoked is repaired no more: it could not take the jobs.
    if (state !== 'Online' || before.revoked) return { conditions, repairs: [], errors: [] }
    const repairs = await repairLostPorts(deps, beat, hosts)
    const rerouted = await repairLostRoutes(deps, beat, hosts)
    const isolated = await repairStrays(deps, beat, hosts, before.strays, now)
    const vrfs = await repairStrayVrfs(deps, beat, hosts, before.strays, now)
    strays = { ...isolated.strays, ...vrfs.strays }
    return {
      conditions,
      repairs: [...repairs, ...rerouted, ...isolated.repairs, ...vrfs.repairs],
      errors: [...isolated.errors, ...vrfs.errors],
    }
  } finally {
    const after: DpuHealthRecord = {
      state,
      strays,
      ...(before.revoked ? { revoked: before.revoked } : {}),
    }
    const was = { state: before.state, strays: before.strays, revoked: before.revoked }
    if (JSON.stringify(after) !== JSON.stringify(was)) {
      await deps.records.write(id, after)
    }
  }
}

/** Sets the host's `DpuHealthy` where it differs from what `state` calls for. */
async function writeDpuHealthy(
  deps: DpuHealthDeps,
  host: ManagedResource,
  beat: Heartbeat,
  state: DpuState,
  now: Date,
  revoked: DpuHealthRecord['revoked'],
): Promise<{ status: string; reason: string } | undefined> {
  const of = (conditions: ManagedResource['status']['conditions']) =>
    dpuHealthyCondition(
      conditions.find((c) => c.type === DPU_HEALTHY),
      beat.dpuId,
      beat,
      state,
      revoked,
    )
  // Read again under the write: another writer may have changed the host meanwhile.
  if (!of(host.status.conditions)) return undefined
  let written: { status: string; reason: string } | undefined
  await deps.store.hosts.updateStatus(host.name, (current) => {
    const change = of(current.status.conditions)
    if (!change) return undefined
    written = { status: change.status, reason: change.reason }
    return { ...current.status, conditions: setCondition(current.status.conditions, change, now) }
  })
  if (written) void deps.groupHosts?.touch(host.spec.resourceGroup)
  return written
}

/** Re-drives each host whose port the DPU no longer holds. */
async function repairLostPorts(
  deps: DpuHealthDeps,
  beat: Heartbeat,
  hosts: readonly ManagedResource[],
): Promise<DpuRepair[]> {
  const repairs: DpuRepair[] = []
  for (const { host, logicalPort } of hostsMissingPort(beat.dpuId, beat, hosts)) {
    const message = `DPU ${beat.dpuId}'s heartbeat at ${beat.at} shows no port bound to ${logicalPort}: configuring it again`
    const jobId = await redriveHost(
      deps,
      host,
      { type: 'AgentConfigured', status: 'False', reason: 'PortLost', message },
      'Configuring',
    )
    if (!jobId) continue
    await recordDpuEvent(deps.store, beat.dpuId, {
      type: 'Warning',
      reason: 'PortLost',
      message: `${host}: ${message}`,
    })
    repairs.push({ dpu: beat.dpuId, action: 'PortLost', host, logicalPort, jobId })
  }
  return repairs
}

/** Re-drives each Fabric host whose VRF, port or announced prefix the DPU no longer shows. */
async function repairLostRoutes(
  deps: DpuHealthDeps,
  beat: Heartbeat,
  hosts: readonly ManagedResource[],
): Promise<DpuRepair[]> {
  const repairs: DpuRepair[] = []
  for (const { host, vrf, missing } of fabricHostsMissing(beat.dpuId, beat, hosts)) {
    const message = `DPU ${beat.dpuId}'s heartbeat at ${beat.at} shows no ${missing}: configuring it again`
    const jobId = await redriveHost(
      deps,
      host,
      { type: 'AgentConfigured', status: 'False', reason: 'RouteLost', message },
      'Configuring',
    )
    if (!jobId) continue
    await recordDpuEvent(deps.store, beat.dpuId, {
      type: 'Warning',
      reason: 'RouteLost',
      message: `${host}: ${message}`,
    })
    repairs.push({ dpu: beat.dpuId, action: 'RouteLost', host, logicalPort: vrf, jobId })
  }
  return repairs
}

/** Whether a repair of this stray may be sent now: grace passed, none in flight. */
async function repairDue(
  deps: DpuHealthDeps,
  dpuId: string,
  stray: Stray,
  graceMs: number,
  now: Date,
): Promise<boolean> {
  if (now.getTime() - Date.parse(stray.since) < graceMs) return false
  if (stray.lastSentAt && now.getTime() - Date.parse(stray.lastSentAt) < graceMs) return false
  if (stray.lastJobId) {
    const ref = { queue: agentQueueName(dpuId), jobId: stray.lastJobId }
    if ((await deps.children.outcome(ref)).state === 'pending') return false
  }
  return true
}

/**
 * Sends a Fabric `isolate` for each VRF port, or empty VRF, no live host wants that
 * outlasted the grace and has no repair in flight (as `repairStrays` for Overlay ports);
 * returns them as they now stand, under their `fabric:` keys.
 */
function repairStrayVrfs(
  deps: DpuHealthDeps,
  beat: Heartbeat,
  hosts: readonly ManagedResource[],
  known: Readonly<Record<string, Stray>>,
  now: Date,
): Promise<{ strays: Record<string, Stray>; repairs: DpuRepair[]; errors: string[] }> {
  const found = strayFabric(beat.dpuId, beat, hosts)
  return repairEach(
    deps,
    beat,
    known,
    now,
    found,
    (f) => f.key,
    (f) => isolateStrayVrf(deps, beat.dpuId, f, now),
  )
}

/**
 * The repair loop of every kind of stray: for each one found (keyed by `keyOf`), sends
 * `isolate` once it outlasted the grace and has no repair in flight, and counts it; one
 * that cannot be sent is tried again after the grace, not on every run. Returns the strays
 * as they now stand (ones no longer found are forgotten).
 */
async function repairEach<T>(
  deps: DpuHealthDeps,
  beat: Heartbeat,
  known: Readonly<Record<string, Stray>>,
  now: Date,
  found: readonly T[],
  keyOf: (found: T) => string,
  isolate: (found: T) => Promise<DpuRepair>,
): Promise<{ strays: Record<string, Stray>; repairs: DpuRepair[]; errors: string[] }> {
  const graceMs = repairGraceMs(beat)
  const strays: Record<string, Stray> = {}
  const repairs: DpuRepair[] = []
  const errors: string[] = []
  for (const one of found) {
    const key = keyOf(one)
    const stray = known[key] ?? { since: now.toISOString(), repairs: 0 }
    strays[key] = stray
    if (!(await repairDue(deps, beat.dpuId, stray, graceMs, now))) continue
    let sent: DpuRepair
    try {
      sent = await isolate(one)
    } catch (error) {
      // E.g. a report no valid `isolate` can follow (a port name no agent would send).
      strays[key] = { ...stray, lastSentAt: now.toISOString() }
      errors.push(`${key}: ${error instanceof Error ? error.message : String(error)}`)
      continue
    }
    strays[key] = {
      ...stray,
      repairs: stray.repairs + 1,
      lastJobId: sent.jobId,
      lastSentAt: now.toISOString(),
    }
    repairs.push(sent)
  }
  return { strays, repairs, errors }
}

async function isolateStrayVrf(
  deps: DpuHealthDeps,
  dpuId: string,
  stray: FabricStray,
  now: Date,
): Promise<DpuRepair> {
  const what = stray.port ? `${stray.vrf}/${stray.port}` : stray.vrf
  // A repair number of its own: the job is never a duplicate of an earlier isolate. A VRF
  // with no port names none: the agent takes no port out, withdraws and removes the VRF.
  const ref = await addFabricIsolate(
    deps,
    {
      dpuId,
      specVersion: 0,
      group: { name: stray.group, vni: stray.vni },
      host: {
        name: `stray-${what.replace('/', '-')}`,
        ...(stray.port ? { hostPort: stray.port } : {}),
        addresses: [...stray.addresses],
      },
    },
    now.getTime(),
  )
  const holds = stray.port ? `holds ${stray.port} in VRF ${stray.vrf}` : `holds VRF ${stray.vrf}`
  const message = `DPU ${dpuId} ${holds} of group ${stray.group}, which nothing wants there: isolating it (${ref.jobId})`
  await recordDpuEvent(
    deps.store,
    dpuId,
    { type: 'Warning', reason: 'StrayVrfIsolated', message },
    { group: stray.group },
  )
  return { dpu: dpuId, action: 'StrayVrfIsolated', logicalPort: what, jobId: ref.jobId }
}

/**
 * Sends `isolate` for each stray port that outlasted the grace and has no repair in
 * flight; returns the strays as they now stand (ones no longer bound are forgotten).
 */
function repairStrays(
  deps: DpuHealthDeps,
  beat: Heartbeat,
  hosts: readonly ManagedResource[],
  known: Readonly<Record<string, Stray>>,
  now: Date,
): Promise<{ strays: Record<string, Stray>; repairs: DpuRepair[]; errors: string[] }> {
  const found = strayPorts(beat.dpuId, beat, hosts)
  return repairEach(
    deps,
    beat,
    known,
    now,
    found,
    (p) => p.logicalPort,
    (p) => isolateStray(deps, beat.dpuId, p, hosts, now),
  )
}

async function isolateStray(
  deps: DpuHealthDeps,
  dpuId: string,
  port: BoundPort,
  hosts: readonly ManagedResource[],
  now: Date,
): Promise<DpuRepair> {
  const owner = strayOwner(port, hosts, dpuId)
  // A repair number of its own: the job is never a duplicate of an earlier isolate.
  const ref = await addIsolate(
    deps,
    {
      dpuId,
      specVersion: owner.specVersion,
      group: { name: port.group },
      host: { name: owner.name, logicalPort: port.logicalPort, hostPort: port.port },
    },
    now.getTime(),
  )
  const message = `DPU ${dpuId} holds ${port.port} bound to ${port.logicalPort}, which nothing wants there: isolating it (${ref.jobId})`
  const event = { type: 'Warning', reason: 'StrayPortIsolated', message } as const
  // It names the port's group and host: that group's tenant's, whoever holds the DPU now.
  await recordDpuEvent(deps.store, dpuId, event, { group: port.group })
  if (owner.known) await deps.store.events.record('mr', owner.name, event)
  return {
    dpu: dpuId,
    action: 'StrayPortIsolated',
    logicalPort: port.logicalPort,
    ...(owner.known ? { host: owner.name } : {}),
    jobId: ref.jobId,
  }
}
