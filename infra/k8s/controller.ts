/**
 * The controller's objects: its ServiceAccount and the Role the `kubernetes` central
 * provider needs, the Deployment (the controller and an FRR sidecar per pod), its Service,
 * its PodDisruptionBudget, and the ConfigMap bgpd starts from.
 *
 * Why FRR is a sidecar: the controller drives bgpd through its vty socket
 * (`HYDRAZINE_FRR_VTY_DIR`, lib/frr/vty.ts), a unix socket, which only containers of one
 * pod can share (an emptyDir). The pod runs on the host network so bgpd peers with the
 * fabric from the node's address; two replicas therefore never share a node.
 */
import { Deployment } from 'kubernetes-models/apps/v1/Deployment'
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget'
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role'
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding'
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap'
import type { IEnvVar } from 'kubernetes-models/v1/EnvVar'
import { Service } from 'kubernetes-models/v1/Service'
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount'
import type { IVolume } from 'kubernetes-models/v1/Volume'
import type { IVolumeMount } from 'kubernetes-models/v1/VolumeMount'
import { renderBgpdConfig } from '../../lib/frr/render.ts'
import { parseBgpSettings } from '../../lib/frr/settings.ts'
import { CENTRALS_RBAC_RULES, CHASSIS_CA_RBAC_RULES } from '../centrals/kubernetes-api.ts'
import { componentLabels } from './names.ts'
import { centralsNamespace, chassisCas, type ManifestOptions } from './options.ts'
import { restrictedContainer, restrictedPod } from './security.ts'

export const CONTROLLER = 'hydrazine-controller'
/** The pod labels the Deployment, its Service and its PodDisruptionBudget select. */
export const CONTROLLER_SELECTOR = { 'app.kubernetes.io/name': CONTROLLER } as const

const TLS_DIR = '/etc/hydrazine/tls'
const TOKENS_DIR = '/etc/hydrazine/tokens'
const REDIS_CA_DIR = '/etc/hydrazine/redis-ca'
const NB_CLIENT_DIR = '/etc/hydrazine/nb-client'
const DPU_CA_DIR = '/etc/hydrazine/dpu-ca'
const FRR_TEMPLATE_DIR = '/etc/hydrazine/frr'
const FRR_VTY_DIR = '/var/run/frr'

export function controllerServiceAccount(o: ManifestOptions): ServiceAccount {
  return new ServiceAccount({
    metadata: { name: CONTROLLER, namespace: o.namespace, labels: componentLabels(CONTROLLER) },
  })
}

/**
 * Exactly what the central provider calls, in the centrals' namespace only: their
 * objects and, with the chassis CAs, Secrets (a Role cannot name Secrets made at run time,
 * so this reaches every Secret there: none of the DPUs', which are in `namespace`).
 */
export function controllerRole(o: ManifestOptions): Role {
  const rules = [...CENTRALS_RBAC_RULES, ...(chassisCas(o) ? CHASSIS_CA_RBAC_RULES : [])]
  return new Role({
    metadata: {
      name: CONTROLLER,
      namespace: centralsNamespace(o),
      labels: componentLabels(CONTROLLER),
    },
    rules: rules.map((rule) => ({
      apiGroups: [...rule.apiGroups],
      resources: [...rule.resources],
      verbs: [...rule.verbs],
    })),
  })
}

/** Binds the Role, in the centrals' namespace, to the controller's ServiceAccount. */
export function controllerRoleBinding(o: ManifestOptions): RoleBinding {
  return new RoleBinding({
    metadata: {
      name: CONTROLLER,
      namespace: centralsNamespace(o),
      labels: componentLabels(CONTROLLER),
    },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: CONTROLLER },
    subjects: [{ kind: 'ServiceAccount', name: CONTROLLER, namespace: o.namespace }],
  })
}

/**
 * bgpd's starting configuration, rendered as the embedded FRR's is (lib/frr/render.ts).
 * Its `bgp router-id` is a placeholder: each replica's FRR writes its node's address there.
 */
export function frrConfigMap(o: ManifestOptions): ConfigMap {
  const settings = parseBgpSettings({
    localAs: o.bgp.asn,
    routerId: '0.0.0.0',
    peers: o.bgp.peers,
  })
  return new ConfigMap({
    metadata: {
      name: `${CONTROLLER}-frr`,
      namespace: o.namespace,
      labels: componentLabels(CONTROLLER),
    },
    data: { 'bgpd.conf': renderBgpdConfig(settings) },
  })
}

