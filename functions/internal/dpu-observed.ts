/**
 * What a DPU's heartbeat says about its hosts, decided without any I/O: the `DpuHealthy`
 * condition each host should carry, the hosts whose port the DPU no longer holds, and
 * the ports it holds that nothing wants there. `functions/dpu-health.ts` reads the state,
 * asks these, and writes the difference.
 */
import type { DpuState } from '../../lib/agent-protocol/heartbeats.ts'
import type { Heartbeat } from '../../lib/agent-protocol/index.ts'
import type { Condition, ManagedResource } from '../../lib/model/objects.ts'
import { topologyNames } from '../../lib/ovn/index.ts'
import type { ConditionChange } from './status.ts'

export const DPU_HEALTHY = 'DpuHealthy'
/** `DpuHealthy=False` of a DPU whose credentials were revoked (`functions/dpu-usage.ts`). */
export const CREDENTIALS_REVOKED = 'CredentialsRevoked'

/**
 * A repair waits this many of the DPU's heartbeat intervals: after a host's last change
 * before its missing port counts (a beat older than that may predate the bind), and after
 * a stray port was first seen, or its last repair was sent, before one is sent again.
 */
export const REPAIR_GRACE_INTERVALS = 2

/** The grace of a DPU's repairs, in ms (never under a second, whatever its agent says). */
export function repairGraceMs(beat: Pick<Heartbeat, 'intervalMs'>): number {
  return Math.max(1000, REPAIR_GRACE_INTERVALS * beat.intervalMs)
}

export type BoundPort = Heartbeat['observed']['boundPorts'][number]

/**
 * The bound ports of a beat that its DPU may hold: on a host port the inventory gives it
 * (`hostPorts`), each port once. What is reported on any other port is not taken: made-up
 * ports must not become repairs. A DPU whose inventory names no host port (or that is not
 * in it) binds its agent's own default, whose name the controller does not know: its
 * ports are taken, each once (at most `MAX_REPORTED_PORTS`, the heartbeat's bound).
 */
export function portsItMayHold(
  beat: Pick<Heartbeat, 'observed'>,
  hostPorts: readonly string[] | undefined,
): { readonly held: BoundPort[]; readonly ignored: string[] } {
  const allowed = hostPorts && hostPorts.length > 0 ? new Set(hostPorts) : undefined
  const seen = new Set<string>()
  const held: BoundPort[] = []
  const ignored: string[] = []
  for (const port of beat.observed.boundPorts) {
    if (seen.has(port.port) || (allowed && !allowed.has(port.port))) ignored.push(port.port)
    else held.push(port)
    seen.add(port.port)
  }
  return { held, ignored }
}

/**
 * The `DpuHealthy` condition a host on DPU `dpuId` should now carry, given the one it
 * has, or undefined to leave it as it is. The host's phase never changes with it: a
 * silent agent does not stop a data plane that is already programmed.
 *
 * - `Lost`: False, `HeartbeatLost`, saying since when.
 * - `Online` after a False or Unknown one: True, `HeartbeatResumed`. A host that never
 *   had one gets none (no condition means the DPU was never seen unhealthy).
 * - `Stale`: unchanged (one late beat is not worth a status write on every host).
 * - whatever the state, while its credentials are `revoked` (it held more than its bound
 *   in the agents' Redis): False, `CredentialsRevoked`, until they are issued again.
 */
export function dpuHealthyCondition(
  current: Pick<Condition, 'status' | 'reason' | 'message'> | undefined,
  dpuId: string,
  beat: Pick<Heartbeat, 'at' | 'intervalMs'>,
  state: DpuState,
  revoked?: { readonly at: string; readonly bytes: number },
): ConditionChange | undefined {
  let next: ConditionChange | undefined
  if (revoked) {
    next = {
      type: DPU_HEALTHY,
      status: 'False',
      reason: CREDENTIALS_REVOKED,
      message: `the credentials of DPU ${dpuId} were revoked at ${revoked.at}: it held ${revoked.bytes} bytes in the agents' Redis, over its bound; issue them again once its agent is fixed`,
    }
  } else if (state === 'Lost') {
    next = {
      type: DPU_HEALTHY,
      status: 'False',
      reason: 'HeartbeatLost',
      message: `no heartbeat from DPU ${dpuId} since ${beat.at} (one is expected every ${beat.intervalMs} ms); the host keeps what its DPU was last given`,
    }
  } else if (state === 'Online' && current && current.status !== 'True') {
    next = {
      type: DPU_HEALTHY,
      status: 'True',
      reason: 'HeartbeatResumed',
      message: `DPU ${dpuId} heartbeats again`,
    }
  }
  if (!next) return undefined
  const same =
    current?.status === next.status &&
    current.reason === next.reason &&
    current.message === next.message
  return same ? undefined : next
}

