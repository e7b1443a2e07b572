import type { Job } from 'bullmq'
import { IPV6_OWNERS } from '../lib/ipam/group-network.ts'
import type { FabricIds } from '../lib/ipam/index.ts'
import { GroupJob } from '../lib/jobs/index.ts'
import { attemptOf } from '../lib/model/attempts.ts'
import {
  implementationOf,
  type ResourceGroup,
  type ResourceGroupStatus,
  setCondition,
} from '../lib/model/objects.ts'
import { CentralUnavailableError, topologyNames } from '../lib/ovn/index.ts'
import { centralWanted, noCentralStatus } from './internal/central-demand.ts'
import type { HandlerDeps } from './internal/deps.ts'
import { failOrRetry } from './internal/errors.ts'
import { provisionFabricGroup } from './internal/fabric-group.ts'
import { statusFromHosts } from './internal/group-hosts.ts'
import { reconfigureMembers } from './internal/group-members.ts'
import { defineGroupNetwork } from './internal/group-network.ts'
import { oneAtATime, parsePayload } from './internal/job.ts'
import { memberSettingsOf, relayPortNameOf } from './internal/network.ts'
import { withPoliciesOfEmptyGroup } from './internal/policies.ts'
import { setGroupStatus } from './internal/status.ts'

export interface GroupCreateResult {
  readonly group: string
  readonly observedVersion: number
  readonly ovnChanged: boolean
  /** Hosts whose `host.attach` was started again for this version (their DPUs reconfigured). */
  readonly reconfigured?: readonly string[]
  readonly skipped?: string
  /** A Fabric group: the VNI and VLAN id it holds (`internal/fabric-group.ts`). */
  readonly fabric?: FabricIds
}

type GroupCreateDeps = Pick<
  HandlerDeps,
  'store' | 'ipam' | 'groups' | 'jobs' | 'checkpoint' | 'ovn'
> &
  Partial<Pick<HandlerDeps, 'southbound' | 'centralsOnDemand'>>

/** How long a group stays Provisioning waiting for its ovn-northd before its job is retried. */
export const NORTHD_WAIT_MS = 15_000

/**
 * `group.create`: makes an Overlay group's network exist — its OVN central (via the provider),
 * its IPAM network, and its distributed switch and router in NB — and reports it Ready
 * once its ovn-northd has made them into the SB (or Configuring while a host's change is
 * on its way: `group-hosts.ts`).
 * Also the handler for a changed group spec: it converges, whatever was there. A new
 * spec of a group already provisioned (its `dhcpServer` or `extraSubnets` changed) also
 * starts a new attempt of each member's `host.attach`, so that the DPUs serving the group
 * get its new relay settings. A Fabric group takes its VNI and VLAN id and its IPAM network,
 * and its hosts' DPUs build its VRF (`internal/fabric-group.ts`). It runs while
 * no other step of the group does (`oneAtATime`): a `group.delete` waits for it.
 * With centrals on demand, a group without hosts starts no central: it is Ready with
 * `CentralRunning=False NoHosts`, and its first host's attach starts the central and
 * writes its topology (`internal/central-demand.ts`).
 */