/** The controller's variables: everything external, secrets from Secrets. */
function controllerEnv(o: ManifestOptions): IEnvVar[] {
  const { controller: c, centrals, secrets } = o
  const value = (name: string, v: string | number): IEnvVar => ({ name, value: String(v) })
  const secret = (name: string, secretName: string, key: string, optional = false): IEnvVar => ({
    name,
    valueFrom: { secretKeyRef: { name: secretName, key, ...(optional ? { optional } : {}) } },
  })
  return [
    secret('REDIS_URL', secrets.redis, 'url'),
    ...(secrets.redisCa ? [value('REDIS_CA', `${REDIS_CA_DIR}/ca.crt`)] : []),
    secret('AGENTS_REDIS_URL', secrets.agentsRedis, 'url'),
    ...(secrets.redisCa ? [value('AGENTS_REDIS_CA', `${REDIS_CA_DIR}/ca.crt`)] : []),
    value('HYDRAZINE_HTTP_HOST', '0.0.0.0'),
    value('HYDRAZINE_HTTP_PORT', c.httpPort),
    value('HYDRAZINE_GRPC_PORT', c.grpcPort),
    value('HYDRAZINE_TLS_CERT', `${TLS_DIR}/tls.crt`),
    value('HYDRAZINE_TLS_KEY', `${TLS_DIR}/tls.key`),
    value('HYDRAZINE_TOKENS_FILE', `${TOKENS_DIR}/tokens.json`),
    secret('HYDRAZINE_WEBHOOK_SECRET', secrets.webhook, 'secret', true),
    value('HYDRAZINE_METRICS_LISTEN', `0.0.0.0:${c.metricsPort}`),
    secret('HYDRAZINE_METRICS_TOKEN', secrets.metrics, 'token'),
    value('HYDRAZINE_DATA_DIR', '/var/lib/hydrazine'),
    value('HYDRAZINE_FRR_VTY_DIR', FRR_VTY_DIR),
    value('HYDRAZINE_FRR_SAVE_CONFIG', 'true'),
    value('HYDRAZINE_OVN_CENTRAL', 'kubernetes'),
    value('HYDRAZINE_K8S_NAMESPACE', centralsNamespace(o)),
    ...(chassisCas(o) ? [value('HYDRAZINE_K8S_DPU_CA', `${DPU_CA_DIR}/ca.crt`)] : []),
    value('HYDRAZINE_K8S_CENTRAL_IMAGE', o.image),
    value('HYDRAZINE_K8S_CENTRAL_REPLICAS', centrals.replicas),
    value('HYDRAZINE_K8S_CENTRAL_STORAGE', centrals.storage),
    ...(centrals.storageClassName
      ? [value('HYDRAZINE_K8S_CENTRAL_STORAGE_CLASS', centrals.storageClassName)]
      : []),
    ...(centrals.sbTlsSecret
      ? [value('HYDRAZINE_K8S_CENTRAL_TLS_SECRET', centrals.sbTlsSecret)]
      : []),
    ...(centrals.plaintextSouthbound ? [value('HYDRAZINE_K8S_CENTRAL_PLAINTEXT_SB', 'true')] : []),
    ...(centrals.nbTlsSecret
      ? [
          value('HYDRAZINE_K8S_CENTRAL_NB_TLS_SECRET', centrals.nbTlsSecret),
          value('HYDRAZINE_K8S_NB_CLIENT_CERT', `${NB_CLIENT_DIR}/tls.crt`),
          value('HYDRAZINE_K8S_NB_CLIENT_KEY', `${NB_CLIENT_DIR}/tls.key`),
          value('HYDRAZINE_K8S_NB_CA', `${NB_CLIENT_DIR}/ca.crt`),
        ]
      : []),
    ...(centrals.plaintextNorthbound ? [value('HYDRAZINE_K8S_CENTRAL_PLAINTEXT_NB', 'true')] : []),
    value('HYDRAZINE_K8S_CLUSTER_DOMAIN', centrals.clusterDomain),
    value('HYDRAZINE_K8S_CONTROLLER_CIDRS', centrals.controllerCidrs.join(',')),
    ...(centrals.dpuCidrs ? [value('HYDRAZINE_K8S_DPU_CIDRS', centrals.dpuCidrs.join(','))] : []),
    // tsx and npm keep their caches under HOME and the temp dir: the root filesystem is read-only.
    value('HOME', '/tmp'),
    ...Object.entries(c.env).map(([name, v]) => value(name, v)),
  ]
}

