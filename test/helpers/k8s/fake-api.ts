/**
 * An in-memory Kubernetes API for the central provider's tests — only because no API
 * server can run where the tests run. It behaves as the API does for what the provider
 * calls: it refuses what RBAC does not grant (403), objects that do not match their schema
 * or whose names Kubernetes would refuse (422), a name that exists (409) and a missing one
 * (404), a replace or a conditional delete whose resourceVersion is not the stored one
 * (409); a StatefulSet makes its pods and PersistentVolumeClaims as the
 * StatefulSet controller does; deletions are Foreground (a StatefulSet's pods terminate,
 * and everything being deleted stays until `settle()`). Readiness is the test's to set
 * (`setReady`).
 */
import { ApiException } from '@kubernetes/client-node'
import { type IStatefulSet, StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet'
import {
  type INetworkPolicy,
  NetworkPolicy,
} from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy'
import type { IPersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim'
import { type ISecret, Secret } from 'kubernetes-models/v1/Secret'
import { type IService, Service } from 'kubernetes-models/v1/Service'
import type { CentralsApi } from '../../../infra/centrals/kubernetes-api.ts'

export interface Rule {
  readonly apiGroups: readonly string[]
  readonly resources: readonly string[]
  readonly verbs: readonly string[]
}

type Resource =
  | 'statefulsets'
  | 'statefulsets/scale'
  | 'services'
  | 'persistentvolumeclaims'
  | 'networkpolicies'
  | 'pods'
  | 'secrets'
interface Stored {
  metadata?: {
    name?: string
    labels?: Record<string, string>
    annotations?: Record<string, string>
    deletionTimestamp?: string
    uid?: string
    resourceVersion?: string
    ownerReferences?: { kind: string; name: string }[]
  }
  spec?: unknown
  status?: object
  data?: Record<string, string>
}

const API_GROUP: Record<Resource, string> = {
  statefulsets: 'apps',
  'statefulsets/scale': 'apps',
  services: '',
  persistentvolumeclaims: '',
  networkpolicies: 'networking.k8s.io',
  pods: '',
  secrets: '',
}
const DNS_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/

export class FakeKubernetes implements CentralsApi {
  readonly objects: Record<Resource, Map<string, Stored>> = {
    statefulsets: new Map(),
    'statefulsets/scale': new Map(),
    services: new Map(),
    persistentvolumeclaims: new Map(),
    networkpolicies: new Map(),
    pods: new Map(),
    secrets: new Map(),
  }
  /** Every (resource, verb) called, as `resource/verb`. */
  readonly used = new Set<string>()
  /** The next call fails with this HTTP status (once). */
  failNext: number | undefined
  private uid = 0
  private version = 0

  constructor(private readonly rules?: readonly Rule[]) {}

  async createStatefulSet(namespace: string, body: IStatefulSet): Promise<void> {
    this.authorize('statefulsets', 'create')
    check(() => new StatefulSet(body).validate())
    const name = this.nameOf(body)
    // The StatefulSet controller labels pods `controller-revision-hash: <name>-<10>`.
    if (name.length + 11 > 63) throw new ApiException(422, `${name}: too long`, {}, {})
    for (const value of Object.values(body.metadata?.labels ?? {})) checkLabel(value)
    const stored = this.store('statefulsets', namespace, body)
    stored.status = { replicas: body.spec?.replicas ?? 1, readyReplicas: 0 }
    for (let i = 0; i < (body.spec?.replicas ?? 1); i++) {
      this.store('pods', namespace, {
        metadata: {
          name: `${name}-${i}`,
          labels: { ...body.spec?.template.metadata?.labels },
          ownerReferences: [{ kind: 'StatefulSet', name }],
        },
      })
    }
    for (const template of body.spec?.volumeClaimTemplates ?? []) {
      for (let i = 0; i < (body.spec?.replicas ?? 1); i++) {
        const claim = `${template.metadata?.name}-${name}-${i}`
        if (this.objects.persistentvolumeclaims.has(`${namespace}/${claim}`)) continue
        this.store('persistentvolumeclaims', namespace, {
          metadata: {
            name: claim,
            labels: { ...template.metadata?.labels, ...body.spec?.selector.matchLabels },
          },
        })
      }
    }
  }

  async readStatefulSet(namespace: string, name: string): Promise<IStatefulSet> {
    this.authorize('statefulsets', 'get')
    return copy(this.find('statefulsets', namespace, name)) as IStatefulSet
  }

  async listStatefulSets(namespace: string, labelSelector: string): Promise<IStatefulSet[]> {
    this.authorize('statefulsets', 'list')
    return this.select('statefulsets', namespace, labelSelector) as IStatefulSet[]
  }

  async deleteStatefulSet(namespace: string, name: string): Promise<void> {
    this.authorize('statefulsets', 'delete')
    this.markDeleted('statefulsets', namespace, name)
    for (const [key, pod] of this.objects.pods) {
      const owned = pod.metadata?.ownerReferences?.some(
        (o) => o.kind === 'StatefulSet' && o.name === name,
      )
      if (owned && key.startsWith(`${namespace}/`))
        this.markDeleted('pods', namespace, pod.metadata?.name ?? '')
    }
  }

  /**
   * The `scale` subresource: the StatefulSet's replicas change, its pods beyond them
   * terminate and those missing are made (not ready); its volumes stay.
   */
  async scaleStatefulSet(namespace: string, name: string, replicas: number): Promise<void> {
    this.authorize('statefulsets/scale', 'update')
    if (!(Number.isInteger(replicas) && replicas >= 0))
      throw new ApiException(422, `invalid replicas ${replicas}`, {}, {})
    const found = this.find('statefulsets', namespace, name)
    const spec = found.spec as { replicas?: number; template?: { metadata?: { labels?: object } } }
    spec.replicas = replicas
    found.metadata = { ...(found.metadata ?? {}), resourceVersion: `${++this.version}` }
    const ready = (found.status as { readyReplicas?: number } | undefined)?.readyReplicas ?? 0
    found.status = { replicas, readyReplicas: Math.min(ready, replicas) }
    for (let i = 0; ; i++) {
      const pod = `${name}-${i}`
      const exists = this.objects.pods.has(`${namespace}/${pod}`)
      if (i >= replicas) {
        if (!exists) break
        this.markDeleted('pods', namespace, pod)
      } else if (!exists) {
        this.store('pods', namespace, {
          metadata: {
            name: pod,
            labels: { ...(spec.template?.metadata?.labels as Record<string, string>) },
            ownerReferences: [{ kind: 'StatefulSet', name }],
          },
        })
      }
    }
  }

  async createService(namespace: string, body: IService): Promise<void> {
    this.authorize('services', 'create')
    check(() => new Service(body).validate())
    this.store('services', namespace, body)
  }

  async deleteService(namespace: string, name: string): Promise<void> {
    this.authorize('services', 'delete')
    this.find('services', namespace, name)
    this.objects.services.delete(`${namespace}/${name}`)
  }

  async listPersistentVolumeClaims(
    namespace: string,
    labelSelector: string,
  ): Promise<IPersistentVolumeClaim[]> {
    this.authorize('persistentvolumeclaims', 'list')
    return this.select(
      'persistentvolumeclaims',
      namespace,
      labelSelector,
    ) as IPersistentVolumeClaim[]
  }

  async deletePersistentVolumeClaim(namespace: string, name: string): Promise<void> {
    this.authorize('persistentvolumeclaims', 'delete')
    this.markDeleted('persistentvolumeclaims', namespace, name)
  }

  async createNetworkPolicy(namespace: string, body: INetworkPolicy): Promise<void> {
    this.authorize('networkpolicies', 'create')
    check(() => new NetworkPolicy(body).validate())
    this.store('networkpolicies', namespace, body)
  }

  async readNetworkPolicy(namespace: string, name: string): Promise<INetworkPolicy> {
    this.authorize('networkpolicies', 'get')
    return copy(this.find('networkpolicies', namespace, name)) as INetworkPolicy
  }

  async listNetworkPolicies(namespace: string, labelSelector: string): Promise<INetworkPolicy[]> {
    this.authorize('networkpolicies', 'list')
    return this.select('networkpolicies', namespace, labelSelector) as INetworkPolicy[]
  }

  async replaceNetworkPolicy(
    namespace: string,
    name: string,
    body: INetworkPolicy,
  ): Promise<INetworkPolicy> {
    this.authorize('networkpolicies', 'update')
    check(() => new NetworkPolicy(body).validate())
    if (body.metadata?.name !== name) throw new ApiException(400, `name is not ${name}`, {}, {})
    const found = this.find('networkpolicies', namespace, name)
    this.checkVersion(found, body.metadata?.resourceVersion)
    const stored = copy(body) as Stored
    stored.metadata = {
      ...stored.metadata,
      uid: found.metadata?.uid ?? '',
      resourceVersion: `${++this.version}`,
    }
    this.objects.networkpolicies.set(`${namespace}/${name}`, stored)
    return copy(stored) as INetworkPolicy
  }

  async deleteNetworkPolicy(
    namespace: string,
    name: string,
    resourceVersion?: string,
  ): Promise<void> {
    this.authorize('networkpolicies', 'delete')
    const found = this.find('networkpolicies', namespace, name)
    if (resourceVersion !== undefined) this.checkVersion(found, resourceVersion)
    this.objects.networkpolicies.delete(`${namespace}/${name}`)
  }

  async listPods(namespace: string, labelSelector: string): Promise<string[]> {
    this.authorize('pods', 'list')
    return (this.select('pods', namespace, labelSelector) as Stored[]).map(
      (pod) => pod.metadata?.name ?? '',
    )
  }

  async createSecret(namespace: string, body: ISecret): Promise<void> {
    this.authorize('secrets', 'create')
    checkSecret(body)
    this.store('secrets', namespace, body)
  }

  async readSecret(namespace: string, name: string): Promise<ISecret> {
    this.authorize('secrets', 'get')
    return copy(this.find('secrets', namespace, name)) as ISecret
  }

  async replaceSecret(namespace: string, name: string, body: ISecret): Promise<void> {
    this.authorize('secrets', 'update')
    checkSecret(body)
    if (body.metadata?.name !== name) throw new ApiException(400, `name is not ${name}`, {}, {})
    const found = this.find('secrets', namespace, name)
    this.checkVersion(found, body.metadata?.resourceVersion)
    const stored = copy(body) as Stored
    stored.metadata = {
      ...stored.metadata,
      uid: found.metadata?.uid ?? '',
      resourceVersion: `${++this.version}`,
    }
    this.objects.secrets.set(`${namespace}/${name}`, stored)
  }

  async deleteSecret(namespace: string, name: string): Promise<void> {
    this.authorize('secrets', 'delete')
    this.find('secrets', namespace, name)
    this.objects.secrets.delete(`${namespace}/${name}`)
  }

  /** Sets a StatefulSet's ready replicas, as its pods' readiness probes would. */
  setReady(namespace: string, name: string, readyReplicas: number): void {
    const found = this.objects.statefulsets.get(`${namespace}/${name}`)
    if (!found) throw new Error(`no StatefulSet ${namespace}/${name}`)
    found.status = { ...found.status, readyReplicas }
  }

  /** Finishes every deletion under way (pods terminated, volumes released). */
  settle(): void {
    for (const map of Object.values(this.objects)) {
      for (const [key, object] of map) if (object.metadata?.deletionTimestamp) map.delete(key)
    }
  }

  /**
   * Every object, by resource and name, with its uid and resourceVersion: equal snapshots,
   * nothing recreated or written.
   */
  snapshot(): string {
    const entries = Object.entries(this.objects).map(([resource, map]) => [
      resource,
      [...map].map(([key, object]) => [
        key,
        object.metadata?.uid,
        object.metadata?.resourceVersion,
      ]),
    ])
    return JSON.stringify(entries)
  }

  /** Names of the objects of a resource that exist (being deleted or not). */
  names(resource: Resource): string[] {
    return [...this.objects[resource].keys()].map((key) => key.split('/')[1] ?? key).sort()
  }

  private authorize(resource: Resource, verb: string): void {
    if (this.failNext !== undefined) {
      const code = this.failNext
      this.failNext = undefined
      throw new ApiException(code, `injected HTTP ${code}`, {}, {})
    }
    const allowed =
      this.rules === undefined ||
      this.rules.some(
        (r) =>
          r.apiGroups.includes(API_GROUP[resource]) &&
          r.resources.includes(resource) &&
          r.verbs.includes(verb),
      )
    if (!allowed) throw new ApiException(403, `forbidden: ${verb} ${resource}`, {}, {})
    this.used.add(`${resource}/${verb}`)
  }

  private nameOf(body: Stored): string {
    const name = body.metadata?.name ?? ''
    if (!DNS_LABEL.test(name)) throw new ApiException(422, `invalid name ${name}`, {}, {})
    return name
  }

  private store(resource: Resource, namespace: string, body: Stored): Stored {
    const key = `${namespace}/${this.nameOf(body)}`
    if (this.objects[resource].has(key)) throw new ApiException(409, `${key} exists`, {}, {})
    const stored = copy(body)
    stored.metadata = {
      ...(stored.metadata ?? {}),
      uid: `uid-${++this.uid}`,
      resourceVersion: `${++this.version}`,
    }
    this.objects[resource].set(key, stored)
    return stored
  }

  private find(resource: Resource, namespace: string, name: string): Stored {
    const found = this.objects[resource].get(`${namespace}/${name}`)
    if (!found) throw new ApiException(404, `${resource} ${name} not found`, {}, {})
    return found
  }

  /** A write whose resourceVersion is not the stored one is refused (409). */
  private checkVersion(found: Stored, resourceVersion: string | undefined): void {
    if (resourceVersion !== found.metadata?.resourceVersion) {
      const name = found.metadata?.name
      throw new ApiException(409, `${name}: resourceVersion ${resourceVersion} is stale`, {}, {})
    }
  }

  private markDeleted(resource: Resource, namespace: string, name: string): void {
    const found = this.find(resource, namespace, name)
    found.metadata = { ...(found.metadata ?? {}), deletionTimestamp: new Date().toISOString() }
  }

  private select(resource: Resource, namespace: string, selector: string): unknown[] {
    const wanted = selector.split(',').map((term) => term.split('=') as [string, string])
    return [...this.objects[resource]]
      .filter(([key]) => key.startsWith(`${namespace}/`))
      .map(([, object]) => object)
      .filter((object) => wanted.every(([k, v]) => object.metadata?.labels?.[k] === v))
      .map(copy)
  }
}

function check(validate: () => void): void {
  try {
    validate()
  } catch (error) {
    throw new ApiException(422, `invalid: ${(error as Error).message}`, {}, {})
  }
}

/** A Secret as the API takes it: its schema, its keys, base64 values, at most 1 MiB. */
function checkSecret(body: ISecret): void {
  check(() => new Secret(body).validate())
  let size = 0
  for (const [key, value] of Object.entries(body.data ?? {})) {
    if (!/^[-._a-zA-Z0-9]+$/.test(key)) throw new ApiException(422, `invalid key ${key}`, {}, {})
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(value))
      throw new ApiException(422, `${key}: not base64`, {}, {})
    size += Buffer.from(value, 'base64').length
  }
  if (size > 1024 * 1024) throw new ApiException(422, 'the Secret is over 1 MiB', {}, {})
}

function checkLabel(value: string): void {
  if (!LABEL_VALUE.test(value)) throw new ApiException(422, `invalid label value ${value}`, {}, {})
}

const copy = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T
