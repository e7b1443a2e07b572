/**
 * `HYDRAZINE_OVN_CENTRAL=kubernetes`: each resource group's OVN central is a StatefulSet
 * (and its Services) the controller creates through the Kubernetes API
 * (infra/centrals/kubernetes.ts). These variables say where and how:
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
 *   required unless `HYDRAZINE_K8S_CENTRAL_PLAINTEXT_SB=true` says, explicitly, that the
 *   SB is to be plaintext `tcp:` (no RBAC: every peer it admits reads every chassis row);
 * - `HYDRAZINE_K8S_CENTRAL_NB_TLS_SECRET`: a Secret (`tls.crt`, `tls.key`, `ca.crt`) whose
 *   certificate each central's NB serves over `ssl:`, admitting only client certificates
 *   of its `ca.crt` (the controller's; the SB's Secret may serve, but then every DPU
 *   certificate of that CA passes the NB's TLS, and only the NetworkPolicy keeps DPUs
 *   out); required unless `HYDRAZINE_K8S_CENTRAL_PLAINTEXT_NB=true` says, explicitly,
 *   that the NB (full write access to the tenant's topology) is to be plaintext `tcp:`.
 *   It is the central's own certificate: the SB's port for the controller (6645, full
 *   access) serves `ssl:` with it too, and raft between 3 replicas runs over `ssl:` with
 *   it (then its certificate needs `clientAuth` beside `serverAuth`, signed by its
 *   `ca.crt`). With it, the controller presents `HYDRAZINE_K8S_NB_CLIENT_CERT` / `_KEY`
 *   and trusts `HYDRAZINE_K8S_NB_CA` (files, read again on every reconnect) for the NBs
 *   and the SBs' controller port;
 * - `HYDRAZINE_K8S_DPU_CA` (with `HYDRAZINE_K8S_CENTRAL_TLS_SECRET` and the NB's): a file
 *   holding the CA certificate the DPUs' identities chain to (the SB Secret's `ca.crt`;
 *   no key). With it, each group's central checks chassis against a CA of the group's own
 *   (its relay admits that group's DPUs only), and the controller records each DPU's
 *   identity from its agent's heartbeat when that CA issued it for that DPU;
 * - `HYDRAZINE_K8S_CLUSTER_DOMAIN` (default cluster.local): remotes are fully qualified,
 *   as OVS resolves names without the pod's search domains;
 * - `HYDRAZINE_K8S_CONTROLLER_CIDRS` (required): comma-separated CIDRs (IPv4 or IPv6, no
 *   host bits, at most 32) of the nodes the controller runs on. Each central's
 *   NetworkPolicy lets only these reach its NB and the controller's SB port (full write
 *   access to the tenant's topology; plaintext with a plaintext NB). The controller runs on the host network
 *   (its FRR sidecar speaks BGP as the node), so its connections come from node addresses
 *   that no pod selector can name;
 * - `HYDRAZINE_K8S_DPU_CIDRS`: the DPUs' fabric addresses, the only ones the SB (6642)
 *   answers. Required without a TLS Secret (a plaintext SB must not be open to the
 *   cluster); with one, optional: unset, the TLS SB — which authenticates each chassis by
 *   its certificate and gives it OVN's `ovn-controller` role — is open to every address.
 *
 * @example
 * HYDRAZINE_OVN_CENTRAL=kubernetes HYDRAZINE_K8S_CENTRAL_IMAGE=registry.example/hydrazine:0.1.0 \
 *   HYDRAZINE_K8S_CONTROLLER_CIDRS=10.0.0.11/32,10.0.0.12/32 HYDRAZINE_K8S_DPU_CIDRS=172.18.0.0/24 \
 *   HYDRAZINE_K8S_CENTRAL_TLS_SECRET=ovn-sb-tls HYDRAZINE_K8S_CENTRAL_NB_TLS_SECRET=ovn-nb-tls \
 *   HYDRAZINE_K8S_NB_CLIENT_CERT=/etc/hydrazine/nb-client/tls.crt \
 *   HYDRAZINE_K8S_NB_CLIENT_KEY=/etc/hydrazine/nb-client/tls.key HYDRAZINE_K8S_NB_CA=/etc/hydrazine/nb-client/ca.crt
 */
