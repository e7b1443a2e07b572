/**
 * A group's members told of a change of what they are sent, for Overlay and Fabric groups
 * alike (`group.create` of a new spec).
 */
import { redriveHost } from '../../lib/jobs/redrive.ts'
import type { ManagedResource, ResourceGroup } from '../../lib/model/objects.ts'
import type { HandlerDeps } from './deps.ts'
import { memberSettingsOf } from './network.ts'

/**
 * A new spec of a group its hosts already joined that changed what they are sent
 * (`memberSettingsOf`): each member's `host.attach` runs again (a new attempt, so its
 * `configure` is a new job for the DPU agent), and the agents get the group's settings as
 * they are now. A spec that changed only NB's part (a policy, DNS) reconfigures no one.
 * The settings are remembered once every member's new attempt started: a run cut short
 * starts them all again, which only re-sends the same settings.
 */
export async function reconfigureMembers(
  deps: Pick<HandlerDeps, 'store' | 'jobs'>,
  group: ResourceGroup,
  members: readonly ManagedResource[],
): Promise<string[]> {
  const observed = group.status.observedVersion
  const settings = memberSettingsOf(group.spec)
  if (observed >= group.specVersion) return []
  if (observed === 0 || (await deps.store.groups.memberSettingsOf(group.name)) === settings) {
    await deps.store.groups.rememberMemberSettings(group.name, settings)
    return []
  }
  const started: string[] = []
  for (const host of members) {
    const phase = ['Ready', 'Configuring'].includes(host.status.phase) ? 'Configuring' : 'Attaching'
    const id = await redriveHost(
      deps,
      host.name,
      {
        type: 'AgentConfigured',
        status: 'Unknown',
        reason: 'GroupChanged',
        message: `resource group ${group.name} changed (spec version ${group.specVersion}): DPU ${host.spec.dpu.id} is sent its settings again`,
      },
      phase,
    )
    if (id) started.push(host.name)
  }
  await deps.store.groups.rememberMemberSettings(group.name, settings)
  return started
}
