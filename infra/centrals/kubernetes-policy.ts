/**
 * The NetworkPolicy of a group's central run by Kubernetes (infra/centrals/kubernetes.ts):
 * brought to what the current settings build (`policyUpdate`), marked released when its
 * central is (`RELEASED_ANNOTATION`), and deleted only once the pods it protects are gone.
 */

import { isDeepStrictEqual } from 'node:util'
import type { IStatefulSet } from 'kubernetes-models/apps/v1/StatefulSet'
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy'
import type { KubernetesCentralsConfig } from '../../lib/config/kubernetes.ts'
import { GROUP_LABEL } from '../k8s/names.ts'
import {
  centralName,
  centralObjects,
  centralPodSelector,
  centralSelector,
} from '../k8s/ovn-central.ts'
import { absentOn404, type CentralsApi, ignore, statusOf } from './kubernetes-api.ts'

/**
 * On a central's NetworkPolicy: its central was released, and the policy stays only until
 * the pods it protects are gone. Only a policy marked so is ever deleted.
 */
export const RELEASED_ANNOTATION = 'hydrazine.io/released-at'

/** What `centralPolicies` needs: the API, the provider's settings, where to report. */
export interface CentralPoliciesOptions {
  readonly api: CentralsApi
  readonly settings: KubernetesCentralsConfig
  readonly log: (line: string) => void
}

/** The NetworkPolicies of a provider's centrals, in its namespace. */
export interface CentralPolicies {
  /** The stored policy, or undefined when there is none (404). */
  read(name: string): Promise<INetworkPolicy | undefined>
  /**
   * The group's NetworkPolicy as the current settings build it: created when missing,
   * replaced when it differs (or is marked released: the group is back).
   */
  apply(group: string): Promise<void>
  /** Whether this process has brought the group's policy to its settings. */
  inSync(group: string): boolean
  /** The group's policy is to be read again by the next `apply` (its central is released). */
  forget(group: string): void
  /**
   * Marks the group's policy released (a policy marked already stays as it is); answers it
   * as stored, or undefined when there is none.
   */
  markReleased(name: string): Promise<INetworkPolicy | undefined>
  /**
   * Deletes a released policy, unless it changed since it was marked (409: the group's
   * central was created again and the policy is its own) or is gone (404).
   */
  deleteReleased(policy: INetworkPolicy): Promise<'deleted' | 'gone' | 'taken back'>
  /**
   * Deletes the released policies no pod needs any more: their central's pods are gone
   * and no StatefulSet of theirs is running.
   */
  finishReleases(running: readonly IStatefulSet[]): Promise<void>
}

/**
 * The policies of the centrals in `settings.namespace`.
 *
 * @example
 * const policies = centralPolicies({ api, settings, log })
 * await policies.apply('tenant-a') // created, or replaced when the settings changed
 */
export function centralPolicies({ api, settings, log }: CentralPoliciesOptions): CentralPolicies {
  const { namespace } = settings

  const read = (name: string) => absentOn404(() => api.readNetworkPolicy(namespace, name))

  /**
   * Groups whose policy this process has brought to its settings: an `ensure` reads the
   * policy once per process (the settings change only with a restart), and reconcile
   * (`tidy`) puts back one deleted or edited by hand.
   */
  const inSync = new Set<string>()

  const apply = async (group: string) => {
    const desired = centralObjects(group, settings).networkPolicy.toJSON() as INetworkPolicy
    const name = centralName(group)
    const stored = await read(name)
    if (!stored) {
      await ignore(409, api.createNetworkPolicy(namespace, desired))
      inSync.add(group)
      return
    }
    const update = policyUpdate(stored, desired)
    // 409: another replica wrote it since it was read; the next ensure reads it again.
    if (update && (await ignore(409, api.replaceNetworkPolicy(namespace, name, update)))) {
      log(`central of group ${group}: NetworkPolicy ${name} updated to the current settings`)
    }
    inSync.add(group)
  }

  const markReleased = async (name: string): Promise<INetworkPolicy | undefined> => {
    const stored = await read(name)
    if (!stored || released(stored)) return stored
    const annotations = {
      ...stored.metadata?.annotations,
      [RELEASED_ANNOTATION]: new Date().toISOString(),
    }
    return api.replaceNetworkPolicy(namespace, name, {
      ...stored,
      metadata: { ...stored.metadata, annotations },
    })
  }

  const deleteReleased = async (
    policy: INetworkPolicy,
  ): Promise<'deleted' | 'gone' | 'taken back'> => {
    const name = policy.metadata?.name ?? ''
    const version = policy.metadata?.resourceVersion
    try {
      await api.deleteNetworkPolicy(namespace, name, version)
      return 'deleted'
    } catch (error) {
      if (statusOf(error) === 404) return 'gone'
      if (statusOf(error) === 409) return 'taken back'
      throw error
    }
  }

  const finishReleases = async (running: readonly IStatefulSet[]) => {
    const live = new Set(running.map((s) => s.metadata?.name))
    for (const policy of await api.listNetworkPolicies(namespace, centralSelector())) {
      const group = policy.metadata?.labels?.[GROUP_LABEL]
      const name = policy.metadata?.name
      if (group === undefined || name !== centralName(group)) continue
      if (!released(policy) || live.has(name)) continue
      if ((await api.listPods(namespace, centralPodSelector(group))).length > 0) continue
      if ((await deleteReleased(policy)) === 'deleted') {
        log(`central of group ${group}: its pods are gone; deleted NetworkPolicy ${name}`)
      }
    }
  }

  return {
    read,
    apply,
    inSync: (group) => inSync.has(group),
    forget: (group) => {
      inSync.delete(group)
    },
    markReleased,
    deleteReleased,
    finishReleases,
  }
}

/**
 * The policy to write so that the stored one is what `desired` says, or undefined when it
 * is already: its spec and labels as built (labels someone added stay), without the
 * released mark. The write names the stored resourceVersion, so it fails (409) rather
 * than undo a change made since the read.
 *
 * @example
 * policyUpdate(stored, desired) // undefined: in sync; else desired's spec on stored's metadata
 */
export function policyUpdate(
  stored: INetworkPolicy,
  desired: INetworkPolicy,
): INetworkPolicy | undefined {
  const labels = { ...stored.metadata?.labels, ...desired.metadata?.labels }
  const same =
    isDeepStrictEqual(plain(stored.spec), plain(desired.spec)) &&
    isDeepStrictEqual(plain(stored.metadata?.labels ?? {}), plain(labels)) &&
    !released(stored)
  if (same) return undefined
  const { annotations: storedAnnotations, ...metadata } = stored.metadata ?? {}
  const { [RELEASED_ANNOTATION]: _mark, ...annotations } = storedAnnotations ?? {}
  return {
    ...desired,
    metadata: {
      ...metadata,
      labels,
      ...(Object.keys(annotations).length > 0 ? { annotations } : {}),
    },
  }
}

/** Whether the policy is marked released (`RELEASED_ANNOTATION`). */
export const released = (policy: INetworkPolicy) =>
  policy.metadata?.annotations?.[RELEASED_ANNOTATION] !== undefined

/** As JSON carries it: fields set to undefined are no fields. */
const plain = (value: unknown): unknown =>
  value === undefined ? undefined : JSON.parse(JSON.stringify(value))
