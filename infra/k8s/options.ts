/**
 * What the generated manifests are made from: one typed object, every field with a
 * default, validated (valibot) before anything is built. `npm run k8s -- --config FILE`
 * reads it as JSON; any part may be left out but `centrals.controllerCidrs`,
 * `centrals.sbTlsSecret` or `centrals.plaintextSouthbound: true` (then `centrals.dpuCidrs`
 * too), and `centrals.nbTlsSecret` or `centrals.plaintextNorthbound: true`: who may reach
 * the groups' centrals, and how.
 *
 * @example
 * parseManifestOptions({ image: 'registry.example/hydrazine:0.1.0',
 *   centrals: { controllerCidrs: ['10.0.0.0/24'], sbTlsSecret: 'hydrazine-ovn-sb-tls',
 *     nbTlsSecret: 'hydrazine-ovn-nb-tls' },
 *   dpus: [{ id: 'dpu-1', node: 'dpu-1.example', fabricIps: ['172.18.0.11'], hostPorts: ['pf0hpf'] }] })
 */
import { isIPv4 } from 'node:net'
import * as v from 'valibot'
import { DpuId } from '../../lib/agent-protocol/index.ts'
import { MAX_CIDRS, NetworkCidr } from '../../lib/config/kubernetes.ts'
import { ConfigError } from '../../lib/errors.ts'
import packageJson from '../../package.json' with { type: 'json' }

