/**
 * A DPU's credentials for its group's SB, where the group's central admits only its own
 * chassis (an embedded per-group central over TLS): taken away when the DPU leaves the
 * group, renewed before they expire. Both reach the DPUs still serving the group the one
 * way a DPU gets them: a `configure` of one of its hosts in the group (the host is
 * re-driven, `Configuring`, its port left as it is), which carries the new chassis
 * certificate and the group's CA (`chassisCertificateFor`, `southboundCaFor`). The
 * agent writes them where its ovn-controller reads them; it reconnects with them, and its
 * flows stay in place meanwhile. A DPU whose hosts of the group are all being detached
 * gets no `configure`: each host's `isolate` carries the same credentials
 * (`isolateCredentialsFor`), so that it can show the SB the port released; one sent with
 * a CA replaced before it was acked is renewed with the current credentials.
 */
import { redriveHost } from '../../lib/jobs/redrive.ts'
import { implementationOf, type ManagedResource } from '../../lib/model/objects.ts'
import { isolateRef, isolateTarget, renewIsolate } from './agent-jobs.ts'
import type { HandlerDeps } from './deps.ts'
import { isolateCredentialsFor } from './dpu-central.ts'

type CredentialsDeps = Pick<
  HandlerDeps,
  'ovn' | 'store' | 'jobs' | 'children' | 'agents' | 'dpuIdentities'
>

/** A DPU sent its new credentials: the host whose `configure` carries them. */
export interface CredentialsSent {
  readonly group: string
  readonly dpuId: string
  readonly host: string
}

/** What `leaveGroupSouthbound` did. */
export interface LeftSouthbound {
  /** The DPUs still serving the group, sent their new credentials (the CA was replaced). */
  readonly sent: readonly CredentialsSent[]
  /**
   * The DPU left, but a host of the group on another DPU was being detached: the CA was
   * left to be replaced later. The detach runs `rotateForLeavers` for the group once its
   * host is gone, where the last of such detaches replaces it; reconcile does otherwise.
   */
  readonly deferred: boolean
}

/**
 * The DPU `dpuId` serves no host of `group` but `leaving` (the host being detached): the
 * group's SB stops admitting it (`leaveChassis`: a new chassis CA, every session dropped),
 * and every other DPU of the group is sent a new certificate. Nothing while another host
 * of the group, detaching or not, is still on the DPU; nothing for a group being deleted
 * or a central that takes a DPU's identity as it is; later (`deferred`) while a host of
 * the group on another DPU is being detached. Safe to run again.
 *
 * @example
 * await leaveGroupSouthbound(deps, { dpuId: 'dpu-1', group: 'tenant-a', leaving: 'host-1' })
 */
export async function leaveGroupSouthbound(
  deps: CredentialsDeps & Pick<HandlerDeps, 'checkpoint'>,
  { dpuId, group, leaving }: { dpuId: string; group: string; leaving: string },
): Promise<LeftSouthbound> {
  const nothing: LeftSouthbound = { sent: [], deferred: false }
  if (!deps.ovn.leaveChassis) return nothing
  // The DPU's own hosts first (a few), the group's (maybe thousands) only when it leaves.
  const onDpu = await deps.store.hosts.onDpu(dpuId)
  if (onDpu.some((h) => h.name !== leaving && h.spec.resourceGroup === group)) return nothing
  // A group being deleted takes its central, and its CA, with it; a Fabric group has none.
  const held = await deps.store.groups.get(group)
  if (!held || held.deletion || implementationOf(held.spec) === 'Fabric') return nothing
  const others = (await deps.store.hosts.inGroup(group)).filter((h) => h.name !== leaving)
  // Not while a host on another DPU is being detached: its isolate still has to show the
  // SB its port released, with the chassis certificate a new CA would refuse (concurrent
  // detaches on several DPUs then never finished). The last of them replaces the CA; when
  // each of them leaves it to another, the last to finish does once its host is gone, or
  // reconcile (`rotateForLeavers`).
  if (others.some((h) => h.deletion && h.spec.dpu.id !== dpuId)) return { sent: [], deferred: true }
  await deps.checkpoint('detach:leaving-southbound', leaving)
  if (!(await deps.ovn.leaveChassis(group, dpuId))) return nothing
  const sent = await recertifyGroup(deps, group, [dpuId], `DPU ${dpuId} left group ${group}`)
  return { sent, deferred: false }
}

/** A group whose chassis CA reconcile replaced for DPUs that had left it. */
export interface ChassisCaRotated {
  readonly group: string
  /** The DPUs the replaced CA had certified that serve no host of the group. */
  readonly left: readonly string[]
  /** The DPUs still serving the group, sent their new credentials. */
  readonly sent: readonly CredentialsSent[]
}

/**
 * Replaces the chassis CA of every group that still certifies a DPU serving none of its
 * hosts (`chassisCertified`): one whose detach left the rotation to another detach, which
 * did the same (two DPUs' last hosts detached at once), or whose detach was cut before it.
 * Its certificate would open the group's SB until it expires. The group's other DPUs are
 * sent new certificates, as when a detach rotates. A group with a host being detached is
 * left to the next run: that detach's isolate still needs the SB with the current CA.
 * Reconcile runs it; each group on its own (`failed` names those that could not be). A
 * detach whose DPU left the group runs it for that group (`only`) once its host is gone:
 * the last of detaches that each left the replacement to another replaces the CA then.
 *
 * @example
 * const { rotated } = await rotateForLeavers(deps) // [{ group: 'g', left: ['dpu-1', 'dpu-2'], sent }]
 */