import { readFileSync } from 'node:fs'
import { isIP } from 'node:net'
import { resolve } from 'node:path'
import IPCIDR from 'ip-cidr'
import * as v from 'valibot'
import { trustedBy } from '../pki/index.ts'
import { checkClientTls } from './client-tls.ts'

/** Where a pod finds its own namespace (the service account's projected volume). */
export const SERVICE_ACCOUNT_NAMESPACE_FILE =
  '/var/run/secrets/kubernetes.io/serviceaccount/namespace'

const DNS_LABEL = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/
const DNS_SUBDOMAIN =
  /^(?=.{1,253}$)[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/

/** The most CIDRs `HYDRAZINE_K8S_CONTROLLER_CIDRS` or `_DPU_CIDRS` may list. */
export const MAX_CIDRS = 32

/**
 * What is wrong with one network CIDR as a NetworkPolicy `ipBlock` takes it, or undefined:
 * IPv4 or IPv6, the network address itself (no host bits: `10.0.0.1/24` is refused, not
 * read as `10.0.0.0/24`), and not `/0` (that is every address, not a list of nodes).
 *
 * @example cidrProblem('10.0.0.0/24') // undefined
 */
export function cidrProblem(cidr: string): string | undefined {
  const [address = '', length = ''] = cidr.split('/')
  const version = isIP(address)
  const prefix = /^\d{1,3}$/.test(length) ? Number(length) : undefined
  const longest = version === 6 ? 128 : 32
  if (version === 0 || prefix === undefined || prefix > longest || !IPCIDR.isValidCIDR(cidr)) {
    return 'must be a CIDR like 10.0.0.0/24 or fd00::/64'
  }
  if (prefix === 0) return 'must not be /0 (every address)'
  const whole = new IPCIDR(`${address}/${version === 6 ? 128 : 32}`)
  if (new IPCIDR(cidr).start({ type: 'bigInteger' }) !== whole.start({ type: 'bigInteger' })) {
    return 'must be a network address: no host bits set after the prefix'
  }
  return undefined
}

/** One network CIDR, as `cidrProblem` takes it (the manifests' options use it too). */
export const NetworkCidr = v.pipe(
  v.string(),
  v.rawCheck(({ dataset, addIssue }) => {
    if (!dataset.typed) return
    const problem = cidrProblem(dataset.value)
    if (problem) addIssue({ message: problem })
  }),
)

/** A comma-separated list's entries, trimmed. */
export function splitCidrs(list: string): string[] {
  return list.split(',').map((entry) => entry.trim())
}

/** A variable listing 1 to `MAX_CIDRS` network CIDRs, comma-separated. */
const CidrList = v.optional(
  v.pipe(
    v.string(),
    v.rawCheck(({ dataset, addIssue }) => {
      if (!dataset.typed) return
      const entries = splitCidrs(dataset.value)
      if (entries.length > MAX_CIDRS) {
        addIssue({ message: `must list at most ${MAX_CIDRS} CIDRs, not ${entries.length}` })
        return
      }
      // The entry's position, not its value: a message never repeats a variable's value.
      entries.forEach((entry, i) => {
        const problem = entry === '' ? 'is empty' : cidrProblem(entry)
        if (problem) addIssue({ message: `comma-separated CIDRs: entry ${i + 1} ${problem}` })
      })
    }),
  ),
)

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
  HYDRAZINE_K8S_CONTROLLER_CIDRS: CidrList,
  HYDRAZINE_K8S_DPU_CIDRS: CidrList,
  HYDRAZINE_K8S_CENTRAL_PLAINTEXT_SB: v.optional(
    v.picklist(['true', 'false'], 'must be true or false'),
  ),
  HYDRAZINE_K8S_CENTRAL_NB_TLS_SECRET: v.optional(
    v.pipe(v.string(), v.regex(DNS_SUBDOMAIN, 'must be a Secret name')),
  ),
  HYDRAZINE_K8S_CENTRAL_PLAINTEXT_NB: v.optional(
    v.picklist(['true', 'false'], 'must be true or false'),
  ),
  HYDRAZINE_K8S_NB_CLIENT_CERT: v.optional(v.pipe(v.string(), v.minLength(1))),
  HYDRAZINE_K8S_NB_CLIENT_KEY: v.optional(v.pipe(v.string(), v.minLength(1))),
  HYDRAZINE_K8S_NB_CA: v.optional(v.pipe(v.string(), v.minLength(1))),
  HYDRAZINE_K8S_DPU_CA: v.optional(v.pipe(v.string(), v.minLength(1))),
}