const dnsLabel = v.pipe(
  v.string(),
  v.regex(/^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$/, 'must be an RFC 1123 label'),
)
const dnsSubdomain = v.pipe(
  v.string(),
  v.regex(
    /^(?=.{1,253}$)[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/,
    'must be a DNS subdomain (a Kubernetes object name)',
  ),
)
const port = v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(65535))
const envName = v.pipe(v.string(), v.regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be a variable name'))
const ipv4 = v.pipe(v.string(), v.check(isIPv4, 'must be an IPv4 address'))
const labels = v.record(v.string(), v.string())
/** Why `centrals.controllerCidrs` must be given. */
const CONTROLLER_CIDRS =
  'the CIDRs of the nodes the controller runs on (it is on the host network: only these ' +
  "reach the centrals' NB and the controller's SB port)"
const cidrs = v.pipe(
  v.array(NetworkCidr),
  v.minLength(1, 'must list at least one CIDR'),
  v.maxLength(MAX_CIDRS, `must list at most ${MAX_CIDRS} CIDRs`),
)

/** One DPU: the node it is, and what its agent needs to know (agent/config-options.ts). */
const Dpu = v.object({
  /** The DPU id (`HZ_DPU_ID`), as the inventory and its credentials name it. */
  id: DpuId,
  /** The Kubernetes node that is this DPU (`metadata.name` of the Node). */
  node: dnsSubdomain,
  /** `HZ_FABRIC_IPS`: the first is the Geneve encap IP. */
  fabricIps: v.pipe(v.array(ipv4), v.minLength(1)),
  /** `HZ_HOST_PORTS`: the only interfaces its hosts may be bound to. */
  hostPorts: v.pipe(v.array(v.pipe(v.string(), v.minLength(1))), v.minLength(1)),
  /** The Secret holding its credentials (default `hydrazine-dpu-<id>`, see agent.ts). */
  secret: v.optional(dnsSubdomain),
  /** More of the agent's variables (`HZ_RELAY_UPLINK_IPS`, `HZ_UPLINK_INTERFACE`, …). */
  env: v.optional(v.record(envName, v.string()), {}),
})

export const ManifestOptionsSchema = v.object(
  {
    /** Where the controller and the agents live (the centrals: `centrals.namespace`). */
    namespace: v.optional(dnsLabel, 'hydrazine'),
    /** Generate the Namespace itself (off when it is made elsewhere). */
    createNamespace: v.optional(v.boolean(), true),
    /** Hydrazine's image (infra/k8s/Containerfile): controller, FRR, agents and centrals. */
    image: v.optional(
      v.pipe(v.string(), v.regex(/^\S+$/, 'must be an image reference')),
      `hydrazine:${packageJson.version}`,
    ),
    imagePullPolicy: v.optional(v.picklist(['Always', 'IfNotPresent', 'Never']), 'IfNotPresent'),
    controller: v.optional(
      v.object({
        /** At least two: one may be drained or upgraded while the other serves. */
        replicas: v.optional(v.pipe(v.number(), v.integer(), v.minValue(2)), 2),
        httpPort: v.optional(port, 8080),
        grpcPort: v.optional(port, 8081),
        metricsPort: v.optional(port, 9464),
        /** Nodes with a leg on the fabric (BGP): the controller runs on the host network. */
        nodeSelector: v.optional(labels, {}),
        /** More controller variables (`HYDRAZINE_DHCP_SERVERS`, `HYDRAZINE_FABRIC_GATEWAY`, …). */
        env: v.optional(v.record(envName, v.string()), {}),
      }),
      {},
    ),
    /** The Secrets the operator creates ("Secrets" in infra/k8s/README.md); names only. */
    secrets: v.optional(
      v.object({
        /** Key `url`: `REDIS_URL` (`rediss://…` or `redis+cluster://…`). */
        redis: v.optional(dnsSubdomain, 'hydrazine-redis'),
        /**
         * Key `url`: `AGENTS_REDIS_URL`, the DPU agents' Redis, never the store's (with
         * `redisCa`, its certificate is from that CA too).
         */
        agentsRedis: v.optional(dnsSubdomain, 'hydrazine-agents-redis'),
        /** Key `ca.crt`: the CA of a `rediss://` server with a private CA; unset: none. */
        redisCa: v.optional(dnsSubdomain),
        /** A `kubernetes.io/tls` Secret: the API's (HTTPS, gRPC, metrics) certificate. */
        tls: v.optional(dnsSubdomain, 'hydrazine-tls'),
        /** Key `tokens.json`: `HYDRAZINE_TOKENS_FILE`. */
        tokens: v.optional(dnsSubdomain, 'hydrazine-tokens'),
        /** Key `token`: `HYDRAZINE_METRICS_TOKEN`. */
        metrics: v.optional(dnsSubdomain, 'hydrazine-metrics'),
        /** Key `secret`: `HYDRAZINE_WEBHOOK_SECRET` (optional: no Secret, no webhooks). */
        webhook: v.optional(dnsSubdomain, 'hydrazine-webhook'),
        /**
         * With `centrals.nbTlsSecret`: keys `tls.crt`, `tls.key` (the controller's client
         * certificate for the centrals' NBs) and `ca.crt` (the CA of their server
         * certificates).
         */
        nbClient: v.optional(dnsSubdomain, 'hydrazine-ovn-nb-client'),
        /**
         * With the chassis CAs (`chassisCas`): key `ca.crt`, the CA certificate the DPUs'
         * identities chain to (the SB TLS Secret's `ca.crt`; no key), `HYDRAZINE_K8S_DPU_CA`.
         */
        dpuCa: v.optional(dnsSubdomain, 'hydrazine-dpu-ca'),
      }),
      {},
    ),
    /** bgpd's settings (the FRR sidecar); the router id is each replica's node address. */
    bgp: v.optional(
      v.object({
        asn: v.optional(
          v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(4294967295)),
          65000,
        ),
        peers: v.optional(
          v.array(
            v.object({
              address: ipv4,
              remoteAs: v.pipe(v.number(), v.integer(), v.minValue(1), v.maxValue(4294967295)),
            }),
          ),
          [],
        ),
      }),
      {},
    ),
    /** Each group's central, as the controller creates it (`HYDRAZINE_K8S_*`). */
    centrals: v.pipe(
      v.object(
        {
          /**
           * `HYDRAZINE_K8S_NAMESPACE`: where the controller creates the centrals (default
           * `<namespace>-centrals`, a namespace of their own). Their Role grants Secrets
           * there (each group's chassis CA), which must not reach the DPUs' Secrets in
           * `namespace`: the same namespace as the controller's keeps the centrals an
           * earlier version made there, and turns the chassis CAs off.
           */
          namespace: v.optional(dnsLabel),
          replicas: v.optional(v.picklist([1, 3]), 1),
          storage: v.optional(v.pipe(v.string(), v.regex(/^[1-9]\d*(Ki|Mi|Gi|Ti)$/)), '1Gi'),
          storageClassName: v.optional(dnsSubdomain),
          sbTlsSecret: v.optional(dnsSubdomain),
          clusterDomain: v.optional(dnsSubdomain, 'cluster.local'),
          /**
           * `HYDRAZINE_K8S_CONTROLLER_CIDRS` (required): the networks of the nodes the
           * controller runs on, the only peers of each central's NB and of the controller's
           * SB port. The controller is on the host network: its connections come from node
           * addresses, which no pod selector names.
           */
          controllerCidrs: cidrs,
          /**
           * `HYDRAZINE_K8S_DPU_CIDRS`: the DPUs' fabric networks, the only peers of the SB.
           * Required without `sbTlsSecret`; with it and without these, the TLS SB is open to
           * every address (each DPU proves itself by its certificate).
           */
          dpuCidrs: v.optional(cidrs),
          /**
           * `HYDRAZINE_K8S_CENTRAL_PLAINTEXT_SB`: true runs each SB as plaintext `tcp:` (no
           * RBAC) without `sbTlsSecret`; it must be said, not left to a missing Secret.
           */
          plaintextSouthbound: v.optional(v.boolean()),
          /**
           * `HYDRAZINE_K8S_CENTRAL_NB_TLS_SECRET`: each central's own certificate. Its NB
           * and its SB's controller port (6645) serve `ssl:` with it (`tls.crt`, `tls.key`;
           * its DNS names must cover `*.<namespace>.svc.<clusterDomain>`) to client
           * certificates of its `ca.crt` only: the controller's (`secrets.nbClient`). Raft
           * between 3 replicas runs over `ssl:` with it: then `tls.crt` is signed by
           * `ca.crt` and carries `clientAuth` beside `serverAuth`.
           */
          nbTlsSecret: v.optional(dnsSubdomain),
          /**
           * `HYDRAZINE_K8S_CENTRAL_PLAINTEXT_NB`: true runs each NB as plaintext `tcp:`
           * without `nbTlsSecret`; it must be said, not left to a missing Secret.
           */
          plaintextNorthbound: v.optional(v.boolean()),
        },
        (issue) =>
          issue.expected === '"controllerCidrs"' ? `required: ${CONTROLLER_CIDRS}` : issue.message,
      ),
      v.forward(
        v.check(
          (c) => (c.sbTlsSecret !== undefined) !== (c.plaintextSouthbound === true),
          "required unless plaintextSouthbound is true, and not with it: without it each group's " +
            'SB is plaintext tcp: with no RBAC, which must be asked for explicitly',
        ),
        ['sbTlsSecret'],
      ),
      v.forward(
        v.check(
          (c) => (c.nbTlsSecret !== undefined) !== (c.plaintextNorthbound === true),
          "required unless plaintextNorthbound is true, and not with it: without it each group's " +
            "NB, which writes the tenant's whole topology, is plaintext tcp:, which must be " +
            'asked for explicitly',
        ),
        ['nbTlsSecret'],
      ),
      v.forward(
        v.check(
          (c) => c.sbTlsSecret !== undefined || c.dpuCidrs !== undefined,
          "required without sbTlsSecret: the DPUs' fabric CIDRs, the only peers of a " +
            'plaintext SB (it must not be open to the whole cluster)',
        ),
        ['dpuCidrs'],
      ),
    ),
    agent: v.optional(
      v.object({
        /** The label every DPU node carries. */
        nodeLabel: v.optional(v.object({ key: v.string(), value: v.string() }), {
          key: 'hydrazine.io/dpu',
          value: 'true',
        }),
        /**
         * The DPU's TLS identity is in its Secret (`tls.crt`, `tls.key`, `ca.crt`): gRPC with
         * mTLS on the fabric, `ssl:` SBs. Off: gRPC on loopback only, `tcp:` SBs only.
         */
        tls: v.optional(v.boolean(), true),
        grpcPort: v.optional(port, 50151),
      }),
      {},
    ),
    /** The DPUs: one agent DaemonSet each (agent.ts says why). */
    dpus: v.optional(v.array(Dpu), []),
  },
  (issue) =>
    issue.expected === '"centrals"'
      ? `required, with controllerCidrs: ${CONTROLLER_CIDRS}`
      : issue.message,
)

