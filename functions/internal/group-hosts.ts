/**
 * A group's status as its hosts make it: `Configuring` while a change is on its way to any
 * of them, `Ready` once none is (each Ready, or failed for a reason of its own), with
 * `Degraded=True HostsNotReady` naming the hosts that are not Ready for a reason of their
 * own, and `configsSynced` true only when the group's spec and every host's are in place.
 * Kept by `GroupHostsStatus` after each host's status write (coalesced per group) and by
 * every reconcile.
 */
import {
  type Condition,
  type ManagedResource,
  type ResourceGroupStatus,
  type StoredObject,
  setCondition,
} from '../../lib/model/objects.ts'
import type { HandlerDeps } from './deps.ts'
import { DPU_HEALTHY } from './dpu-observed.ts'

/** Host phases of a change on its way to the host (or off it). */
const ON_ITS_WAY = new Set(['Attaching', 'Configuring', 'Detaching'])
/** Group phases its hosts decide between; the others are the group's own steps. */
const DECIDED_BY_HOSTS = new Set(['Ready', 'Configuring'])
const DEGRADED = 'Degraded'
/** The reason this module owns on `Degraded` (the topology's own is `TopologyIncomplete`). */
export const HOSTS_NOT_READY = 'HostsNotReady'
const LISTED_HOSTS = 5

/** Why a host counts as not Ready for a reason of its own, or undefined when it is fine. */
function troubleOf(host: ManagedResource): string | undefined {
  if (host.status.phase === 'Failed') {
    const failure = host.status.conditions.filter((c) => c.status === 'False').at(-1)
    return failure ? `Failed: ${failure.reason}` : 'Failed'
  }
  const health = host.status.conditions.find((c) => c.type === DPU_HEALTHY)
  if (health?.status === 'False') return `${DPU_HEALTHY}=False: ${health.reason}`
  return undefined
}

/**
 * The group's status given its hosts, or undefined when it already says so (or the group
 * is in a step of its own: `Provisioning`, `Terminating`, `Failed`). Pure.
 *
 * @example
 * statusFromHosts(group, [attachingHost]) // { ...group.status, phase: 'Configuring', configsSynced: false }
 */
export function statusFromHosts(
  group: Pick<StoredObject<unknown, ResourceGroupStatus>, 'status' | 'specVersion' | 'deletion'>,
  hosts: readonly ManagedResource[],
): ResourceGroupStatus | undefined {
  const current = group.status
  if (group.deletion || !DECIDED_BY_HOSTS.has(current.phase)) return undefined
  // One pass: a 1,000-host group's status is refreshed several times a second while its
  // hosts change. A host isolated and on its way out of the store is no longer the group's.
  let live = 0
  let pending = 0
  let unsynced = 0
  const troubled: string[] = []
  for (const h of hosts) {
    if (h.status.phase === 'Isolated') continue
    live++
    if (ON_ITS_WAY.has(h.status.phase)) pending++
    const trouble = troubleOf(h)
    if (trouble) troubled.push(`${h.name} (${trouble})`)
    else if (!h.status.configsSynced) unsynced++
  }
  const phase = pending > 0 ? 'Configuring' : 'Ready'
  const configsSynced =
    pending === 0 && current.observedVersion === group.specVersion && unsynced === 0
  const was = current.conditions.find((c) => c.type === DEGRADED)
  let conditions: readonly Condition[] = current.conditions
  if (troubled.length > 0 && was?.reason !== 'TopologyIncomplete') {
    const listed = troubled.slice(0, LISTED_HOSTS)
    const more = troubled.length - listed.length
    const message = `${troubled.length} of ${live} hosts not Ready: ${listed.join(', ')}${more > 0 ? ` and ${more} more` : ''}`
    if (was?.reason !== HOSTS_NOT_READY || was.message !== message) {
      conditions = setCondition([...conditions], {
        type: DEGRADED,
        status: 'True',
        reason: HOSTS_NOT_READY,
        message,
      })
    }
  } else if (troubled.length === 0 && was?.reason === HOSTS_NOT_READY) {
    conditions = conditions.filter((c) => c !== was)
  }
  if (
    phase === current.phase &&
    configsSynced === current.configsSynced &&
    conditions === current.conditions
  ) {
    return undefined
  }
  return { ...current, phase, configsSynced, conditions: [...conditions] }
}

/**
 * Between two refreshes of one group's status while its hosts keep changing: a 1,000-host
 * group taking 100 attaches a second reads its hosts at most 4 times a second.
 */
export const REFRESH_GAP_MS = 250

/**
 * Keeps groups' status in line with their hosts: `touch(group)` after a host's status
 * changed refreshes the group, sharing a refresh that has not read the hosts yet: while
 * one runs, every touch shares the one that starts `REFRESH_GAP_MS` after it ends (a
 * 1,000-host attach costs a few reads of the group's hosts, not 1,000). Resolves once the
 * group's status holds the change; never rejects (`onError` hears of a failure; reconcile
 * refreshes again). Host jobs do not wait for it.
 *
 * @example
 * const follower = new GroupHostsStatus(deps)
 * await follower.touch('group-a')
 */
export class GroupHostsStatus {
  readonly #deps: Pick<HandlerDeps, 'store'>
  readonly #onError: (group: string, error: unknown) => void
  /** Per group: the refresh running, and the one queued behind it that later touches share. */
  readonly #refreshing = new Map<
    string,
    { running?: Promise<void> | undefined; next?: Promise<void> | undefined }
  >()

  constructor(
    deps: Pick<HandlerDeps, 'store'>,
    options: { readonly onError?: (group: string, error: unknown) => void } = {},
  ) {
    this.#deps = deps
    this.#onError = options.onError ?? (() => {})
  }

  /** A host of `group` changed: resolves once the group's status follows. */
  touch(group: string): Promise<void> {
    const state = this.#refreshing.get(group) ?? {}
    this.#refreshing.set(group, state)
    const start = (): Promise<void> => {
      const running = this.refresh(group)
        .catch((error: unknown) => this.#onError(group, error))
        .finally(() => {
          if (state.running === running) state.running = undefined
          if (!state.running && !state.next) this.#refreshing.delete(group)
        })
      state.running = running
      return running
    }
    if (state.next) return state.next
    if (!state.running) return start()
    state.next = state.running
      .then(() => new Promise((resolve) => setTimeout(resolve, REFRESH_GAP_MS)))
      .then(() => {
        state.next = undefined
        return start()
      })
    return state.next
  }

  /** Refreshes the group's status from its hosts now. */
  async refresh(group: string): Promise<void> {
    const { store } = this.#deps
    const hosts = await store.hosts.inGroup(group)
    await store.groups.updateStatus(group, (current) => statusFromHosts(current, hosts))
  }
}