/** The variables naming the controller's files for an `ssl:` NB, as `checkClientTls` reads them. */
const NB_CLIENT_FILES = {
  cert: 'HYDRAZINE_K8S_NB_CLIENT_CERT',
  key: 'HYDRAZINE_K8S_NB_CLIENT_KEY',
  ca: 'HYDRAZINE_K8S_NB_CA',
} as const

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
  /**
   * Secret with `tls.crt`, `tls.key`, `ca.crt`: the NB serves `ssl:`, to client
   * certificates of that `ca.crt` only. Absent only when a plaintext NB was asked for.
   */
  readonly nbTlsSecret?: string
  /**
   * The controller's certificate and key for the NBs, and the CA their server certificates
   * chain to (absolute paths): set exactly when `nbTlsSecret` is.
   */
  readonly nbClientTls?: { readonly cert: string; readonly key: string; readonly ca: string }
  readonly clusterDomain: string
  /**
   * The controller nodes' networks: the only peers of the NB and the controller's SB port
   * (the central's NetworkPolicy). Addresses, not pods: the controller is on the host network.
   */
  readonly controllerCidrs: readonly string[]
  /**
   * The DPUs' fabric networks: the only peers of the SB port. Always set without
   * `sbTlsSecret`; unset with it, the TLS SB (client certificates, `ovn-controller` role)
   * is open to every address.
   */
  readonly dpuCidrs?: readonly string[]
  /**
   * The CA certificate the DPUs' identities chain to (absolute path; the SB Secret's
   * `ca.crt`): each group's central gets a chassis CA of its own, and the DPUs' identities
   * are recorded from their agents' heartbeats. Only with `sbTlsSecret` and `nbTlsSecret`.
   */
  readonly dpuCaFile?: string
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
  if (c.HYDRAZINE_K8S_CONTROLLER_CIDRS === undefined) {
    return {
      ok: false,
      path: 'HYDRAZINE_K8S_CONTROLLER_CIDRS',
      message:
        'required with HYDRAZINE_OVN_CENTRAL=kubernetes: the CIDRs of the nodes the controller ' +
        'runs on. The controller Deployment uses hostNetwork (its FRR sidecar speaks BGP as ' +
        'the node), so its connections come from node IPs and cannot be selected by pod ' +
        "labels: only these CIDRs reach each central's NB and the controller's SB port",
    }
  }
  const plaintext = c.HYDRAZINE_K8S_CENTRAL_PLAINTEXT_SB === 'true'
  if (c.HYDRAZINE_K8S_CENTRAL_TLS_SECRET === undefined && !plaintext) {
    return {
      ok: false,
      path: 'HYDRAZINE_K8S_CENTRAL_TLS_SECRET',
      message:
        "required with HYDRAZINE_OVN_CENTRAL=kubernetes: without it each group's SB is " +
        'plaintext tcp: with no RBAC, where any peer it admits reads and writes every ' +
        'chassis row; set HYDRAZINE_K8S_CENTRAL_PLAINTEXT_SB=true to run it so anyway',
    }
  }
  if (c.HYDRAZINE_K8S_CENTRAL_TLS_SECRET !== undefined && plaintext) {
    return {
      ok: false,
      path: 'HYDRAZINE_K8S_CENTRAL_PLAINTEXT_SB',
      message: 'true only without HYDRAZINE_K8S_CENTRAL_TLS_SECRET: with it the SB serves TLS',
    }
  }
  const nb = northboundTls(c)
  if (!nb.ok) return nb
  if (
    c.HYDRAZINE_K8S_DPU_CA !== undefined &&
    (c.HYDRAZINE_K8S_CENTRAL_TLS_SECRET === undefined || !nb.tls)
  ) {
    return {
      ok: false,
      path: 'HYDRAZINE_K8S_DPU_CA',
      message:
        "only with HYDRAZINE_K8S_CENTRAL_TLS_SECRET and _NB_TLS_SECRET: a group's chassis CA " +
        'is served by its relay, which runs only beside a TLS SB and NB',
    }
  }
  if (c.HYDRAZINE_K8S_DPU_CIDRS === undefined && c.HYDRAZINE_K8S_CENTRAL_TLS_SECRET === undefined) {
    return {
      ok: false,
      path: 'HYDRAZINE_K8S_DPU_CIDRS',
      message:
        "required without HYDRAZINE_K8S_CENTRAL_TLS_SECRET: the DPUs' fabric CIDRs, the only " +
        'addresses the plaintext SB answers (it must not be open to the whole cluster)',
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
      ...(nb.tls ? { nbTlsSecret: nb.tls.secret, nbClientTls: nb.tls.client } : {}),
      clusterDomain: c.HYDRAZINE_K8S_CLUSTER_DOMAIN ?? 'cluster.local',
      controllerCidrs: splitCidrs(c.HYDRAZINE_K8S_CONTROLLER_CIDRS),
      ...(c.HYDRAZINE_K8S_DPU_CIDRS ? { dpuCidrs: splitCidrs(c.HYDRAZINE_K8S_DPU_CIDRS) } : {}),
      ...(c.HYDRAZINE_K8S_DPU_CA ? { dpuCaFile: resolve(c.HYDRAZINE_K8S_DPU_CA) } : {}),
    },
  }
}

