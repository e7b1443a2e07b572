/**
 * Reconcile's repairs as events: a group whose NB rows it rewrote because NB differed
 * from what was applied before (`ApplyResult.drifted`) gets a `Repaired` event naming
 * them, and so does each host whose logical switch port was among them, so that
 * `…/events` says what was found wrong and mended. Rows written for the first time are
 * no repair.
 */
import { switchPortRowId, topologyNames } from '../../lib/ovn/index.ts'
import type { HandlerDeps } from './deps.ts'
import type { GroupApplied } from './group-apply.ts'

/** Rows of a repair listed in one event at most; the rest are counted. */
const LISTED_ROWS = 8

/**
 * A repair goes into the group's events (the rows it rewrote) and into the events of
 * each host whose port it rewrote, so `…/events` says what was found wrong and mended.
 */
export async function recordRepairs(
  deps: Pick<HandlerDeps, 'store'>,
  group: string,
  { result, state }: GroupApplied,
): Promise<void> {
  const rows = result.drifted
  const listed = rows.slice(0, LISTED_ROWS).join(', ')
  const more = rows.length > LISTED_ROWS ? ` and ${rows.length - LISTED_ROWS} more` : ''
  await deps.store.events.record('rg', group, {
    type: 'Warning',
    reason: 'Repaired',
    message: `OVN NB differed from the desired topology; reconcile rewrote ${listed}${more}`,
  })
  const touched = new Set(rows)
  for (const { host } of state.members) {
    const port = topologyNames.hostPort(group, host.name)
    if (!touched.has(switchPortRowId(port))) continue
    await deps.store.events.record('mr', host.name, {
      type: 'Warning',
      reason: 'Repaired',
      message: `the host's logical switch port ${port} differed from its spec in OVN NB; reconcile rewrote it`,
    })
  }
}
