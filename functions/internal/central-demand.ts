/**
 * Centrals on demand (`HandlerDeps.centralsOnDemand`, with a provider that can `stop`): a
 * group's OVN central starts with its first host and stops once it has had none for the
 * grace period. A group's slot (`StateStore.centrals`) says whether it wants its central:
 * its first host's spec write takes it, its attach holds it (`holdCentral`) before it
 * starts the central, its last detach schedules the stop (`centralMayStop`), and
 * `central.stop` gives it back and stops the central (`central-stop.ts`).
 */
import { jobId } from '../../lib/jobs/index.ts'
import { type ResourceGroupStatus, setCondition } from '../../lib/model/objects.ts'
import { CentralUnavailableError, type OvnCentralEndpoints } from '../../lib/ovn/index.ts'
import type { HandlerDeps } from './deps.ts'

type DemandDeps = Pick<HandlerDeps, 'ovn'> & Partial<Pick<HandlerDeps, 'centralsOnDemand'>>

/** The condition saying whether a group's central runs. */
export const CENTRAL_RUNNING = 'CentralRunning'

/** Whether centrals run on demand here (else every group's runs from its creation on). */
export function onDemand(deps: DemandDeps): boolean {
  return deps.centralsOnDemand !== undefined && deps.ovn.stop !== undefined
}

/**
 * Whether the group's central should run now: always when centrals do not run on
 * demand; on demand, while the group holds its slot (it has hosts, or had one within the
 * grace period). An ensure of a group that does not would start a central nobody needs.
 */
export async function centralWanted(
  deps: DemandDeps & Pick<HandlerDeps, 'store'>,
  group: string,
): Promise<boolean> {
  return !onDemand(deps) || deps.store.centrals.holds(group)
}

/** Before an attach starts the group's central: the group holds its slot (on demand). */
export async function holdCentral(
  deps: DemandDeps & Pick<HandlerDeps, 'store'>,
  group: string,
): Promise<void> {
  if (onDemand(deps)) await deps.store.centrals.hold(group)
}

/**
 * After a host left the group for good: with no host left (on demand), the group's idle
 * mark is written and its `central.stop` scheduled for the end of the grace period. A host
 * attaching meanwhile keeps the central (the stop finds the group busy); each last detach
 * schedules its own stop, so churn within the grace period never stops it.
 */
export async function centralMayStop(
  deps: DemandDeps & Pick<HandlerDeps, 'store' | 'jobs'>,
  group: string,
  options: { readonly keepMark?: boolean } = {},
): Promise<void> {
  const demand = deps.centralsOnDemand
  if (!demand || !onDemand(deps)) return
  if (!(await deps.store.centrals.holds(group))) return
  if ((await deps.store.groups.memberCount(group)) > 0) return
  const now = Date.now()
  let since = now
  if (options.keepMark) since = await deps.store.centrals.markIdle(group, now)
  else await deps.store.centrals.idleSince(group, now)
  await deps.jobs.add('central.stop', { group, since }, jobId('central.stop', group, since), {
    delayMs: Math.max(0, since + demand.idleMs - now),
  })
}

/**
 * Stops the central of a group that holds no slot (`central.stop` gave it back, or the
 * central was started by an apply that checked the slot a moment before it went). A host
 * that takes the slot while it stops may have found the central running just before (its
 * attach's `ensure` then answered the old one): the central is started again for it. Once
 * stopped for good, the controller's connections to it go (`running`: where it ran, when
 * known) and the group reports `CentralRunning=False NoHosts`. True when it stays stopped.
 */
export async function stopUnwantedCentral(
  deps: Pick<HandlerDeps, 'store' | 'ovn' | 'nb'> & Partial<Pick<HandlerDeps, 'southbound'>>,
  group: string,
  running: OvnCentralEndpoints | undefined,
): Promise<boolean> {
  if (!deps.ovn.stop || (await deps.store.centrals.holds(group))) return false
  await deps.ovn.stop(group)
  if (await deps.store.centrals.holds(group)) {
    // Starting (retryable) is what the host's attach waits for anyway.
    await deps.ovn.ensure(group).catch((error: unknown) => {
      if (!(error instanceof CentralUnavailableError && error.retryable)) throw error
    })
    return false
  }
  if (running) {
    await deps.nb.drop(running.nb)
    await deps.southbound?.drop(running.sbController)
  }
  await deps.store.groups.updateStatus(group, (current) =>
    current.deletion ? undefined : noCentralStatus(current.status, group),
  )
  return true
}

/** The group's status while its central runs: where it is, and `CentralRunning=True`. */
export function centralRunningStatus(
  current: ResourceGroupStatus,
  endpoints: OvnCentralEndpoints,
): ResourceGroupStatus | undefined {
  const was = current.conditions.find((c) => c.type === CENTRAL_RUNNING)
  const at = current.ovnCentral
  if (was?.status === 'True' && at?.nb === endpoints.nb && at.sb === endpoints.sb) return undefined
  return {
    ...current,
    ovnCentral: { nb: endpoints.nb, sb: endpoints.sb },
    conditions: setCondition(current.conditions, {
      type: CENTRAL_RUNNING,
      status: 'True',
      reason: 'HasHosts',
      message: `its OVN central (${endpoints.service}) runs while the group has hosts`,
    }),
  }
}

/**
 * The group's status while it runs no central (no host): `CentralRunning=False NoHosts`
 * and no `ovnCentral`. Still usable: its first host starts its central.
 */
export function noCentralStatus(
  current: ResourceGroupStatus,
  group: string,
): ResourceGroupStatus | undefined {
  const was = current.conditions.find((c) => c.type === CENTRAL_RUNNING)
  if (was?.status === 'False' && current.ovnCentral === undefined) return undefined
  const { ovnCentral: _gone, ...rest } = current
  return {
    ...rest,
    conditions: setCondition(current.conditions, {
      type: CENTRAL_RUNNING,
      status: 'False',
      reason: 'NoHosts',
      message: `resource group ${group} has no hosts: its OVN central is not running; its first host starts it`,
    }),
  }
}