/** The `AgentConfigured` reasons that mean the DPU acked this attempt's `configure`. */
const ACKED = new Set(['PortInstalled', 'PortNotInstalled', 'NotBoundInSouthbound'])

/** When a host's status last changed: its newest condition transition (0 when none). */
export function lastTransitionOf(host: Pick<ManagedResource, 'status'>): number {
  const times = host.status.conditions.map((c) => Date.parse(c.lastTransitionTime))
  return Math.max(0, ...times.filter((t) => !Number.isNaN(t)))
}

/**
 * Hosts whose port DPU `dpuId` no longer holds: Ready (or Configuring after this
 * attempt's ack) on that DPU, their logical port absent from the beat's bound ports, and
 * the beat taken at least `REPAIR_GRACE_INTERVALS` intervals after the host last changed.
 * A host already being repaired (Configuring, not acked yet) is not one.
 */
export function hostsMissingPort(
  dpuId: string,
  beat: Pick<Heartbeat, 'at' | 'intervalMs' | 'observed'>,
  hosts: readonly ManagedResource[],
): { readonly host: string; readonly logicalPort: string }[] {
  const bound = new Set(beat.observed.boundPorts.map((p) => p.logicalPort))
  const beatAt = Date.parse(beat.at)
  const graceMs = repairGraceMs(beat)
  const missing: { host: string; logicalPort: string }[] = []
  for (const host of hosts) {
    const ref = host.status.logicalPortReference
    if (host.deletion || host.spec.dpu.id !== dpuId || ref?.dpu !== dpuId) continue
    if (bound.has(ref.logicalPort)) continue
    const agent = host.status.conditions.find((c) => c.type === 'AgentConfigured')
    const acked =
      host.status.phase === 'Ready' ||
      (host.status.phase === 'Configuring' && agent !== undefined && ACKED.has(agent.reason))
    if (!acked) continue
    if (!(beatAt - lastTransitionOf(host) >= graceMs)) continue
    missing.push({ host: host.name, logicalPort: ref.logicalPort })
  }
  return missing
}

/**
 * Ports DPU `dpuId` holds bound that nothing wants there: bound to a logical port no
 * live host of that DPU has (the host was detached while the agent was away, moved, or
 * the port was made by hand). Ports of hosts being detached are left to their detach.
 */
export function strayPorts(
  dpuId: string,
  beat: Pick<Heartbeat, 'observed'>,
  hosts: readonly ManagedResource[],
): BoundPort[] {
  const wanted = new Set<string>()
  const detaching = new Set<string>()
  for (const host of hosts) {
    const ports = [topologyNames.hostPort(host.spec.resourceGroup, host.name)]
    const ref = host.status.logicalPortReference
    if (ref) ports.push(ref.logicalPort)
    if (host.deletion) for (const p of ports) detaching.add(p)
    else if (host.spec.dpu.id === dpuId) {
      wanted.add(ports[0] ?? '')
      if (ref?.dpu === dpuId) wanted.add(ref.logicalPort)
    }
  }
  return beat.observed.boundPorts.filter(
    (p) => !wanted.has(p.logicalPort) && !detaching.has(p.logicalPort),
  )
}

/**
 * The host a stray port was bound for, as an `isolate` names it: the stored host whose
 * logical port it is, else the last part of the logical port (`hz/<group>/<host>`).
 * `known` only for a host of DPU `dpuId` itself: what one DPU reports never lands in
 * the history of a host elsewhere (another tenant's, perhaps).
 */
export function strayOwner(
  port: BoundPort,
  hosts: readonly ManagedResource[],
  dpuId: string,
): { readonly name: string; readonly specVersion: number; readonly known: boolean } {
  const owner = hosts.find(
    (h) =>
      h.status.logicalPortReference?.logicalPort === port.logicalPort ||
      topologyNames.hostPort(h.spec.resourceGroup, h.name) === port.logicalPort,
  )
  if (owner) {
    return { name: owner.name, specVersion: owner.specVersion, known: owner.spec.dpu.id === dpuId }
  }
  const last = port.logicalPort.split('/').at(-1) ?? ''
  return { name: last || port.port, specVersion: 0, known: false }
}