export async function rotateForLeavers(
  deps: CredentialsDeps,
  only?: string,
): Promise<{
  rotated: ChassisCaRotated[]
  failed: ChassisGroupFailure[]
}> {
  const rotated: ChassisCaRotated[] = []
  if (!deps.ovn.leaveChassis) return { rotated, failed: [] }
  const leaveChassis = deps.ovn.leaveChassis
  const failed = await forChassisGroups(
    deps,
    async (group, hosts, certified) => {
      const serving = new Set(hosts.map((h) => h.spec.dpu.id))
      const left = certified.filter((dpu) => !serving.has(dpu))
      if (left.length === 0) return
      if (!(await leaveChassis(group, left))) return
      const which = left.length === 1 ? `DPU ${left[0]}` : `DPUs ${left.join(', ')}`
      const sent = await recertifyGroup(deps, group, left, `${which} left group ${group}`)
      rotated.push({ group, left, sent })
    },
    only,
  )
  return { rotated, failed }
}

/** A group reconcile's chassis work could not finish, and why. */
export interface ChassisGroupFailure {
  readonly group: string
  readonly error: unknown
}

/**
 * Runs `each` for every group whose SB admits only its own chassis (`chassisCertified`)
 * with its hosts and the DPUs its current CA certified, leaving out a group being deleted
 * (its central, and its CA, go with it), a Fabric one, and one with a host being detached
 * (that detach's isolate still needs the SB with the current CA); `only` that group. Each
 * group on its own: returns those whose run threw.
 */
async function forChassisGroups(
  deps: CredentialsDeps,
  each: (group: string, hosts: ManagedResource[], certified: readonly string[]) => Promise<void>,
  only?: string,
): Promise<ChassisGroupFailure[]> {
  const failed: ChassisGroupFailure[] = []
  for (const { group, dpuIds } of (await deps.ovn.chassisCertified?.(only)) ?? []) {
    if (only !== undefined && group !== only) continue
    try {
      const held = await deps.store.groups.get(group)
      if (!held || held.deletion || implementationOf(held.spec) === 'Fabric') continue
      const hosts = await deps.store.hosts.inGroup(group)
      if (hosts.some((h) => h.deletion)) continue
      await each(group, hosts, dpuIds)
    } catch (error) {
      failed.push({ group, error })
    }
  }
  return failed
}

/**
 * After the group's chassis CA was replaced for the DPUs `left`: every DPU serving a host
 * of the group (read now, so a host attached meanwhile counts) is sent a new certificate
 * through one of them. A host whose detach began meanwhile (the check before the
 * replacement did not see it) may have had its `isolate` sent with the replaced CA's
 * credentials: one still waiting is renewed with the current ones, or its DPU could not
 * show the SB the port released.
 */
async function recertifyGroup(
  deps: CredentialsDeps,
  group: string,
  left: readonly string[],
  why: string,
): Promise<CredentialsSent[]> {
  const hosts = await deps.store.hosts.inGroup(group)
  const gone = new Set(left)
  const dpus = new Set(hosts.filter((h) => !h.deletion).map((h) => h.spec.dpu.id))
  const reason = `${why}: its Southbound has a new chassis CA`
  const sent: CredentialsSent[] = []
  for (const dpu of [...dpus].sort()) {
    const host = await reconfigure(deps, hosts, dpu, 'ChassisCaRotated', reason)
    if (host) sent.push({ group, dpuId: dpu, host })
  }
  const credentials = new Map<string, Awaited<ReturnType<typeof isolateCredentialsFor>>>()
  for (const host of hosts.filter((h) => h.deletion && !gone.has(h.spec.dpu.id))) {
    const target = isolateTarget(host)
    // Certificates are issued only for an isolate still waiting (one is renewed below).
    if ((await deps.children.outcome(isolateRef(target))).state !== 'pending') continue
    const dpuId = target.dpuId
    let carried = credentials.get(dpuId)
    if (!carried) {
      carried = await isolateCredentialsFor(deps, group, dpuId)
      credentials.set(dpuId, carried)
    }
    if (carried.sbCertificate === undefined) continue
    await renewIsolate(deps, { ...target, group: { name: group, ...carried } })
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
 * Sends a chassis certificate to every DPU that serves a Ready host of a group whose SB
 * admits only its own chassis (`chassisCertified`) and holds no valid certificate of the
 * group's current CA: one whose certificate ran out before a reconcile could renew it
 * (the controller was down), or one an earlier version configured before the group's SB
 * had a chassis CA (an upgrade). Its ovn-controller cannot reach the SB, yet nothing else
 * would tell it: its hosts stay Ready on the flows it keeps. The certificate goes through
 * a `configure` of one of its hosts (`Configuring` until acked); a DPU whose agent
 * presents no identity yet waits there (`DpuIdentityAwaited`), one with no identity on
 * record fails it (`ChassisIdentityRefused`). Reconcile runs it after the renewals, for the
 * groups `forChassisGroups` gives.
 *
 * @example
 * const { sent } = await certifyUncertified(deps) // [{ group: 'g', dpuId: 'dpu-1', host: 'h1' }]
 */
export async function certifyUncertified(deps: CredentialsDeps): Promise<{
  sent: CredentialsSent[]
  failed: ChassisGroupFailure[]
}> {
  const sent: CredentialsSent[] = []
  const failed = await forChassisGroups(deps, async (group, hosts, certified) => {
    const held = new Set(certified)
    const uncertified = hosts
      .filter((h) => h.status.phase === 'Ready' && !held.has(h.spec.dpu.id))
      .map((h) => h.spec.dpu.id)
    for (const dpuId of [...new Set(uncertified)].sort()) {
      const reason = `DPU ${dpuId} holds no valid certificate of group ${group}'s chassis CA: it is sent one`
      const host = await reconfigure(deps, hosts, dpuId, 'ChassisCertificateIssued', reason)
      if (host) sent.push({ group, dpuId, host })
    }
  })
  return { sent, failed }
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
