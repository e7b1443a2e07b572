/**
 * Driving the lab's Hydrazine as Carbide does, through its HTTP API only, and waiting for
 * what a user would see: the lab tests' shared steps. Each wait is bounded and resolves
 * false when its time is up, for the test to assert.
 */
import type { ApiAnswer } from '../../infra/lab/hydrazine.ts'
import type { Lab, LabHost } from '../../infra/lab/lab.ts'
import { eventually } from '../../infra/lab/probes.ts'

export type HostAccess = 'None' | 'FabricAccess' | 'PublicAccess'

/**
 * `PUT /v1/managed-resources/<host>`: the host into `group` on its DPU, identified by its
 * host port, with a fixed `ip` or (without one) an address from the group's IPAM, and
 * any `extra` spec fields (e.g. `hostname`).
 */
export function attachHost(
  lab: Pick<Lab, 'api' | 'dpus'>,
  host: LabHost,
  group: string,
  ip: string | undefined,
  hostAccess: HostAccess = 'None',
  extra: Record<string, unknown> = {},
): Promise<ApiAnswer> {
  const dpu = lab.dpus.find((d) => d.id === host.dpu)
  if (!dpu) throw new Error(`no DPU ${host.dpu}`)
  return lab.api('PUT', `/v1/managed-resources/${host.name}`, {
    resourceGroup: group,
    hostMAC: host.mac,
    ...(ip ? { hostIP: ip } : {}),
    dpu: { id: dpu.id, ips: [dpu.encapIp, dpu.natIp] },
    hostAccess,
    identifier: host.hostPort,
    ...extra,
  })
}

/**
 * True once host `name` is Ready, its configuration synced, at its current spec version (a
 * previous version's Ready does not count).
 */
export function hostReady(lab: Pick<Lab, 'api'>, name: string, timeoutMs = 60_000) {
  return eventually(async () => {
    const h = (await lab.api('GET', `/v1/managed-resources/${name}`)).body as {
      specVersion?: number
      status?: { phase?: string; observedVersion?: number; configsSynced?: boolean }
    }
    return (
      h.status?.phase === 'Ready' &&
      h.status.configsSynced === true &&
      h.status.observedVersion === h.specVersion
    )
  }, timeoutMs)
}

/** True once the object at `path` (`/v1/resource-groups/g`, …) is in `phase`. */
export function phaseIs(lab: Pick<Lab, 'api'>, path: string, phase: string, timeoutMs = 60_000) {
  return eventually(async () => {
    const body = (await lab.api('GET', path)).body as { status?: { phase?: string } }
    return body.status?.phase === phase
  }, timeoutMs)
}

/** True once `path` answers 404: the object is gone. */
export function isGone(lab: Pick<Lab, 'api'>, path: string, timeoutMs = 60_000) {
  return eventually(async () => (await lab.api('GET', path)).status === 404, timeoutMs)
}
