/**
 * The Kubernetes API as the central provider (infra/centrals/kubernetes.ts) uses it: the
 * calls it makes (`CentralsApi`), the RBAC rules that grant exactly those
 * (`CENTRALS_RBAC_RULES`, from which infra/k8s/controller.ts builds the Role), their
 * implementation through `@kubernetes/client-node`, and how a failed call reads (its HTTP
 * status; 404 and 409 as answers rather than failures).
 */

import {
  ApiException,
  AppsV1Api,
  CoreV1Api,
  type KubeConfig,
  NetworkingV1Api,
  type V1NetworkPolicy,
  type V1Secret,
  type V1Service,
  type V1StatefulSet,
} from '@kubernetes/client-node'
import { ObjectSerializer } from '@kubernetes/client-node/dist/gen/models/ObjectSerializer.js'
import type { IStatefulSet } from 'kubernetes-models/apps/v1/StatefulSet'
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy'
import type { IPersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim'
import type { ISecret } from 'kubernetes-models/v1/Secret'
import type { IService } from 'kubernetes-models/v1/Service'
import { CentralUnavailableError } from '../../lib/ovn/central.ts'

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
  /**
   * Sets the StatefulSet's replicas through its `scale` subresource (0: its pods stop, its
   * volumes stay; a group without hosts).
   */
  scaleStatefulSet(namespace: string, name: string, replicas: number): Promise<void>
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
  /** A central's chassis CA (infra/centrals/kubernetes-chassis.ts); never listed. */
  createSecret(namespace: string, body: ISecret): Promise<void>
  readSecret(namespace: string, name: string): Promise<ISecret>
  /**
   * Replaces the Secret with `body`, whose `metadata.resourceVersion` must still be the
   * stored one (409 when it changed since it was read).
   */
  replaceSecret(namespace: string, name: string, body: ISecret): Promise<void>
  deleteSecret(namespace: string, name: string): Promise<void>
}

/** What `CentralsApi` needs of RBAC: the controller's Role (infra/k8s/controller.ts). */
export const CENTRALS_RBAC_RULES = [
  { apiGroups: ['apps'], resources: ['statefulsets'], verbs: ['create', 'get', 'list', 'delete'] },
  { apiGroups: ['apps'], resources: ['statefulsets/scale'], verbs: ['update'] },
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
 * What the centrals' chassis CAs need beside `CENTRALS_RBAC_RULES`, when the controller
 * runs Hydrazine's CA (infra/centrals/kubernetes-chassis.ts): Secrets, read by name and
 * never listed or watched. A Role cannot name Secrets made at run time, so it grants these
 * on every Secret of the namespace: the manifests (whose controller runs no CA) leave them
 * out.
 */
export const CHASSIS_CA_RBAC_RULES = [
  { apiGroups: [''], resources: ['secrets'], verbs: ['create', 'get', 'update', 'delete'] },
] as const

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
    async scaleStatefulSet(namespace, name, replicas) {
      await apps.replaceNamespacedStatefulSetScale({
        namespace,
        name,
        body: { metadata: { name, namespace }, spec: { replicas } },
      })
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
    async createSecret(namespace, body) {
      await core.createNamespacedSecret({ namespace, body: fromJson<V1Secret>(body, 'V1Secret') })
    },
    async readSecret(namespace, name) {
      return toJson<ISecret>(await core.readNamespacedSecret({ namespace, name }), 'V1Secret')
    },
    async replaceSecret(namespace, name, body) {
      await core.replaceNamespacedSecret({
        namespace,
        name,
        body: fromJson<V1Secret>(body, 'V1Secret'),
      })
    },
    async deleteSecret(namespace, name) {
      await core.deleteNamespacedSecret({ namespace, name })
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

/** The HTTP status of a failed Kubernetes API call (`ApiException.code`), if it had one. */
export function statusOf(error: unknown): number | undefined {
  if (error instanceof ApiException) return error.code
  const code = (error as { code?: unknown } | null)?.code
  return typeof code === 'number' ? code : undefined
}

/** What `get` answers, or undefined when the object is not there (404). */
export async function absentOn404<T>(get: () => Promise<T>): Promise<T | undefined> {
  try {
    return await get()
  } catch (error) {
    if (statusOf(error) === 404) return undefined
    throw error
  }
}

/** Awaits `call`; true when it succeeded, false when it failed with `status`. */
export async function ignore(status: number, call: Promise<unknown>): Promise<boolean> {
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
export async function call<T>(group: string, run: () => Promise<T>): Promise<T> {
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
