/**
 * Which group a DPU serves. A DPU serves one Overlay group at a time (`dpuFollowsOneGroup`;
 * a Fabric group's hosts, each in its group's VRF, do not count),
 * whatever the central: its one NAT IP is its group's gateway router's (two groups'
 * gateway routers on one DPU would both answer ARP for it, and one group's replies could
 * be taken in by the other's DNAT), and with a central per group its ovn-controller
 * follows that group's SB. When it moves to another group's central, the one it followed
 * before loses its `Chassis` row (`leavePreviousCentral`; not with a shared central), and
 * a group's SB that admits only its own chassis gets the DPU's certificate for it
 * (`chassisCertificateFor`).
 */
import { identityVerdict } from '../../lib/agent-protocol/identity.ts'
import { implementationOf } from '../../lib/model/network-implementation.ts'
import {
  CentralUnavailableError,
  ChassisIdentityRefused,
  type OvnCentralEndpoints,
  OvnControllerTooOld,
} from '../../lib/ovn/central.ts'
import { compareOvnReleases } from '../../lib/ovn/install.ts'
import { centralWanted } from './central-demand.ts'
import type { HandlerDeps } from './deps.ts'
import { DpuIdentityAwaited, NotReady } from './errors.ts'
import { type HostAttempt, setHostStatus } from './status.ts'

/**
 * A host for another group than the DPU's other hosts waits (retried, saying why) until
 * those hosts are detached. A host holds the DPU once it is past `Attaching`; of two
 * still attaching, the one whose name sorts first goes ahead (so two requests at once
 * never wait for each other). The admin network always gives way, whatever the phases:
 * a tenant host waits until every admin port of its DPU was isolated and removed, and an
 * admin port waits while any tenant host is on its DPU (`admin-sync.ts` removes it).
 */
export async function dpuFollowsOneGroup(
  deps: Pick<HandlerDeps, 'store' | 'admin'>,
  host: HostAttempt,
): Promise<void> {
  const { resourceGroup: group, dpu } = host.spec
  const admin = deps.admin?.group
  // Hosts of the same group share the DPU: only the others are read.
  for (const holder of await deps.store.hosts.onDpuOutside(dpu.id, group)) {
    const { name } = holder
    const other = holder.spec.resourceGroup
    if (name === host.name || other === group) continue
    // A Fabric group's host holds a VRF on the DPU, neither its NAT IP nor its chassis.
    if (await inFabricGroup(deps, other)) continue
    const adminPorts = admin !== undefined && (other === admin || group === admin)
    if (!adminPorts && holder.status.phase === 'Attaching' && name > host.name) continue
    const onAdmin = other === admin
    const message = onAdmin
      ? `DPU ${dpu.id}'s port ${holder.spec.identifier ?? '(default)'} is on the admin network ${admin} (${name}): it is isolated and leaves it first`
      : `DPU ${dpu.id} serves ${name} in group ${other}; a DPU serves one group at a time`
    await setHostStatus(deps, host, {
      attempt: host.attempt,
      phase: 'Attaching',
      condition: {
        type: 'Attached',
        status: 'False',
        reason: onAdmin ? 'AdminNetworkLeaving' : 'DpuServesAnotherGroup',
        message,
      },
    })
    throw new NotReady(message)
  }
}

async function inFabricGroup(deps: Pick<HandlerDeps, 'store'>, group: string): Promise<boolean> {
  const found = await deps.store.groups.get(group)
  return found !== undefined && implementationOf(found.spec) === 'Fabric'
}

/**
 * The DPU's chassis now follows this group's own central: the central it followed before
 * loses its `Chassis` row, so no SB keeps a chassis that is not there. The new central is
 * recorded only once the old one let go: a removal that failed is tried again.
 */
export async function leavePreviousCentral(
  deps: Pick<HandlerDeps, 'ovn' | 'store' | 'southbound'> &
    Partial<Pick<HandlerDeps, 'centralsOnDemand'>>,
  dpuId: string,
  group: string,
): Promise<void> {
  if (!(await deps.ovn.ensure(group)).group) return
  const previous = await deps.store.dpus.central(dpuId)
  if (previous === group) return
  // A previous group's central that is stopped (no hosts, on demand) is not started for it.
  if (
    previous &&
    (await deps.ovn.groups()).includes(previous) &&
    (await centralWanted(deps, previous))
  ) {
    const central = await deps.ovn.ensure(previous)
    await deps.southbound.removeChassis(central.sbController, dpuId)
  }
  await deps.store.dpus.setCentral(dpuId, group)
}

/**
 * The DPU's ovn-controller is not of an older OVN release than the group's ovn-northd:
 * OVN upgrades ovn-controller first, then northd (OVN's "OVN Upgrades"). Throws
 * `OvnControllerTooOld` (permanent) when it is older. Passes when either version is
 * unknown (an agent that does not report it, a central Hydrazine does not run).
 */
