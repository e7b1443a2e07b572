/**
 * What a DPU's heartbeat says about its Fabric groups' VRFs, decided without any I/O (as
 * `dpu-observed.ts` does for Overlay ports): the Fabric hosts whose VRF, port or announced
 * prefix the DPU no longer shows, and what its VRFs hold that no live host wants there.
 * `functions/dpu-health.ts` reads the state, asks these, and repairs the difference.
 */
import { isIPv4 } from 'node:net'
import type { Heartbeat, ObservedVrf } from '../../lib/agent-protocol/index.ts'
import type { ManagedResource } from '../../lib/model/objects.ts'
import { lastTransitionOf, repairGraceMs } from './dpu-observed.ts'

/** A Fabric host whose DPU no longer shows what its ack said: what is missing, in words. */
export interface FabricMissing {
  readonly host: string
  readonly vrf: string
  readonly missing: string
}

/**
 * Something a DPU's VRF holds that nothing wants there: a port no live host of the VRF's
 * group has (`port`), or a VRF with no port and no live host of its group (no `port`).
 * `addresses` are the prefixes it announces that no live host wants (at most one per
 * family, as an `isolate` carries them).
 */
export interface FabricStray {
  /** Its key in the DPU's repair record: `fabric:<vrf>` or `fabric:<vrf>/<port>`. */
  readonly key: string
  readonly group: string
  readonly vrf: string
  readonly vni: number
  readonly port?: string
  readonly addresses: readonly string[]
}

/** The host's Fabric facts as its status says its DPU acked them, if it is a Fabric host. */
function ackedVrf(host: ManagedResource) {
  const agent = host.status.agent
  return agent?.vrf
    ? { vrf: agent.vrf, port: agent.hostPort, announced: agent.announced ?? [] }
    : undefined
}

/**
 * Fabric hosts of DPU `dpuId` that are Ready, whose beat (taken at least the repair grace
 * after the host last changed) no longer shows its VRF, its port in it, or a prefix its
 * ack said was announced. A beat without `vrfs` (an agent that takes no Fabric jobs) shows
 * nothing missing.
 */
export function fabricHostsMissing(
  dpuId: string,
  beat: Pick<Heartbeat, 'at' | 'intervalMs' | 'observed'>,
  hosts: readonly ManagedResource[],
): FabricMissing[] {
  const vrfs = beat.observed.vrfs
  if (!vrfs) return []
  const beatAt = Date.parse(beat.at)
  const graceMs = repairGraceMs(beat)
  const missing: FabricMissing[] = []
  for (const host of hosts) {
    const acked = ackedVrf(host)
    if (!acked || host.deletion || host.spec.dpu.id !== dpuId) continue
    if (host.status.phase !== 'Ready') continue
    if (!(beatAt - lastTransitionOf(host) >= graceMs)) continue
    const vrf = vrfs.find((v) => v.vrf === acked.vrf)
    const what = !vrf
      ? `VRF ${acked.vrf}`
      : !vrf.ports.includes(acked.port)
        ? `port ${acked.port} in VRF ${acked.vrf}`
        : acked.announced
            .filter((p) => !vrf.announced.includes(p))
            .map((p) => `the announcement of ${p}`)
            .join(', ')
    if (what) missing.push({ host: host.name, vrf: acked.vrf, missing: what })
  }
  return missing
}

/**
 * What DPU `dpuId`'s VRFs hold that no live host wants there (see `FabricStray`). A host of
 * the VRF's group on this DPU is live unless it is being detached, and wants its port
 * there — also before its first ack (its `configure` may be running) — and its acked
 * prefixes. What a host being detached holds is left to its detach.
 */
export function strayFabric(
  dpuId: string,
  beat: Pick<Heartbeat, 'observed'>,
  hosts: readonly ManagedResource[],
): FabricStray[] {
  const strays: FabricStray[] = []
  const seen = new Set<string>()
  for (const v of beat.observed.vrfs ?? []) {
    if (seen.has(v.vrf)) continue
    seen.add(v.vrf)
    const ofGroup = hosts.filter(
      (h) =>
        h.spec.dpu.id === dpuId &&
        h.spec.resourceGroup === v.group &&
        (ackedVrf(h)?.vrf ?? v.vrf) === v.vrf,
    )
    const live = ofGroup.filter((h) => !h.deletion)
    const portOf = (h: ManagedResource) => ackedVrf(h)?.port ?? h.spec.identifier
    // A host not acked yet that names no port takes its agent's default, unknown here:
    // every port of the VRF may be its.
    const unknownPort = ofGroup.some((h) => portOf(h) === undefined)
    const wantedPorts = new Set(ofGroup.map(portOf))
    const wantedPrefixes = new Set(live.flatMap((h) => ackedVrf(h)?.announced ?? []))
    const addresses = oneAddressPerFamily(v, wantedPrefixes)
    for (const port of v.ports) {
      if (unknownPort || wantedPorts.has(port)) continue
      strays.push({ key: `fabric:${v.vrf}/${port}`, ...whose(v), port, addresses })
    }
    if (v.ports.length === 0 && ofGroup.length === 0) {
      strays.push({ key: `fabric:${v.vrf}`, ...whose(v), addresses })
    }
  }
  return strays
}

function whose(v: ObservedVrf) {
  return { group: v.group || v.vrf, vrf: v.vrf, vni: v.vni }
}

/** The VRF's announced prefixes no live host wants, as addresses, the first of each family. */
function oneAddressPerFamily(v: ObservedVrf, wanted: ReadonlySet<string>): string[] {
  const addresses = v.announced.filter((p) => !wanted.has(p)).map((p) => p.split('/')[0] ?? '')
  const v4 = addresses.find((a) => isIPv4(a))
  const v6 = addresses.find((a) => a.includes(':'))
  return [v4, v6].flatMap((a) => (a ? [a] : []))
}