/**
 * bgpd in the foreground, as the controller's user: its vty socket in the shared
 * directory, no zebra (`-Z`) and no kernel routes (`-n`: it only announces), no vty TCP
 * port (`-P 0`), and no BGP listener (`-p 0`): it opens the sessions to the fabric itself,
 * so it needs no privileged port and never collides with another BGP speaker on the node.
 * A restarted container (same pod) starts from what bgpd last saved.
 */
export const FRR_SCRIPT = `set -eu
conf=/etc/frr/bgpd.conf
if [ ! -s "$conf" ]; then
  sed -E "s/^( *bgp router-id ).*/\\1$ROUTER_ID/" ${FRR_TEMPLATE_DIR}/bgpd.conf > "$conf"
fi
exec /usr/lib/frr/bgpd -S -Z -n -p 0 -P 0 -f "$conf" --vty_socket ${FRR_VTY_DIR} \\
  -i ${FRR_VTY_DIR}/bgpd.pid --log stdout
`

export function controllerDeployment(o: ManifestOptions): Deployment {
  const { controller: c, secrets } = o
  const nbClient = o.centrals.nbTlsSecret !== undefined
  const labels = componentLabels(CONTROLLER)
  const probe = (path: string) => ({
    httpGet: { path, port: 'http', scheme: 'HTTPS' as const },
    periodSeconds: 10,
    timeoutSeconds: 5,
  })
  const controllerMounts: IVolumeMount[] = [
    { name: 'tls', mountPath: TLS_DIR, readOnly: true },
    { name: 'tokens', mountPath: TOKENS_DIR, readOnly: true },
    ...(secrets.redisCa ? [{ name: 'redis-ca', mountPath: REDIS_CA_DIR, readOnly: true }] : []),
    ...(nbClient ? [{ name: 'nb-client', mountPath: NB_CLIENT_DIR, readOnly: true }] : []),
    ...(chassisCas(o) ? [{ name: 'dpu-ca', mountPath: DPU_CA_DIR, readOnly: true }] : []),
    { name: 'frr-run', mountPath: FRR_VTY_DIR },
    { name: 'data', mountPath: '/var/lib/hydrazine' },
    { name: 'tmp', mountPath: '/tmp' },
  ]
  const volumes: IVolume[] = [
    { name: 'tls', secret: { secretName: secrets.tls, defaultMode: 0o440 } },
    { name: 'tokens', secret: { secretName: secrets.tokens, defaultMode: 0o440 } },
    ...(secrets.redisCa
      ? [{ name: 'redis-ca', secret: { secretName: secrets.redisCa, defaultMode: 0o444 } }]
      : []),
    ...(nbClient
      ? [{ name: 'nb-client', secret: { secretName: secrets.nbClient, defaultMode: 0o440 } }]
      : []),
    ...(chassisCas(o)
      ? [
          {
            name: 'dpu-ca',
            secret: { secretName: secrets.dpuCa, items: [{ key: 'ca.crt', path: 'ca.crt' }] },
          },
        ]
      : []),
    { name: 'frr-template', configMap: { name: `${CONTROLLER}-frr` } },
    { name: 'frr-run', emptyDir: {} },
    { name: 'frr-etc', emptyDir: {} },
    { name: 'frr-tmp', emptyDir: {} },
    { name: 'data', emptyDir: {} },
    { name: 'tmp', emptyDir: {} },
  ]
  return new Deployment({
    metadata: { name: CONTROLLER, namespace: o.namespace, labels },
    spec: {
      replicas: c.replicas,
      selector: { matchLabels: { ...CONTROLLER_SELECTOR } },
      // Host network: a new pod cannot start on a node the old one holds; replace in place.
      strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1, maxSurge: 0 } },
      template: {
        metadata: { labels },
        spec: {
          ...restrictedPod(),
          serviceAccountName: CONTROLLER,
          hostNetwork: true,
          dnsPolicy: 'ClusterFirstWithHostNet',
          enableServiceLinks: false,
          terminationGracePeriodSeconds: 30,
          ...(Object.keys(c.nodeSelector).length > 0 ? { nodeSelector: c.nodeSelector } : {}),
          affinity: {
            podAntiAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: [
                {
                  labelSelector: { matchLabels: { ...CONTROLLER_SELECTOR } },
                  topologyKey: 'kubernetes.io/hostname',
                },
              ],
            },
          },
          topologySpreadConstraints: [
            {
              maxSkew: 1,
              topologyKey: 'topology.kubernetes.io/zone',
              whenUnsatisfiable: 'ScheduleAnyway',
              labelSelector: { matchLabels: { ...CONTROLLER_SELECTOR } },
            },
          ],
          containers: [
            {
              name: 'controller',
              image: o.image,
              imagePullPolicy: o.imagePullPolicy,
              command: ['node', '--import', 'tsx', 'infra/main.ts'],
              env: controllerEnv(o),
              ports: [
                { name: 'http', containerPort: c.httpPort, protocol: 'TCP' },
                { name: 'grpc', containerPort: c.grpcPort, protocol: 'TCP' },
                { name: 'metrics', containerPort: c.metricsPort, protocol: 'TCP' },
              ],
              startupProbe: { ...probe('/healthz'), failureThreshold: 30 },
              livenessProbe: { ...probe('/healthz'), failureThreshold: 3 },
              readinessProbe: { ...probe('/readyz'), failureThreshold: 2 },
              resources: {
                requests: { cpu: '250m', memory: '256Mi' },
                limits: { memory: '1Gi' },
              },
              securityContext: restrictedContainer(),
              volumeMounts: controllerMounts,
            },
            {
              name: 'frr',
              image: o.image,
              imagePullPolicy: o.imagePullPolicy,
              command: ['/bin/sh', '-c', FRR_SCRIPT],
              env: [{ name: 'ROUTER_ID', valueFrom: { fieldRef: { fieldPath: 'status.hostIP' } } }],
              readinessProbe: {
                exec: { command: ['test', '-S', `${FRR_VTY_DIR}/bgpd.vty`] },
                periodSeconds: 5,
              },
              livenessProbe: {
                exec: { command: ['test', '-S', `${FRR_VTY_DIR}/bgpd.vty`] },
                initialDelaySeconds: 10,
                periodSeconds: 10,
              },
              resources: { requests: { cpu: '50m', memory: '64Mi' }, limits: { memory: '256Mi' } },
              securityContext: restrictedContainer(),
              volumeMounts: [
                { name: 'frr-template', mountPath: FRR_TEMPLATE_DIR, readOnly: true },
                { name: 'frr-run', mountPath: FRR_VTY_DIR },
                { name: 'frr-etc', mountPath: '/etc/frr' },
                { name: 'frr-tmp', mountPath: '/var/tmp/frr' },
              ],
            },
          ],
          volumes,
        },
      },
    },
  })
}

/** The API (HTTPS, gRPC) and metrics of every ready replica. */
export function controllerService(o: ManifestOptions): Service {
  const { controller: c } = o
  return new Service({
    metadata: { name: 'hydrazine', namespace: o.namespace, labels: componentLabels(CONTROLLER) },
    spec: {
      type: 'ClusterIP',
      selector: { ...CONTROLLER_SELECTOR },
      ports: [
        { name: 'http', port: c.httpPort, targetPort: 'http', protocol: 'TCP' },
        {
          name: 'grpc',
          port: c.grpcPort,
          targetPort: 'grpc',
          protocol: 'TCP',
          appProtocol: 'grpc',
        },
        { name: 'metrics', port: c.metricsPort, targetPort: 'metrics', protocol: 'TCP' },
      ],
    },
  })
}

/** A drain or an upgrade never takes the last ready replica. */
export function controllerDisruptionBudget(o: ManifestOptions): PodDisruptionBudget {
  return new PodDisruptionBudget({
    metadata: { name: CONTROLLER, namespace: o.namespace, labels: componentLabels(CONTROLLER) },
    spec: { minAvailable: 1, selector: { matchLabels: { ...CONTROLLER_SELECTOR } } },
  })
}