export function createGroupCreate(deps: GroupCreateDeps) {
  const groupCreate = async (name: string, attempt: number): Promise<GroupCreateResult> => {
    const group = await deps.store.groups.get(name)
    if (!group) return { group: name, observedVersion: 0, ovnChanged: false, skipped: 'not found' }
    if (group.deletion) {
      return { group: name, observedVersion: 0, ovnChanged: false, skipped: 'being deleted' }
    }
    if (attemptOf(group.status) > attempt) {
      const skipped = `superseded by attempt ${attemptOf(group.status)}`
      return { group: name, observedVersion: 0, ovnChanged: false, skipped }
    }
    if (implementationOf(group.spec) === 'Fabric') return provisionFabricGroup(deps, group, attempt)

    await deps.checkpoint('create:defining-network')
    // A moved or removed network6 takes its hosts' SLAAC addresses back in the same step
    // (an attach still working from the old spec cannot take one again in between); each
    // member takes its new one when its attach runs again (`reconfigureMembers`).
    const released = await defineGroupNetwork(deps, group, attempt, {
      releaseDropped: IPV6_OWNERS,
    })
    if (released.length > 0) {
      await deps.store.events.record('rg', name, {
        type: 'Normal',
        reason: 'AddressesReleased',
        message: `network6 no longer holds ${released.map((r) => `${r.ip} (${r.owner})`).join(', ')}: given back`,
      })
    }
    if (!(await centralWanted(deps, name))) {
      await provisionedWithoutCentral(deps, group, attempt)
      return { group: name, observedVersion: group.specVersion, ovnChanged: false }
    }
    const { endpoints, state, result } = await deps.groups
      .apply(name)
      .then(async (applied) => {
        // Provisioning until the group's ovn-northd has made its topology into the SB:
        // before that, no chassis could bind a port of it.
        const { ports } = applied.result
        if (!deps.southbound || (ports.added.length === 0 && ports.removed.length === 0)) {
          return applied
        }
        const sb = applied.endpoints.sbController
        if (await deps.southbound.settled(sb, ports, NORTHD_WAIT_MS).catch(() => false)) {
          return applied
        }
        throw new CentralUnavailableError(
          name,
          `its ovn-northd has not made the topology into the Southbound within ${NORTHD_WAIT_MS / 1000} s; trying again`,
          { retryable: true, reason: 'NorthdPending' },
        )
      })
      .catch((error: unknown) => notApplied(deps, group, attempt, error))
    const reconfigured = await reconfigureMembers(
      deps,
      group,
      state.members.map((m) => m.host),
    )
    const relayId = group.spec.dhcpServer ? await deps.store.groups.relayIdOf(name) : undefined
    // Ready once no change is on its way to a host (`group-hosts.ts`); until then Configuring.
    const hosts = await deps.store.hosts.inGroup(name)

    await setGroupStatus(
      deps,
      name,
      // The members' count and NAT IPs are the apply's to keep (it wrote them if they changed).
      ({ dhcpCircuitId: _previous, ...current }) => {
        const provisioned: ResourceGroupStatus = {
          ...current,
          phase: 'Ready',
          conditions: setCondition(current.conditions, {
            type: 'OvnConfigured',
            status: 'True',
            reason: 'TopologyApplied',
            message: `logical switch and router of ${name} are in ${endpoints.service} OVN central`,
          }),
          softwareNetworkConfiguration: {
            ovnService: endpoints.service,
            logicalNetwork: topologyNames.switch(name),
          },
          ovnCentral: { nb: endpoints.nb, sb: endpoints.sb },
          // The relays' circuit id while the group relays DHCP; gone with its dhcpServer.
          ...(relayId !== undefined ? { dhcpCircuitId: relayPortNameOf(relayId) } : {}),
          observedVersion: group.specVersion,
          configsSynced: true,
        }
        return (
          statusFromHosts({ status: provisioned, specVersion: group.specVersion }, hosts) ??
          provisioned
        )
      },
      group.specVersion,
      attempt,
    )
    return {
      group: name,
      observedVersion: group.specVersion,
      ovnChanged: result.changed,
      ...(reconfigured.length > 0 ? { reconfigured } : {}),
    }
  }
  // One step at a time per group: a DELETE arriving meanwhile waits for this one to end.
  return (job: Job, token?: string): Promise<GroupCreateResult> => {
    const { group, attempt = 1 } = parsePayload(GroupJob, job)
    return oneAtATime(deps.store, { job, token }, 'rg', group, () => groupCreate(group, attempt))
  }
}

/**
 * An Overlay group with no host, its central on demand: its network is defined, no central
 * runs, and the group is Ready (`CentralRunning=False NoHosts`; its rules, if any, apply to
 * no one yet: `PoliciesApplied`). Its member settings are remembered as they are now: it
 * has no member to send them to.
 */
async function provisionedWithoutCentral(
  deps: GroupCreateDeps,
  group: ResourceGroup,
  attempt: number,
): Promise<void> {
  await deps.store.groups.rememberMemberSettings(group.name, memberSettingsOf(group.spec))
  const relayId = group.spec.dhcpServer ? await deps.store.groups.relayIdOf(group.name) : undefined
  await setGroupStatus(
    deps,
    group.name,
    ({ dhcpCircuitId: _previous, ...current }) => {
      const ready: ResourceGroupStatus = {
        ...withPoliciesOfEmptyGroup(current, group.name, group.spec.policies),
        phase: 'Ready',
        ...(relayId !== undefined ? { dhcpCircuitId: relayPortNameOf(relayId) } : {}),
        observedVersion: group.specVersion,
        configsSynced: true,
      }
      return noCentralStatus(ready, group.name) ?? ready
    },
    group.specVersion,
    attempt,
  )
}

/**
 * The group's topology was not applied. Its OVN central cannot answer (not started yet,
 * not configured yet): the group says why (`OvnConfigured=False`, the provider's reason)
 * and the error goes on to the queue, which retries a retryable one. An error retrying
 * cannot cure (the applier made the group Failed, saying why) fails the job at once; the
 * controller's own retries try the group again later.
 */
async function notApplied(
  deps: Pick<HandlerDeps, 'store'>,
  group: ResourceGroup,
  attempt: number,
  error: unknown,
): Promise<never> {
  if (error instanceof CentralUnavailableError && error.retryable) {
    await setGroupStatus(
      deps,
      group.name,
      (current) => ({
        ...current,
        conditions: setCondition(current.conditions, {
          type: 'OvnConfigured',
          status: 'False',
          reason: error.reason,
          message: error.message,
        }),
      }),
      group.specVersion,
      attempt,
    )
  }
  return failOrRetry(error, async () => {})
}
