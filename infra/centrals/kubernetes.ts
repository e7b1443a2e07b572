/**
 * One OVN central per resource group, run by Kubernetes (`HYDRAZINE_OVN_CENTRAL=kubernetes`):
 * the group's first job creates its NetworkPolicy, Services and StatefulSet
 * (infra/k8s/ovn-central.ts) through the Kubernetes API, every job brings its NetworkPolicy
 * up to the current settings, and the group's deletion deletes them with their volumes
 * (the policy once the pods are gone), behind `OvnCentralProvider`. Kubernetes restarts a
 * central that crashes and keeps its database on its volume; nothing is held in this
 * process, so every controller replica sees the same centrals.
 *
 * This file holds the provider's lifecycle (ensure, release, list, tidy); the API calls it
 * makes and the RBAC rules that grant exactly those are in infra/centrals/kubernetes-api.ts,
 * the NetworkPolicy's handling in infra/centrals/kubernetes-policy.ts, each group's chassis
 * CA (a Secret its SB relay serves and checks by, with `dpuCa`) in
 * infra/centrals/kubernetes-chassis.ts, and the objects of a group's central in
 * infra/k8s/ovn-central.ts.
 */

import { KubeConfig } from '@kubernetes/client-node'
import type { IStatefulSet } from 'kubernetes-models/apps/v1/StatefulSet'
import type { KubernetesCentralsConfig } from '../../lib/config/kubernetes.ts'
import { ConfigError } from '../../lib/errors.ts'
import {
  CentralUnavailableError,
  type OvnCentralEndpoints,
  type OvnCentralProvider,
} from '../../lib/ovn/central.ts'
import type { CertificateSigner } from '../../lib/pki/index.ts'
import { GROUP_LABEL } from '../k8s/names.ts'
import {
  centralEndpoints,
  centralName,
  centralObjects,
  centralPodSelector,
  centralSelector,
  centralTransport,
  quorum,
  relayOnChassisCa,
} from '../k8s/ovn-central.ts'
import { CHASSIS_CERT_MS } from './chassis-certs.ts'
import {
  absentOn404,
  type CentralsApi,
  call,
  ignore,
  kubernetesCentralsApi,
} from './kubernetes-api.ts'
import { kubernetesChassis } from './kubernetes-chassis.ts'
import { centralPolicies, released } from './kubernetes-policy.ts'

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
  /**
   * The CA of the DPUs' identities the store keeps: the operator's (`HYDRAZINE_DPU_CA_FILE`,
   * the SB Secret's `ca.crt`; the identities recorded from the agents' heartbeats), or
   * Hydrazine's when the controller issues them. Only its certificate is needed: it checks
   * that an identity is one of its. With it, a central whose DPUs' SB is a relay (TLS SB
   * and NB) checks chassis against a chassis CA of its group's own
   * (infra/centrals/kubernetes-chassis.ts); without it, against the SB Secret's CA, which
   * every group shares.
   */
  readonly dpuCa?: Pick<CertificateSigner, 'issued'>
  /** How long a chassis certificate is valid, in ms (default a day). */
  readonly chassisCertMs?: number
}

