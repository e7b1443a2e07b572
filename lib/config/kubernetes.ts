/**
 * `HYDRAZINE_OVN_CENTRAL=kubernetes`: each resource group's OVN central is a StatefulSet
 * (and its Services) the controller creates through the Kubernetes API
 * (infra/kubernetes-centrals.ts). These variables say where and how:
 *
 * - `HYDRAZINE_K8S_NAMESPACE`: where the centrals live (default: the pod's own namespace,
 *   read from the service account's `namespace` file, else `hydrazine`);
 * - `HYDRAZINE_K8S_CENTRAL_IMAGE` (required): the image holding `ovsdb-server` and
 *   `ovn-northd` (infra/k8s/Containerfile builds one);
 * - `HYDRAZINE_K8S_CENTRAL_REPLICAS` (1 or 3, default 1): one server with its volume, or
 *   three in a raft cluster;
 * - `HYDRAZINE_K8S_CENTRAL_STORAGE` (default 1Gi) and `_STORAGE_CLASS` (default: the
 *   cluster's): each replica's volume;
 * - `HYDRAZINE_K8S_CENTRAL_TLS_SECRET`: a Secret (`tls.crt`, `tls.key`, `ca.crt`) whose
 *   certificate the SB serves to DPUs over `ssl:` with OVN's `ovn-controller` RBAC role;
 *   unset, the SB is plaintext `tcp:`;
 * - `HYDRAZINE_K8S_CLUSTER_DOMAIN` (default cluster.local): remotes are fully qualified,
 *   as OVS resolves names without the pod's search domains.
 *
 * @example
 * HYDRAZINE_OVN_CENTRAL=kubernetes HYDRAZINE_K8S_CENTRAL_IMAGE=registry.example/hydrazine:0.1.0
 */
import { readFileSync } from 'node:fs'
import * as v from 'valibot'

/** Where a pod finds its own namespace (the service account's projected volume). */
export const SERVICE_ACCOUNT_NAMESPACE_FILE =
  '/var/run/secrets/kubernetes.io/serviceaccount/namespace'

const DNS_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/
const DNS_SUBDOMAIN =
  /^(?=.{1,253}$)[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/

/** The variables, as `loadConfig`'s schema takes them (all optional strings). */
export const KubernetesVariables = {
  HYDRAZINE_K8S_NAMESPACE: v.optional(
    v.pipe(v.string(), v.regex(DNS_LABEL, 'must be a Kubernetes namespace name (RFC 1123 label)')),
  ),
  HYDRAZINE_K8S_CENTRAL_IMAGE: v.optional(
    v.pipe(v.string(), v.regex(/^[^\s]+$/, 'must be a container image reference')),
  ),
  HYDRAZINE_K8S_CENTRAL_REPLICAS: v.optional(
    v.picklist(['1', '3'], 'must be 1 (one server) or 3 (a raft cluster)'),
  ),
  HYDRAZINE_K8S_CENTRAL_STORAGE: v.optional(
    v.pipe(
      v.string(),
      v.regex(/^[1-9]\d*(Ki|Mi|Gi|Ti)$/, 'must be a storage size like 512Mi or 1Gi'),
    ),
  ),
  HYDRAZINE_K8S_CENTRAL_STORAGE_CLASS: v.optional(
    v.pipe(v.string(), v.regex(DNS_SUBDOMAIN, 'must be a StorageClass name')),
  ),
  HYDRAZINE_K8S_CENTRAL_TLS_SECRET: v.optional(
    v.pipe(v.string(), v.regex(DNS_SUBDOMAIN, 'must be a Secret name')),
  ),
  HYDRAZINE_K8S_CLUSTER_DOMAIN: v.optional(
    v.pipe(v.string(), v.regex(DNS_SUBDOMAIN, 'must be a DNS domain like cluster.local')),
  ),
}

type Variables = {
  readonly [K in keyof typeof KubernetesVariables]?: string | undefined
} & { readonly OVN_NB_DB?: string | undefined }

/** How the `kubernetes` provider runs each group's central. */
export interface KubernetesCentralsConfig {
  readonly namespace: string
  readonly image: string
  /** 1: one ovsdb-server per database with its volume; 3: a raft cluster of each. */
  readonly replicas: 1 | 3
  /** Each replica's volume, e.g. `1Gi`. */
  readonly storage: string
  readonly storageClassName?: string
  /** Secret with `tls.crt`, `tls.key`, `ca.crt`: the SB serves `ssl:` to DPUs. */
  readonly sbTlsSecret?: string
  readonly clusterDomain: string
}

/**
 * The `kubernetes` provider's settings from the variables, or the variable that is wrong
 * and why: they belong to `HYDRAZINE_OVN_CENTRAL=kubernetes` only, which needs an image
 * and no `OVN_NB_DB` (one central every group shares).
 */
export function kubernetesConfig(
  ovnCentral: string,
  c: Variables,
  readNamespace: () => string | undefined = () => inClusterNamespace(),
):
  | { ok: true; kubernetes: KubernetesCentralsConfig | undefined }
  | { ok: false; path: string; message: string } {
  if (ovnCentral !== 'kubernetes') {
    const stray = (Object.keys(KubernetesVariables) as (keyof Variables)[]).find(
      (key) => c[key] !== undefined,
    )
    if (stray === undefined) return { ok: true, kubernetes: undefined }
    return {
      ok: false,
      path: stray,
      message: `configures Kubernetes centrals: only with HYDRAZINE_OVN_CENTRAL=kubernetes, not ${ovnCentral}`,
    }
  }
  if (c.OVN_NB_DB !== undefined) {
    return {
      ok: false,
      path: 'HYDRAZINE_OVN_CENTRAL',
      message:
        'kubernetes centrals are created per group: not with OVN_NB_DB / OVN_SB_DB (one ' +
        'central every group shares: HYDRAZINE_OVN_CENTRAL=shared)',
    }
  }
  if (c.HYDRAZINE_K8S_CENTRAL_IMAGE === undefined) {
    return {
      ok: false,
      path: 'HYDRAZINE_K8S_CENTRAL_IMAGE',
      message: 'required with HYDRAZINE_OVN_CENTRAL=kubernetes: the image each central runs',
    }
  }
  return {
    ok: true,
    kubernetes: {
      namespace: c.HYDRAZINE_K8S_NAMESPACE ?? readNamespace() ?? 'hydrazine',
      image: c.HYDRAZINE_K8S_CENTRAL_IMAGE,
      replicas: c.HYDRAZINE_K8S_CENTRAL_REPLICAS === '3' ? 3 : 1,
      storage: c.HYDRAZINE_K8S_CENTRAL_STORAGE ?? '1Gi',
      ...(c.HYDRAZINE_K8S_CENTRAL_STORAGE_CLASS
        ? { storageClassName: c.HYDRAZINE_K8S_CENTRAL_STORAGE_CLASS }
        : {}),
      ...(c.HYDRAZINE_K8S_CENTRAL_TLS_SECRET
        ? { sbTlsSecret: c.HYDRAZINE_K8S_CENTRAL_TLS_SECRET }
        : {}),
      clusterDomain: c.HYDRAZINE_K8S_CLUSTER_DOMAIN ?? 'cluster.local',
    },
  }
}

/** The namespace of the pod this process runs in, when it runs in one with a service account. */
export function inClusterNamespace(file = SERVICE_ACCOUNT_NAMESPACE_FILE): string | undefined {
  try {
    const namespace = readFileSync(file, 'utf8').trim()
    return DNS_LABEL.test(namespace) ? namespace : undefined
  } catch {
    return undefined
  }
}