export async function controllerKeepsUpWithNorthd(
  deps: Pick<HandlerDeps, 'agents'>,
  central: OvnCentralEndpoints,
  group: string,
  dpuId: string,
): Promise<void> {
  const northd = central.northdVersion
  if (northd === undefined) return
  const controller = await deps.agents.ovnVersionOf(dpuId)
  if (controller === undefined || compareOvnReleases(controller, northd) >= 0) return
  throw new OvnControllerTooOld(group, dpuId, controller, northd)
}

/**
 * The CA the DPU trusts for the group's SB (`configure`'s `group.sbCa`): the group's own,
 * when its SB's server certificate comes from it; undefined when the DPU trusts
 * Hydrazine's CA for it.
 */
export async function southboundCaFor(
  deps: Pick<HandlerDeps, 'ovn'>,
  group: string,
): Promise<string | undefined> {
  return deps.ovn.southboundCa?.(group)
}

/**
 * The certificate the DPU presents to the group's SB (`configure`'s `group.sbCertificate`):
 * its identity's key certified by the group's own chassis CA, or undefined when the group's
 * SB takes the DPU's identity as it is. Throws `ChassisIdentityRefused` (permanent) when
 * the SB admits only its chassis and the DPU's identity on record is not valid, or none is
 * and none can come (no DPUs' CA to check one an agent presents); `DpuIdentityAwaited`
 * (retryable) when none is on record and its agent presents none that is taken (an agent
 * older than the controller, during an upgrade): its hosts wait until it does.
 */
export async function chassisCertificateFor(
  deps: Pick<HandlerDeps, 'ovn' | 'store' | 'agents' | 'dpuIdentities'>,
  group: string,
  dpuId: string,
): Promise<string | undefined> {
  if (!deps.ovn.chassisCertificate) return undefined
  const { identity, refused } = await dpuIdentity(deps, dpuId)
  try {
    return await deps.ovn.chassisCertificate(group, { id: dpuId, identity })
  } catch (error) {
    if (identity === null && deps.dpuIdentities && error instanceof ChassisIdentityRefused)
      throw new DpuIdentityAwaited(group, dpuId, refused ?? 'its agent presents none')
    throw error
  }
}

/**
 * The DPU's identity on record, recorded first from its agent's heartbeat when that
 * presents a certificate of the DPUs' CA for this DPU newer than the one on record
 * (`identityVerdict`); null when there is none. `refused`: why what the agent presents
 * was not taken.
 */
export async function dpuIdentity(
  deps: Pick<HandlerDeps, 'store' | 'agents' | 'dpuIdentities'>,
  dpuId: string,
): Promise<{ identity: string | null; refused?: string }> {
  const trusted = deps.dpuIdentities
  for (let tries = 1; ; tries++) {
    const recorded = await deps.store.dpus.identity(dpuId)
    if (!trusted) return { identity: recorded }
    const presented = await deps.agents.identityOf(dpuId)
    if (presented === undefined || presented === recorded) return { identity: recorded }
    const verdict = identityVerdict({ dpuId, presented, recorded, trusted })
    if (!verdict.take)
      return { identity: recorded, refused: `its agent presents one that ${verdict.why}` }
    // Taken only over the record it was judged against: one recorded meanwhile (newer
    // credentials, another decision) is judged again, not overwritten.
    if (await deps.store.dpus.replaceIdentity(dpuId, recorded, presented))
      return { identity: presented }
    if (tries === IDENTITY_TRIES)
      return {
        identity: await deps.store.dpus.identity(dpuId),
        refused: `its record changed ${IDENTITY_TRIES} times while the one its agent presents was judged`,
      }
  }
}

/** How many times a DPU's identity is judged again when its record changes meanwhile. */
const IDENTITY_TRIES = 3

/**
 * What an `isolate` of a host the DPU still serves carries for the group's SB
 * (`group.sbCertificate`, `group.sbCa`): the DPU's certificate from the group's current
 * chassis CA and the CA it trusts, as its `configure` would. A DPU whose certificate an
 * earlier rotation replaced (another DPU left the group) and that got no `configure` since
 * reconnects with them and shows the SB the host's port released. Nothing when the SB takes
 * the DPU's identity as it is, or when no certificate can be issued for it (no valid
 * identity on record, the group's central released): the agent then waits with what it
 * has. Only for a host still on record: a DPU that left the group is never certified for it
 * again.
 */
export async function isolateCredentialsFor(
  deps: Pick<HandlerDeps, 'ovn' | 'store' | 'agents' | 'dpuIdentities'>,
  group: string,
  dpuId: string,
): Promise<{ sbCertificate?: string; sbCa?: string }> {
  const sbCertificate = await chassisCertificateFor(deps, group, dpuId).catch((error: unknown) => {
    if (
      error instanceof ChassisIdentityRefused ||
      error instanceof DpuIdentityAwaited ||
      error instanceof CentralUnavailableError
    )
      return undefined
    throw error
  })
  if (sbCertificate === undefined) return {}
  const sbCa = await southboundCaFor(deps, group)
  return { sbCertificate, ...(sbCa ? { sbCa } : {}) }
}