/**
 * The provider of centrals Kubernetes runs.
 *
 * - `ensure(group)`: reads the group's StatefulSet; absent, creates its NetworkPolicy, its
 *   Services, its chassis CA Secret (with `dpuCa` and a relay) and the StatefulSet, in that
 *   order, so that its pods never run without the policy (an object that exists already, 409, is fine: another replica made it); present,
 *   brings the policy to what the current settings build (`HYDRAZINE_K8S_CONTROLLER_CIDRS`
 *   and `_DPU_CIDRS` changed since it was written: replaced; missing: created) and, not
 *   ready, creates its Services again where they are missing.
 *   Answers its endpoints once a quorum of replicas is ready (one of one, two of three);
 *   until then, or while it is being deleted, throws a retryable CentralUnavailableError.
 *   A StatefulSet of that name that is not this group's is refused, not retried.
 * - `stop(group)` (the group has no host): scales its StatefulSet to 0 replicas; its
 *   volumes, Services and policy stay, and the next `ensure` scales it back to `replicas`
 *   (throwing a retryable CentralUnavailableError until a quorum is ready again).
 * - `release(group)`: marks the NetworkPolicy released, deletes the StatefulSet, the
 *   Services, the volumes and its chassis CA Secret (404: gone already), waits (bounded)
 *   for the pods to be gone and only then deletes the policy. Pods still stopping when the
 *   wait ends keep it. Idempotent.
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
  const { api, namespace, dpuCa, chassisCertMs = CHASSIS_CERT_MS, ...rest } = options
  if (!(Number.isFinite(chassisCertMs) && chassisCertMs >= 10_000))
    throw new ConfigError(
      `chassis certificates must be valid for at least 10 s (10000 ms), not ${chassisCertMs}`,
    )
  const log = options.log ?? (() => {})
  const need = quorum(options.replicas)
  // A chassis CA per group where the DPUs' SB is a relay and the DPUs' identities are known.
  const chassisCa =
    dpuCa !== undefined && options.sbTlsSecret !== undefined && options.nbTlsSecret !== undefined
  const settings = { ...rest, namespace, chassisCa }
  // How the settings have every central's pods serve (the same for every group).
  const wanted = centralTransport(centralObjects('transport', settings).statefulSet)
  const groups = async () =>
    (await live(api, namespace))
      .map((s) => s.metadata?.labels?.[GROUP_LABEL])
      .filter((g): g is string => g !== undefined)
      .sort()
  const chassis =
    chassisCa && dpuCa
      ? kubernetesChassis({ api, settings, dpuCa, validityMs: chassisCertMs, groups, log })
      : undefined

  const policies = centralPolicies({ api, settings: options, log })

  /** The Services (pods resolve each other through them), unless they exist. */
  const createServices = async (group: string) => {
    for (const service of centralObjects(group, settings).services)
      await ignore(409, api.createService(namespace, service))
  }

  const create = async (group: string) => {
    const volumes = await api.listPersistentVolumeClaims(namespace, centralSelector(group))
    if (volumes.some((pvc) => pvc.metadata?.deletionTimestamp !== undefined)) {
      throw unavailable(group, 'the volumes of its previous central are being deleted')
    }
    await policies.apply(group)
    await createServices(group)
    // Before the StatefulSet: its pods' relay mounts it.
    await chassis?.ensureSecret(group)
    const { statefulSet } = centralObjects(group, settings)
    const created = await ignore(409, api.createStatefulSet(namespace, statefulSet))
    if (created) log(`central of group ${group}: created StatefulSet ${centralName(group)}`)
  }

  /** Whether the group's pods are gone, looking until `podsGoneTimeoutMs` has passed. */
  const podsGone = async (group: string): Promise<boolean> => {
    for (let waited = 0; ; waited += podsPollMs) {
      if ((await api.listPods(namespace, centralPodSelector(group))).length === 0) return true
      if (waited >= podsGoneTimeoutMs) return false
      await sleep(podsPollMs)
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
      const serves = centralTransport(statefulSet)
      if (serves !== wanted) {
        // Its pods serve otherwise (made before the TLS settings changed); spoken to as the
        // settings say, it never answers, and answering it in plaintext would be what the
        // settings refuse.
        throw new CentralUnavailableError(
          group,
          `StatefulSet ${namespace}/${name} serves ${serves}, and the TLS settings ` +
            `(HYDRAZINE_K8S_CENTRAL_NB_TLS_SECRET, _TLS_SECRET) ask for ${wanted}: ` +
            'delete the StatefulSet; the next job of the group makes it again as the settings ' +
            'say, and its topology is written again from the store',
          { retryable: false },
        )
      }
      if (statefulSet.spec?.replicas === 0) {
        // Stopped while its group had no host: its volumes kept its databases.
        await call(group, async () => {
          await policies.apply(group)
          await api.scaleStatefulSet(namespace, name, options.replicas)
        })
        log(`central of group ${group}: StatefulSet ${name} scaled to ${options.replicas}`)
        throw unavailable(group, `StatefulSet ${name}: starting again (scaled from 0)`)
      }
      const ready = statefulSet.status?.readyReplicas ?? 0
      // Its policy, unless created just now: read once per process, and on every job
      // while the central is not ready (its pods are starting).
      if (existed && (!policies.inSync(group) || ready < need)) {
        await call(group, () => policies.apply(group))
      }
      if (ready < need) {
        // Not ready: a Service (or chassis CA) deleted by hand would keep it so; put it back.
        await call(group, async () => {
          await createServices(group)
          if (relayOnChassisCa(statefulSet)) await chassis?.ensureSecret(group)
        })
        throw unavailable(
          group,
          `StatefulSet ${name}: ${ready} of ${options.replicas} replicas ready, ${need} needed`,
        )
      }
      return centralEndpoints(group, options)
    },

    async stop(group) {
      const name = centralName(group)
      const stopped = await call(group, () => ignore(404, api.scaleStatefulSet(namespace, name, 0)))
      if (stopped) log(`central of group ${group}: StatefulSet ${name} scaled to 0 (no hosts)`)
    },

    async release(group) {
      const name = centralName(group)
      policies.forget(group)
      const outcome = await call(group, async () => {
        // Marked first: whatever fails next, tidy() knows the policy outlives its central.
        const policy = await policies.markReleased(name)
        await ignore(404, api.deleteStatefulSet(namespace, name))
        for (const service of [name, `${name}-peers`])
          await ignore(404, api.deleteService(namespace, service))
        const volumes = await api.listPersistentVolumeClaims(namespace, centralSelector(group))
        for (const pvc of volumes) {
          const pvcName = pvc.metadata?.name
          if (pvcName) await ignore(404, api.deletePersistentVolumeClaim(namespace, pvcName))
        }
        await chassis?.deleteSecret(group)
        // Last, once its pods are gone: a terminating pod still serves its NB.
        if (!policy) return 'gone'
        if (!(await podsGone(group))) return 'stopping'
        return policies.deleteReleased(policy)
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

    groups,

    ...(chassis
      ? {
          chassisCertificate: chassis.chassisCertificate,
          southboundCa: chassis.southboundCa,
          leaveChassis: chassis.leaveChassis,
          chassisCertified: chassis.chassisCertified,
          chassisRenewalsDue: chassis.chassisRenewalsDue,
        }
      : {}),

    async tidy() {
      const running = await live(api, namespace)
      // Each running central's policy as the settings build it (deleted or edited by hand:
      // put back), unless its release has begun.
      for (const s of running) {
        const group = s.metadata?.labels?.[GROUP_LABEL]
        if (group === undefined) continue
        const stored = await policies.read(centralName(group))
        if (stored && released(stored)) continue
        await policies.apply(group)
      }
      await policies.finishReleases(running)
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
function read(api: CentralsApi, namespace: string, name: string) {
  return absentOn404(() => api.readStatefulSet(namespace, name))
}

const unavailable = (group: string, why: string) =>
  new CentralUnavailableError(group, why, { retryable: true })

/**
 * The provider on the cluster this process finds: in a pod, its service account
 * (`loadFromDefault` falls back to it); elsewhere `KUBECONFIG` or `~/.kube/config`.
 */
export function openKubernetesCentrals(
  config: KubernetesCentralsConfig & Pick<KubernetesCentralsOptions, 'dpuCa' | 'chassisCertMs'>,
  log?: (line: string) => void,
): OvnCentralProvider {
  const kc = new KubeConfig()
  kc.loadFromDefault()
  return kubernetesCentrals({ ...config, api: kubernetesCentralsApi(kc), ...(log ? { log } : {}) })
}
