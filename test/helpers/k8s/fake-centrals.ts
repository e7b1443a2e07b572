/**
 * The Kubernetes central provider (infra/centrals/kubernetes.ts) on the fake API, for its
 * tests: the settings they share, a provider whose waits take no time, and what they read
 * back (a group's NetworkPolicy, its pods, why an ensure was refused).
 */
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy'
import {
  type KubernetesCentralsOptions,
  kubernetesCentrals,
} from '../../../infra/centrals/kubernetes.ts'
import { centralName } from '../../../infra/k8s/ovn-central.ts'
import type { KubernetesCentralsConfig } from '../../../lib/config/kubernetes.ts'
import { CentralUnavailableError } from '../../../lib/ovn/central.ts'
import { FakeKubernetes, type Rule } from './fake-api.ts'
import type { Source } from './fake-network-plugin.ts'

export const NS = 'hydrazine'
export const settings: KubernetesCentralsConfig = {
  namespace: NS,
  image: 'registry.example/hydrazine:0.1.0',
  replicas: 1,
  storage: '1Gi',
  clusterDomain: 'cluster.local',
  controllerCidrs: ['10.0.0.0/24'],
  dpuCidrs: ['172.18.0.0/24'],
}

/**
 * A provider on a fake API. Its waits take no time: `release` gives up on pods that do not
 * stop after its 60 looks, at once; `whileWaiting` runs at each look (pods stopping, …).
 */
export function setup(
  overrides: Partial<Omit<KubernetesCentralsOptions, 'api'>> = {},
  rules?: readonly Rule[],
  api = new FakeKubernetes(rules),
) {
  const hooks: { whileWaiting?: () => Promise<void> | void } = {}
  const sleep = async () => hooks.whileWaiting?.()
  const centrals = kubernetesCentrals({ ...settings, sleep, ...overrides, api })
  const ready = (group: string, n = 1) => api.setReady(NS, centralName(group), n)
  return { api, centrals, ready, hooks }
}

/** The group's NetworkPolicy as stored, or undefined. */
export function storedPolicy(api: FakeKubernetes, group: string): INetworkPolicy | undefined {
  return api.objects.networkpolicies.get(`${NS}/${centralName(group)}`) as
    | INetworkPolicy
    | undefined
}

/** The pods of the group's central: how many, and how many are terminating. */
export function podsOf(api: FakeKubernetes, group: string) {
  const pods = [...api.objects.pods.values()].filter((pod) =>
    pod.metadata?.name?.startsWith(`${centralName(group)}-`),
  )
  return {
    pods: pods.length,
    terminating: pods.filter((p) => p.metadata?.deletionTimestamp).length,
  }
}

export const controllerNode: Source = { ip: '10.0.0.11' }
export const tenantPod: Source = { ip: '10.244.3.7' }

/** What ensure threw, or undefined when it answered. */
export async function refusal(
  promise: Promise<unknown>,
): Promise<CentralUnavailableError | undefined> {
  try {
    await promise
    return undefined
  } catch (error) {
    if (error instanceof CentralUnavailableError) return error
    throw error
  }
}
