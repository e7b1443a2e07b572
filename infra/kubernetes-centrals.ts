/**
 * One OVN central per resource group, run by Kubernetes (`HYDRAZINE_OVN_CENTRAL=kubernetes`):
 * the group's first job creates its NetworkPolicy, Services and StatefulSet
 * (infra/k8s/ovn-central.ts) through the Kubernetes API, and the group's deletion deletes
 * them with their volumes, behind `OvnCentralProvider`. Kubernetes restarts a central that
 * crashes and keeps its database on its volume; nothing is held in this process, so every
 * controller replica sees the same centrals.
 *
 * Only the calls in `CentralsApi` are made, and `CENTRALS_RBAC_RULES` grants exactly
 * those (infra/k8s/controller.ts builds the Role from it).
 */
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
  deleteNetworkPolicy(namespace: string, name: string): Promise<void>
}

/** What `CentralsApi` needs of RBAC: the controller's Role (infra/k8s/controller.ts). */
export const CENTRALS_RBAC_RULES = [
  { apiGroups: ['apps'], resources: ['statefulsets'], verbs: ['create', 'get', 'list', 'delete'] },
  { apiGroups: [''], resources: ['services'], verbs: ['create', 'delete'] },
  { apiGroups: [''], resources: ['persistentvolumeclaims'], verbs: ['list', 'delete'] },
  { apiGroups: ['networking.k8s.io'], resources: ['networkpolicies'], verbs: ['create', 'delete'] },
] as const

/** What `kubernetesCentrals` needs. */
export interface KubernetesCentralsOptions extends KubernetesCentralsConfig {
  readonly api: CentralsApi
  /** Where created and deleted centrals are reported (default: nowhere). */
  readonly log?: (line: string) => void
}

/**
 * The provider of centrals Kubernetes runs.
 *
 * - `ensure(group)`: reads the group's StatefulSet; absent, creates its NetworkPolicy, its
 *   Services and the StatefulSet, in that order, so that its pods never run without the
 *   policy (an object that exists already, 409, is fine: another replica made it); not
 *   ready, creates its NetworkPolicy and Services again where they are missing.
 *   Answers its endpoints once a quorum of replicas is ready (one of one, two of three);
 *   until then, or while it is being deleted, throws a retryable CentralUnavailableError.
 *   A StatefulSet of that name that is not this group's is refused, not retried.
 * - `release(group)`: deletes the StatefulSet, the Services, the volumes and, last, the
 *   NetworkPolicy (404: gone already). Idempotent.
 * - `list()` / `groups()`: the ready centrals / every central not being deleted, found by
 *   their labels.
 *
 * @example
 * const centrals = kubernetesCentrals({ api: kubernetesCentralsApi(kc), ...config.kubernetes })
 * const { nb, sb } = await centrals.ensure('tenant-a') // tcp:ovn-tenant-a-….hydrazine.svc.cluster.local:6641
 */
export function kubernetesCentrals(options: KubernetesCentralsOptions): OvnCentralProvider {
  const { api, namespace } = options
  const log = options.log ?? (() => {})
  const need = quorum(options.replicas)

  /**
   * The group's NetworkPolicy and Services, unless they exist: the policy keeps the pods
   * closed to all but the controller and the DPUs; pods resolve each other through the
   * Services.
   */
  const createPolicyAndServices = async (group: string) => {
    const { networkPolicy, services } = centralObjects(group, options)
    await ignore(409, api.createNetworkPolicy(namespace, networkPolicy))
    for (const service of services) await ignore(409, api.createService(namespace, service))
  }

  const create = async (group: string) => {
    const volumes = await api.listPersistentVolumeClaims(namespace, centralSelector(group))
    if (volumes.some((pvc) => pvc.metadata?.deletionTimestamp !== undefined)) {
      throw unavailable(group, 'the volumes of its previous central are being deleted')
    }
    await createPolicyAndServices(group)
    const { statefulSet } = centralObjects(group, options)
    const created = await ignore(409, api.createStatefulSet(namespace, statefulSet))
    if (created) log(`central of group ${group}: created StatefulSet ${centralName(group)}`)
  }

  return {
    async ensure(group) {
      const name = centralName(group)
      let statefulSet = await call(group, () => read(api, namespace, name))
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
      if (ready < need) {
        // Not ready: a Service deleted by hand would keep it so; put it back, and the policy.
        await call(group, () => createPolicyAndServices(group))
        throw unavailable(
          group,
          `StatefulSet ${name}: ${ready} of ${options.replicas} replicas ready, ${need} needed`,
        )
      }
      return centralEndpoints(group, options)
    },

    async release(group) {
      const name = centralName(group)
      await call(group, async () => {
        await ignore(404, api.deleteStatefulSet(namespace, name))
        for (const service of [name, `${name}-peers`])
          await ignore(404, api.deleteService(namespace, service))
        const volumes = await api.listPersistentVolumeClaims(namespace, centralSelector(group))
        for (const pvc of volumes) {
          const pvcName = pvc.metadata?.name
          if (pvcName) await ignore(404, api.deletePersistentVolumeClaim(namespace, pvcName))
        }
        // Last, once its pods are being stopped: no other object of it outlives the policy.
        await ignore(404, api.deleteNetworkPolicy(namespace, name))
      })
      log(`central of group ${group} released`)
    },

    async list() {
      const found = await live(api, namespace)
      return found
        .filter((s) => (s.status?.readyReplicas ?? 0) >= need)
        .map((s) => endpointsOf(s, options))
        .filter((e): e is OvnCentralEndpoints => e !== undefined)
    },

    async groups() {
      const found = await live(api, namespace)
      return found
        .map((s) => s.metadata?.labels?.[GROUP_LABEL])
        .filter((g): g is string => g !== undefined)
        .sort()
    },
  }
}

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
async function read(
  api: CentralsApi,
  namespace: string,
  name: string,
): Promise<IStatefulSet | undefined> {
  try {
    return await api.readStatefulSet(namespace, name)
  } catch (error) {
    if (statusOf(error) === 404) return undefined
    throw error
  }
}

/** Awaits `call`; true when it succeeded, false when it failed with `status`. */
async function ignore(status: number, call: Promise<void>): Promise<boolean> {
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
    async deleteNetworkPolicy(namespace, name) {
      await networking.deleteNamespacedNetworkPolicy({ namespace, name })
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