/**
 * The NB's TLS: its Secret, or a plaintext NB said explicitly (not both), and with the
 * Secret the controller's three files, all of them (their contents: `checkNbClientTls`).
 */
function northboundTls(c: Variables):
  | {
      ok: true
      tls?: { secret: string; client: NonNullable<KubernetesCentralsConfig['nbClientTls']> }
    }
  | { ok: false; path: string; message: string } {
  const plaintext = c.HYDRAZINE_K8S_CENTRAL_PLAINTEXT_NB === 'true'
  const secret = c.HYDRAZINE_K8S_CENTRAL_NB_TLS_SECRET
  if (secret === undefined && !plaintext) {
    return {
      ok: false,
      path: 'HYDRAZINE_K8S_CENTRAL_NB_TLS_SECRET',
      message:
        "required with HYDRAZINE_OVN_CENTRAL=kubernetes: without it each group's NB, which " +
        "writes the tenant's whole topology, is plaintext tcp: that anyone reaching it may " +
        'rewrite; set HYDRAZINE_K8S_CENTRAL_PLAINTEXT_NB=true to run it so anyway',
    }
  }
  if (secret !== undefined && plaintext) {
    return {
      ok: false,
      path: 'HYDRAZINE_K8S_CENTRAL_PLAINTEXT_NB',
      message: 'true only without HYDRAZINE_K8S_CENTRAL_NB_TLS_SECRET: with it the NB serves TLS',
    }
  }
  if (secret === undefined) {
    const stray = Object.values(NB_CLIENT_FILES).find((name) => c[name] !== undefined)
    return stray === undefined
      ? { ok: true }
      : {
          ok: false,
          path: stray,
          message:
            'only with HYDRAZINE_K8S_CENTRAL_NB_TLS_SECRET: a plaintext NB takes no certificate',
        }
  }
  const client: Partial<Record<keyof typeof NB_CLIENT_FILES, string>> = {}
  for (const [part, name] of Object.entries(NB_CLIENT_FILES) as [
    keyof typeof NB_CLIENT_FILES,
    (typeof NB_CLIENT_FILES)[keyof typeof NB_CLIENT_FILES],
  ][]) {
    const file = c[name]
    if (file === undefined) {
      return {
        ok: false,
        path: name,
        message:
          'required with HYDRAZINE_K8S_CENTRAL_NB_TLS_SECRET: the NB admits a client ' +
          "certificate of its Secret's CA only, and the controller checks the NB's",
      }
    }
    client[part] = resolve(file)
  }
  const { cert = '', key = '', ca = '' } = client
  return { ok: true, tls: { secret, client: { cert, key, ca } } }
}

/** The controller's files for the NBs (`nbClientTls`), checked as `checkClientTls` does. */
export function checkNbClientTls(
  tls: NonNullable<KubernetesCentralsConfig['nbClientTls']>,
): { path: string; message: string } | undefined {
  return checkClientTls(tls, NB_CLIENT_FILES)
}

/** What is wrong with the DPUs' CA file (`dpuCaFile`): unreadable, or no certificate in it. */
export function checkDpuCa(file: string): { path: string; message: string } | undefined {
  try {
    trustedBy(readFileSync(file, 'utf8'))
    return undefined
  } catch (error) {
    const why = error instanceof Error ? error.message : String(error)
    return { path: 'HYDRAZINE_K8S_DPU_CA', message: `${file} holds no CA certificate: ${why}` }
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
