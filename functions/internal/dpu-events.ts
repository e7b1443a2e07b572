/**
 * A DPU's events, each for the tenant it belongs to (`StoredDpuEvent`): a DPU changes
 * tenant, and an event the controller records after that (a port of the last tenant's found
 * still bound and isolated) must not tell the next one of the last one's groups and hosts.
 */
import type { ObjectEvent } from '../../lib/model/events.ts'
import type { StateStore } from '../../lib/state/store.ts'

/**
 * Records `event` on DPU `dpuId` for the tenant it belongs to: when it names a port of a
 * group (`about.group`), that group's tenant (operators only once the group is gone); else
 * the tenant holding the DPU now (operators only when none does).
 */
export async function recordDpuEvent(
  store: Pick<StateStore, 'events' | 'dpus' | 'groups'>,
  dpuId: string,
  event: Omit<ObjectEvent, 'at'>,
  about: { readonly group?: string } = {},
): Promise<void> {
  const tenant =
    about.group !== undefined
      ? (await store.groups.get(about.group))?.spec.tenantId
      : (await store.dpus.get(dpuId))?.spec.tenantId
  await store.events.record('dpu', dpuId, { ...event, tenant: tenant ?? null })
}
