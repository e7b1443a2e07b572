/**
 * A DPU's credentials for its group's SB, where the group's central admits only its own
 * chassis (an embedded per-group central over TLS): taken away when the DPU leaves the
 * group, renewed before they expire. Both reach the DPUs still serving the group the one
 * way a DPU gets them: a `configure` of one of its hosts in the group (the host is
 * re-driven, `Configuring`, its port left as it is), which carries the new chassis
 * certificate and the group's CA (`chassisCertificateFor`, `southboundCaFor`). The
 * agent writes them where its ovn-controller reads them; it reconnects with them, and its
 * flows stay in place meanwhile.
 */
import { redriveHost } from '../../lib/jobs/redrive.ts'
import { implementationOf, type ManagedResource } from '../../lib/model/objects.ts'
import type { HandlerDeps } from './deps.ts'

type CredentialsDeps = Pick<HandlerDeps, 'ovn' | 'store' | 'jobs'>

/** A DPU sent its new credentials: the host whose `configure` carries them. */
export interface CredentialsSent {
  readonly group: string
  readonly dpuId: string
  readonly host: string
}

/**
 * The DPU `dpuId` serves no host of `group` but `leaving` (the host being detached): the
 * group's SB stops admitting it (`leaveChassis`: a new chassis CA, every session dropped),
 * and every other DPU of the group is sent a new certificate. Nothing while another host
 * of the group, detaching or not, is still on the DPU; nothing for a group being deleted
 * or a central that takes a DPU's identity as it is. Safe to run again.
 *
 * @example
 * await leaveGroupSouthbound(deps, { dpuId: 'dpu-1', group: 'tenant-a', leaving: 'host-1' })
 */
export async function leaveGroupSouthbound(
  deps: CredentialsDeps,
  { dpuId, group, leaving }: { dpuId: string; group: string; leaving: string },
): Promise<CredentialsSent[]> {
  if (!deps.ovn.leaveChassis) return []
  // The DPU's own hosts first (a few), the group's (maybe thousands) only when it leaves.
  const onDpu = await deps.store.hosts.onDpu(dpuId)
  if (onDpu.some((h) => h.name !== leaving && h.spec.resourceGroup === group)) return []
  // A group being deleted takes its central, and its CA, with it; a Fabric group has none.
  const held = await deps.store.groups.get(group)
  if (!held || held.deletion || implementationOf(held.spec) === 'Fabric') return []
  const others = (await deps.store.hosts.inGroup(group)).filter((h) => h.name !== leaving)
  // Not while a host on another DPU is being detached: its isolate still has to show the
  // SB its port released, with the chassis certificate a new CA would refuse (concurrent
  // detaches on several DPUs then never finished). The last of them replaces the CA.
  if (others.some((h) => h.deletion && h.spec.dpu.id !== dpuId)) return []
  if (!(await deps.ovn.leaveChassis(group, dpuId))) return []
  const dpus = new Set(others.map((h) => h.spec.dpu.id))
  const reason = `DPU ${dpuId} left group ${group}: its Southbound has a new chassis CA`
  const sent: CredentialsSent[] = []
  for (const dpu of [...dpus].sort()) {
    const host = await reconfigure(deps, others, dpu, 'ChassisCaRotated', reason)
    if (host) sent.push({ group, dpuId: dpu, host })
  }
  return sent
}

/**
 * Sends every DPU whose chassis certificate is due for renewal (`chassisRenewalsDue`: less
 * than half of its life left) a new one, through a `configure` of one of its hosts in the
 * group. Reconcile runs it; a DPU that serves no host of the group any more is left out
 * (its certificate expires, and its group's CA was replaced when it left).
 */
export async function renewChassisCertificates(deps: CredentialsDeps): Promise<CredentialsSent[]> {
  const due = (await deps.ovn.chassisRenewalsDue?.()) ?? []
  const sent: CredentialsSent[] = []
  const byGroup = new Map<string, ManagedResource[]>()
  for (const { group, dpuId } of due) {
    let hosts = byGroup.get(group)
    if (!hosts) {
      hosts = await deps.store.hosts.inGroup(group)
      byGroup.set(group, hosts)
    }
    const reason = `DPU ${dpuId}'s chassis certificate for group ${group} is renewed`
    const host = await reconfigure(deps, hosts, dpuId, 'ChassisCertificateRenewed', reason)
    if (host) sent.push({ group, dpuId, host })
  }
  return sent
}

/**
 * Re-drives the first host (by name) of `hosts` on `dpuId` that is neither being deleted
 * nor Failed (a Failed one is retried on its own, and gets the credentials then), so that
 * its attach sends the DPU a `configure` with its current credentials. Returns its name,
 * or undefined when none could be.
 */
async function reconfigure(
  deps: CredentialsDeps,
  hosts: readonly ManagedResource[],
  dpuId: string,
  reason: string,
  message: string,
): Promise<string | undefined> {
  const candidates = hosts
    .filter((h) => h.spec.dpu.id === dpuId && !h.deletion && h.status.phase !== 'Failed')
    .sort((a, b) => a.name.localeCompare(b.name))
  for (const host of candidates) {
    const cause = { type: 'AgentConfigured', status: 'Unknown', reason, message } as const
    if (await redriveHost(deps, host.name, cause, 'Configuring')) return host.name
  }
  return undefined
}