export type ManifestOptions = v.InferOutput<typeof ManifestOptionsSchema>
export type ManifestOptionsInput = v.InferInput<typeof ManifestOptionsSchema>
export type DpuOptions = ManifestOptions['dpus'][number]

/** The namespace the centrals live in: `centrals.namespace`, else `<namespace>-centrals`. */
export function centralsNamespace(o: ManifestOptions): string {
  return o.centrals.namespace ?? `${o.namespace}-centrals`
}

/**
 * Whether each group's central gets a chassis CA of its own (infra/k8s/README.md, "A
 * chassis CA per group"): with a TLS SB and NB (its relay serves it), in a namespace of
 * the centrals' own (the Secrets grant reaches no DPU's Secret).
 */
export function chassisCas(o: ManifestOptions): boolean {
  return (
    o.centrals.sbTlsSecret !== undefined &&
    o.centrals.nbTlsSecret !== undefined &&
    centralsNamespace(o) !== o.namespace
  )
}

/** Options with their defaults; throws ConfigError naming every bad field. */
export function parseManifestOptions(input: unknown = {}): ManifestOptions {
  const result = v.safeParse(ManifestOptionsSchema, input)
  if (result.success && centralsNamespace(result.output).length > 63) {
    const message = `${centralsNamespace(result.output)} is longer than 63 characters: name one`
    throw new ConfigError(`invalid manifest options: centrals.namespace: ${message}`, [
      { path: 'centrals.namespace', message },
    ])
  }
  if (result.success) {
    // One agent per DPU, one DPU per node.
    for (const key of ['id', 'node'] as const) {
      const values = result.output.dpus.map((d) => d[key])
      const twice = values.find((value, i) => values.indexOf(value) !== i)
      if (twice === undefined) continue
      const message = `${key} ${twice} is listed twice`
      throw new ConfigError(`invalid manifest options: dpus: ${message}`, [
        { path: 'dpus', message },
      ])
    }
    return result.output
  }
  const issues = result.issues.map((issue) => ({
    path: v.getDotPath(issue) ?? '',
    message: issue.message,
  }))
  throw new ConfigError(
    `invalid manifest options: ${issues.map((i) => `${i.path || '(root)'}: ${i.message}`).join('; ')}`,
    issues,
  )
}
