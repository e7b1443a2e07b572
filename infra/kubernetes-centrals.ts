/**
 * One OVN central per resource group, run by Kubernetes (`HYDRAZINE_OVN_CENTRAL=kubernetes`):
 * the group's first job creates its NetworkPolicy, Services and StatefulSet
 * (infra/k8s/ovn-central.ts) through the Kubernetes API, every job brings its NetworkPolicy
 * up to the current settings, and the group's deletion deletes them with their volumes
 * (the policy once the pods are gone), behind `OvnCentralProvider`. Kubernetes restarts a
 * central that crashes and keeps its database on its volume; nothing is held in this
 * process, so every controller replica sees the same centrals.
 *
 * Only the calls in `CentralsApi` are made, and `CENTRALS_RBAC_RULES` grants exactly
 * those (infra/k8s/controller.ts builds the Role from it).
 */

import { isDeepStrictEqual } from 'node:util'
import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  KubeConfig,
  NetworkingV1Api,
  type V1NetworkPolicy,
  type V1Service,
  type V1StatefulSet,
} from '@kubernetes/client-node'
import { ObjectSerializer } from '@kubernetes/client-node/dist/gen/models/ObjectSerializer.js'
import type { IStatefulSet } from 'kubernetes-models/apps/v1/StatefulSet'
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy'
import type { IPersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim'
import type { IService } from 'kubernetes-models/v1/Service'
import type { KubernetesCentralsConfig } from '../lib/config/kubernetes.ts'
import { ConfigError } from '../lib/errors.ts'
import {
  CentralUnavailableError,
  type OvnCentralEndpoints,
  type OvnCentralProvider,
} from '../lib/ovn/central.ts'
import { GROUP_LABEL } from './k8s/names.ts'
import {
  centralEndpoints,
  centralName,
  centralObjects,
  centralPodSelector,
  centralSelector,
  quorum,
} from './k8s/ovn-central.ts'

/**
 * The Kubernetes API calls the provider makes, in the namespace it is given. Each throws
 * what `@kubernetes/client-node` throws: an error whose `code` is the HTTP status (409
 * when creating a name that exists, 404 when there is no such object).
 */
export interface CentralsApi {
  createStatefulSet(namespace: string, body: IStatefulSet): Promise<void>
  readStatefulSet(namespace: string, name: string): Promise<IStatefulSet>
  listStatefulSets(namespace: string, labelSelector: string): Promise<IStatefulSet[]>
  /** Foreground: the StatefulSet stays (being deleted) until its pods are gone. */
  deleteStatefulSet(namespace: string, name: string): Promise<void>
  createService(namespace: string, body: IService): Promise<void>
  deleteService(namespace: string, name: string): Promise<void>
  listPersistentVolumeClaims(
    namespace: string,
    labelSelector: string,
  ): Promise<IPersistentVolumeClaim[]>
  deletePersistentVolumeClaim(namespace: string, name: string): Promise<void>
  createNetworkPolicy(namespace: string, body: INetworkPolicy): Promise<void>
  readNetworkPolicy(namespace: string, name: string): Promise<INetworkPolicy>
  listNetworkPolicies(namespace: string, labelSelector: string): Promise<INetworkPolicy[]>
  /**
   * Replaces the policy with `body`, whose `metadata.resourceVersion` must still be the
   * stored one (409 when it changed since it was read); answers the policy as stored.
   */
  replaceNetworkPolicy(
    namespace: string,
    name: string,
    body: INetworkPolicy,
  ): Promise<INetworkPolicy>
  /** With `resourceVersion`: only while the policy is that version (409 when it changed). */
  deleteNetworkPolicy(namespace: string, name: string, resourceVersion?: string): Promise<void>
  /** The names of the pods `labelSelector` selects, terminating ones too. */
  listPods(namespace: string, labelSelector: string): Promise<string[]>
}

/** What `CentralsApi` needs of RBAC: the controller's Role (infra/k8s/controller.ts). */
export const CENTRALS_RBAC_RULES = [
  { apiGroups: ['apps'], resources: ['statefulsets'], verbs: ['create', 'get', 'list', 'delete'] },
  { apiGroups: [''], resources: ['services'], verbs: ['create', 'delete'] },
  { apiGroups: [''], resources: ['persistentvolumeclaims'], verbs: ['list', 'delete'] },
  { apiGroups: [''], resources: ['pods'], verbs: ['list'] },
  {
    apiGroups: ['networking.k8s.io'],
    resources: ['networkpolicies'],
    verbs: ['create', 'get', 'list', 'update', 'delete'],
  },
] as const

/**
 * On a central's NetworkPolicy: its central was released, and the policy stays only until
 * the pods it protects are gone. Only a policy marked so is ever deleted.
 */
export const RELEASED_ANNOTATION = 'hydrazine.io/released-at'

/** What `kubernetesCentrals` needs. */
export interface KubernetesCentralsOptions extends KubernetesCentralsConfig {
  readonly api: CentralsApi
  /** Where created and deleted centrals are reported (default: nowhere). */
  readonly log?: (line: string) => void
  /**
   * How long `release` waits for the central's pods to be gone before it deletes their
   * NetworkPolicy (default 60 s: the pods' 30 s grace period and some), and how often it
   * looks (default 1 s). Not gone by then, the policy stays, and `tidy()` deletes it later.
   */
  readonly podsGoneTimeoutMs?: number
  readonly podsPollMs?: number
  /** How `release` waits between looks (default: a timer; tests: a stand-in clock). */
  readonly sleep?: (ms: number) => Promise<void>
}

/**
 * The provider of centrals Kubernetes runs.
 *
 * - `ensure(group)`: reads the group's StatefulSet; absent, creates its NetworkPolicy, its
 *   Services and the StatefulSet, in that order, so that its pods never run without the
 *   policy (an object that exists already, 409, is fine: another replica made it); present,
 *   brings the policy to what the current settings build (`HYDRAZINE_K8S_CONTROLLER_CIDRS`
 *   and `_DPU_CIDRS` changed since it was written: replaced; missing: created) and, not
 *   ready, creates its Services again where they are missing.
 *   Answers its endpoints once a quorum of replicas is ready (one of one, two of three);
 *   until then, or while it is being deleted, throws a retryable CentralUnavailableError.
 *   A StatefulSet of that name that is not this group's is refused, not retried.
 * - `release(group)`: marks the NetworkPolicy released, deletes the StatefulSet, the
 *   Services and the volumes (404: gone already), waits (bounded) for the pods to be gone
 *   and only then deletes the policy. Pods still stopping when the wait ends keep it.
 *   Idempotent.
 * - `list()` / `groups()`: the ready centrals / every central not being deleted, found by
 *   their labels (reads only).
 * - `tidy()`, which reconcile calls on every run, puts back each running central's policy
 *   if it was deleted or edited by hand, and finishes releases: it deletes each released
 *   policy that no pod needs any more.
 *
 * @example
 * const centrals = kubernetesCentrals({ api: kubernetesCentralsApi(kc), ...config.kubernetes })
 * const { nb, sb } = await centrals.ensure('tenant-a') // tcp:ovn-tenant-a-….hydrazine.svc.cluster.local:6641
 */
export function kubernetesCentrals({
  podsGoneTimeoutMs = 60_000,
  podsPollMs = 1_000,
  sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)),
  ...options
}: KubernetesCentralsOptions): OvnCentralProvider {
  if (!(Number.isFinite(podsGoneTimeoutMs) && podsGoneTimeoutMs >= 0))
    throw new ConfigError(`podsGoneTimeoutMs must be a number of ms >= 0, not ${podsGoneTimeoutMs}`)
  if (!(Number.isFinite(podsPollMs) && podsPollMs > 0))
    throw new ConfigError(`podsPollMs must be a positive number of ms, not ${podsPollMs}`)
  const { api, namespace } = options
  const log = options.log ?? (() => {})
  const need = quorum(options.replicas)

  /** The stored policy, or undefined when there is none (404). */
  const readPolicy = (name: string) => absentOn404(() => api.readNetworkPolicy(namespace, name))

  /**
   * The group's NetworkPolicy as the current settings build it: created when missing,
   * replaced when it differs (or is marked released: the group is back).
   */
  /**
   * Groups whose policy this process has brought to its settings: an `ensure` reads the
   * policy once per process (the settings change only with a restart), and reconcile
   * (`tidy`) puts back one deleted or edited by hand.
   */
  const inSync = new Set<string>()

  const applyPolicy = async (group: string) => {
    const desired = centralObjects(group, options).networkPolicy.toJSON() as INetworkPolicy
    const name = centralName(group)
    const stored = await readPolicy(name)
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

  /** The Services (pods resolve each other through them), unless they exist. */
  const createServices = async (group: string) => {
    for (const service of centralObjects(group, options).services)
      await ignore(409, api.createService(namespace, service))
  }

  const create = async (group: string) => {
    const volumes = await api.listPersistentVolumeClaims(namespace, centralSelector(group))
    if (volumes.some((pvc) => pvc.metadata?.deletionTimestamp !== undefined)) {
      throw unavailable(group, 'the volumes of its previous central are being deleted')
    }
    await applyPolicy(group)
    await createServices(group)
    const { statefulSet } = centralObjects(group, options)
    const created = await ignore(409, api.createStatefulSet(namespace, statefulSet))
    if (created) log(`central of group ${group}: created StatefulSet ${centralName(group)}`)
  }

  /**
   * Marks the group's policy released (a policy marked already stays as it is); answers it
   * as stored, or undefined when there is none.
   */
  const markReleased = async (name: string): Promise<INetworkPolicy | undefined> => {
    const stored = await readPolicy(name)
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

  /** Whether the group's pods are gone, looking until `podsGoneTimeoutMs` has passed. */
  const podsGone = async (group: string): Promise<boolean> => {
    for (let waited = 0; ; waited += podsPollMs) {
      if ((await api.listPods(namespace, centralPodSelector(group))).length === 0) return true
      if (waited >= podsGoneTimeoutMs) return false
      await sleep(podsPollMs)
    }
  }

  /**
   * Deletes a released policy, unless it changed since it was marked (409: the group's
   * central was created again and the policy is its own) or is gone (404).
   */
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

  /**
   * Deletes the released policies no pod needs any more: their central's pods are gone
   * and no StatefulSet of theirs is running.
   */
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
    async ensure(group) {
      const name = centralName(group)
      let statefulSet = await call(group, () => read(api, namespace, name))
      const existed = statefulSet !== undefined
      if (!statefulSet) {
        await call(group, () => create(group))
        statefulSet = await call(group, () => read(api, namespace, name))
        if (!statefulSet) throw unavailable(group, `StatefulSet ${name} was deleted meanwhile`)
      }
      const owner = statefulSet.metadata?.labels?.[GROUP_LABEL]
      const ours = statefulSet.metadata?.labels?.['app.kubernetes.io/managed-by'] === 'hydrazine'
      if (!ours || owner !== group) {
        throw new CentralUnavailableError(
          group,
          `StatefulSet ${namespace}/${name} belongs to ${ours ? `group ${owner}` : 'someone else'}`,
          { retryable: false },
        )
      }
      if (statefulSet.metadata?.deletionTimestamp !== undefined) {
        throw unavailable(group, `StatefulSet ${name} is being deleted`)
      }
      const ready = statefulSet.status?.readyReplicas ?? 0
      // Its policy, unless created just now: read once per process, and on every job
      // while the central is not ready (its pods are starting).
      if (existed && (!inSync.has(group) || ready < need)) {
        await call(group, () => applyPolicy(group))
      }
      if (ready < need) {
        // Not ready: a Service deleted by hand would keep it so; put it back.
        await call(group, () => createServices(group))
        throw unavailable(
          group,
          `StatefulSet ${name}: ${ready} of ${options.replicas} replicas ready, ${need} needed`,
        )
      }
      return centralEndpoints(group, options)
    },

    async release(group) {
      const name = centralName(group)
      inSync.delete(group)
      const outcome = await call(group, async () => {
        // Marked first: whatever fails next, tidy() knows the policy outlives its central.
        const policy = await markReleased(name)
        await ignore(404, api.deleteStatefulSet(namespace, name))
        for (const service of [name, `${name}-peers`])
          await ignore(404, api.deleteService(namespace, service))
        const volumes = await api.listPersistentVolumeClaims(namespace, centralSelector(group))
        for (const pvc of volumes) {
          const pvcName = pvc.metadata?.name
          if (pvcName) await ignore(404, api.deletePersistentVolumeClaim(namespace, pvcName))
        }
        // Last, once its pods are gone: a terminating pod still serves its NB.
        if (!policy) return 'gone'
        if (!(await podsGone(group))) return 'stopping'
        return deleteReleased(policy)
      })
      log(
        outcome === 'stopping'
          ? `central of group ${group} released; its pods are still stopping, so NetworkPolicy ${name} stays until they are gone (reconcile deletes it then)`
          : outcome === 'taken back'
            ? `central of group ${group} released; its NetworkPolicy ${name} was taken back by a new central of the group meanwhile, and stays`
            : `central of group ${group} released`,
      )
    },

    async list() {
      const found = await live(api, namespace)
      return found
        .filter((s) => (s.status?.readyReplicas ?? 0) >= need)
        .map((s) => endpointsOf(s, options))
        .filter((e): e is OvnCentralEndpoints => e !== undefined)
    },

    async groups() {
      return (await live(api, namespace))
        .map((s) => s.metadata?.labels?.[GROUP_LABEL])
        .filter((g): g is string => g !== undefined)
        .sort()
    },

    async tidy() {
      const running = await live(api, namespace)
      // Each running central's policy as the settings build it (deleted or edited by hand:
      // put back), unless its release has begun.
      for (const s of running) {
        const group = s.metadata?.labels?.[GROUP_LABEL]
        if (group === undefined) continue
        const stored = await readPolicy(centralName(group))
        if (stored && released(stored)) continue
        await applyPolicy(group)
      }
      await finishReleases(running)
    },
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

const released = (policy: INetworkPolicy) =>
  policy.metadata?.annotations?.[RELEASED_ANNOTATION] !== undefined

/** As JSON carries it: fields set to undefined are no fields. */
const plain = (value: unknown): unknown =>
  value === undefined ? undefined : JSON.parse(JSON.stringify(value))

/** The StatefulSets of centrals that are not being deleted. */
async function live(api: CentralsApi, namespace: string): Promise<IStatefulSet[]> {
  const all = await api.listStatefulSets(namespace, centralSelector())
  return all.filter((s) => s.metadata?.deletionTimestamp === undefined)
}

function endpointsOf(
  statefulSet: IStatefulSet,
  settings: KubernetesCentralsConfig,
): OvnCentralEndpoints | undefined {
  const group = statefulSet.metadata?.labels?.[GROUP_LABEL]
  // A StatefulSet someone labelled like ours under another name is not a central of ours.
  if (group === undefined || statefulSet.metadata?.name !== centralName(group)) return undefined
  return centralEndpoints(group, settings)
}

/** The StatefulSet, or undefined when there is none (404). */
function read(api: CentralsApi, namespace: string, name: string) {
  return absentOn404(() => api.readStatefulSet(namespace, name))
}

/** What `get` answers, or undefined when the object is not there (404). */
async function absentOn404<T>(get: () => Promise<T>): Promise<T | undefined> {
  try {
    return await get()
  } catch (error) {
    if (statusOf(error) === 404) return undefined
    throw error
  }
}

/** Awaits `call`; true when it succeeded, false when it failed with `status`. */
async function ignore(status: number, call: Promise<unknown>): Promise<boolean> {
  try {
    await call
    return true
  } catch (error) {
    if (statusOf(error) === status) return false
    throw error
  }
}

/**
 * Runs API calls for `group`; a failure becomes a CentralUnavailableError: retryable
 * unless the API refused the request itself (401, 403: RBAC; 400, 422: an object it
 * cannot take), which no retry changes.
 */
async function call<T>(group: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run()
  } catch (error) {
    if (error instanceof CentralUnavailableError) throw error
    const status = statusOf(error)
    const permanent = status === 400 || status === 401 || status === 403 || status === 422
    const why =
      status === undefined
        ? 'the Kubernetes API did not answer'
        : `the Kubernetes API answered HTTP ${status}`
    throw new CentralUnavailableError(group, why, {
      retryable: !permanent,
      cause: error,
    })
  }
}

const unavailable = (group: string, why: string) =>
  new CentralUnavailableError(group, why, { retryable: true })

/** The HTTP status of a failed Kubernetes API call (`ApiException.code`), if it had one. */
export function statusOf(error: unknown): number | undefined {
  if (error instanceof ApiException) return error.code
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'number' ? code : undefined
}

/**
 * The provider on the cluster this process finds: in a pod, its service account
 * (`loadFromDefault` falls back to it); elsewhere `KUBECONFIG` or `~/.kube/config`.
 */
export function openKubernetesCentrals(
  config: KubernetesCentralsConfig,
  log?: (line: string) => void,
): OvnCentralProvider {
  const kc = new KubeConfig()
  kc.loadFromDefault()
  return kubernetesCentrals({ ...config, api: kubernetesCentralsApi(kc), ...(log ? { log } : {}) })
}

/**
 * `CentralsApi` through `@kubernetes/client-node`, with the cluster `kc` names (in a pod:
 * `kc.loadFromCluster()`, the service account's token).
 */
export function kubernetesCentralsApi(kc: KubeConfig): CentralsApi {
  const apps = kc.makeApiClient(AppsV1Api)
  const core = kc.makeApiClient(CoreV1Api)
  const networking = kc.makeApiClient(NetworkingV1Api)
  return {
    async createStatefulSet(namespace, body) {
      await apps.createNamespacedStatefulSet({
        namespace,
        body: fromJson<V1StatefulSet>(body, 'V1StatefulSet'),
      })
    },
    async readStatefulSet(namespace, name) {
      const found = await apps.readNamespacedStatefulSet({ namespace, name })
      return toJson<IStatefulSet>(found, 'V1StatefulSet')
    },
    async listStatefulSets(namespace, labelSelector) {
      const list = await apps.listNamespacedStatefulSet({ namespace, labelSelector })
      return list.items.map((s) => toJson<IStatefulSet>(s, 'V1StatefulSet'))
    },
    async deleteStatefulSet(namespace, name) {
      await apps.deleteNamespacedStatefulSet({ namespace, name, propagationPolicy: 'Foreground' })
    },
    async createService(namespace, body) {
      await core.createNamespacedService({
        namespace,
        body: fromJson<V1Service>(body, 'V1Service'),
      })
    },
    async deleteService(namespace, name) {
      await core.deleteNamespacedService({ namespace, name })
    },
    async listPersistentVolumeClaims(namespace, labelSelector) {
      const list = await core.listNamespacedPersistentVolumeClaim({ namespace, labelSelector })
      return list.items.map((c) => toJson<IPersistentVolumeClaim>(c, 'V1PersistentVolumeClaim'))
    },
    async deletePersistentVolumeClaim(namespace, name) {
      await core.deleteNamespacedPersistentVolumeClaim({ namespace, name })
    },
    async createNetworkPolicy(namespace, body) {
      await networking.createNamespacedNetworkPolicy({
        namespace,
        body: fromJson<V1NetworkPolicy>(body, 'V1NetworkPolicy'),
      })
    },
    async readNetworkPolicy(namespace, name) {
      const found = await networking.readNamespacedNetworkPolicy({ namespace, name })
      return toJson<INetworkPolicy>(found, 'V1NetworkPolicy')
    },
    async listNetworkPolicies(namespace, labelSelector) {
      const list = await networking.listNamespacedNetworkPolicy({ namespace, labelSelector })
      return list.items.map((p) => toJson<INetworkPolicy>(p, 'V1NetworkPolicy'))
    },
    async replaceNetworkPolicy(namespace, name, body) {
      const stored = await networking.replaceNamespacedNetworkPolicy({
        namespace,
        name,
        body: fromJson<V1NetworkPolicy>(body, 'V1NetworkPolicy'),
      })
      return toJson<INetworkPolicy>(stored, 'V1NetworkPolicy')
    },
    async deleteNetworkPolicy(namespace, name, resourceVersion) {
      await networking.deleteNamespacedNetworkPolicy({
        namespace,
        name,
        ...(resourceVersion === undefined ? {} : { body: { preconditions: { resourceVersion } } }),
      })
    },
    async listPods(namespace, labelSelector) {
      const list = await core.listNamespacedPod({ namespace, labelSelector })
      return list.items.map((pod) => pod.metadata?.name ?? '')
    },
  }
}

/**
 * An object as the API's JSON (client-node's typed object → kubernetes-models' shape),
 * and back: client-node (de)serializes by its own type map, the same fields by name.
 */
export function toJson<T>(value: unknown, type: string): T {
  return ObjectSerializer.serialize(value, type, '')
}
export function fromJson<T>(json: unknown, type: string): T {
  return ObjectSerializer.deserialize(json, type, '')
}
