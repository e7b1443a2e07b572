/**
 * The DPU agent (agent/): one DaemonSet per DPU, each pinned to its DPU's node and reading
 * that DPU's own Secret.
 *
 * Why not one DaemonSet for every DPU: a pod template names its Secrets literally, so one
 * template would mount one Secret holding every DPU's credentials on every DPU — and the
 * kubelet's node authorizer lets a node read any Secret a pod bound to it names. A DPU
 * that is taken over would then hold every other DPU's Redis password and key, undoing
 * the per-DPU Redis user (docs/security.md). With a DaemonSet per DPU, each pod
 * names only its DPU's Secret, and each node can read only that one. It stays a DaemonSet
 * (not a bare Pod) for the rollouts and the rescheduling when the node comes back.
 *
 * The Secret (default `hydrazine-dpu-<id>`), from `POST /v1/dpus/{id}/credentials`:
 * `redis-url` (`rediss://dpu-<id>:PASSWORD@redis:6379`), and with TLS `tls.crt`, `tls.key`
 * (CN = the DPU id) and `ca.crt`.
 */
import { DaemonSet } from 'kubernetes-models/apps/v1/DaemonSet'
import type { IEnvVar } from 'kubernetes-models/v1/EnvVar'
import { componentLabels, DPU_LABEL, hashedName, readableName } from './names.ts'
import type { DpuOptions, ManifestOptions } from './options.ts'

export const AGENT = 'hydrazine-agent'

const OVS_RUN_DIR = '/var/run/openvswitch'
const AGENT_RUN_DIR = '/var/run/hydrazine-agent'
const CREDENTIALS_DIR = '/etc/hydrazine/dpu'
const REDIS_CA_DIR = '/etc/hydrazine/redis-ca'

/** The Secret holding a DPU's credentials. */
export function dpuSecretName(dpu: Pick<DpuOptions, 'id' | 'secret'>): string {
  return dpu.secret ?? readableName('hydrazine-dpu', dpu.id, 63)
}

/** The name of a DPU's DaemonSet (an id with `_`, `.` or capitals is hashed). */
export function agentName(dpuId: string): string {
  return readableName(AGENT, dpuId, 63)
}

/**
 * A DPU's agent: on its node only (the DPU label and the node's name), on the host network
 * (the agent's gRPC and ovn-controller's Geneve traffic are the DPU's own), with the host's
 * OVS socket directory, its own run directory (ovn-controller's pid and control socket:
 * `ovn-appctl` on the DPU finds them) and the host's network namespaces (each group's DHCP
 * relay runs in one). It is privileged: it creates network namespaces and veth pairs and
 * moves interfaces between them, which no narrower set of capabilities allows together
 * with the mount propagation `ip netns` needs.
 */
export function agentDaemonSet(o: ManifestOptions, dpu: DpuOptions): DaemonSet {
  const name = agentName(dpu.id)
  const secretName = dpuSecretName(dpu)
  const selector = { ...componentLabels(AGENT), [DPU_LABEL]: selectorValue(dpu.id) }
  const value = (n: string, v: string): IEnvVar => ({ name: n, value: v })
  const tls = o.agent.tls
  const env: IEnvVar[] = [
    value('HZ_DPU_ID', dpu.id),
    value('HZ_FABRIC_IPS', dpu.fabricIps.join(',')),
    value('HZ_HOST_PORTS', dpu.hostPorts.join(',')),
    value('HZ_OVS_DB', `unix:${OVS_RUN_DIR}/db.sock`),
    value('OVS_RUNDIR', OVS_RUN_DIR),
    value('HZ_AGENT_RUN_DIR', AGENT_RUN_DIR),
    { name: 'REDIS_URL', valueFrom: { secretKeyRef: { name: secretName, key: 'redis-url' } } },
    ...(o.secrets.redisCa ? [value('HZ_REDIS_CA', `${REDIS_CA_DIR}/ca.crt`)] : []),
    ...(tls
      ? [
          value('HZ_TLS_CERT', `${CREDENTIALS_DIR}/tls.crt`),
          value('HZ_TLS_KEY', `${CREDENTIALS_DIR}/tls.key`),
          value('HZ_TLS_CA', `${CREDENTIALS_DIR}/ca.crt`),
          value('HZ_AGENT_GRPC_LISTEN', `0.0.0.0:${o.agent.grpcPort}`),
        ]
      : []),
    value('HOME', '/tmp'),
    ...Object.entries(dpu.env).map(([n, v]) => value(n, v)),
  ]
  const hostDir = (volume: string, path: string, type: 'Directory' | 'DirectoryOrCreate') => ({
    name: volume,
    hostPath: { path, type },
  })
  return new DaemonSet({
    metadata: {
      name,
      namespace: o.namespace,
      labels: selector,
      annotations: { 'hydrazine.io/dpu-id': dpu.id, 'hydrazine.io/node': dpu.node },
    },
    spec: {
      selector: { matchLabels: selector },
      updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } },
      template: {
        metadata: { labels: selector },
        spec: {
          hostNetwork: true,
          dnsPolicy: 'ClusterFirstWithHostNet',
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          nodeSelector: { [o.agent.nodeLabel.key]: o.agent.nodeLabel.value },
          affinity: {
            nodeAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: {
                nodeSelectorTerms: [
                  { matchFields: [{ key: 'metadata.name', operator: 'In', values: [dpu.node] }] },
                ],
              },
            },
          },
          // DPU nodes are usually tainted to keep other workloads off; the agent belongs there.
          tolerations: [{ key: o.agent.nodeLabel.key, operator: 'Exists', effect: 'NoSchedule' }],
          containers: [
            {
              name: 'agent',
              image: o.image,
              imagePullPolicy: o.imagePullPolicy,
              command: ['node', '--import', 'tsx', 'agent/main.ts'],
              env,
              ...(tls
                ? {
                    ports: [{ name: 'grpc', containerPort: o.agent.grpcPort, protocol: 'TCP' }],
                    livenessProbe: {
                      tcpSocket: { port: 'grpc' },
                      initialDelaySeconds: 30,
                      periodSeconds: 10,
                    },
                  }
                : {}),
              resources: {
                requests: { cpu: '100m', memory: '128Mi' },
                limits: { memory: '512Mi' },
              },
              securityContext: { privileged: true },
              volumeMounts: [
                { name: 'ovs-run', mountPath: OVS_RUN_DIR },
                { name: 'agent-run', mountPath: AGENT_RUN_DIR },
                { name: 'netns', mountPath: '/var/run/netns', mountPropagation: 'Bidirectional' },
                ...(tls
                  ? [{ name: 'credentials', mountPath: CREDENTIALS_DIR, readOnly: true }]
                  : []),
                ...(o.secrets.redisCa
                  ? [{ name: 'redis-ca', mountPath: REDIS_CA_DIR, readOnly: true }]
                  : []),
                { name: 'tmp', mountPath: '/tmp' },
              ],
            },
          ],
          volumes: [
            hostDir('ovs-run', OVS_RUN_DIR, 'Directory'),
            hostDir('agent-run', AGENT_RUN_DIR, 'DirectoryOrCreate'),
            hostDir('netns', '/var/run/netns', 'DirectoryOrCreate'),
            ...(tls
              ? [
                  {
                    name: 'credentials',
                    secret: {
                      secretName,
                      defaultMode: 0o400,
                      items: ['tls.crt', 'tls.key', 'ca.crt'].map((key) => ({ key, path: key })),
                    },
                  },
                ]
              : []),
            ...(o.secrets.redisCa
              ? [
                  {
                    name: 'redis-ca',
                    secret: { secretName: o.secrets.redisCa, defaultMode: 0o444 },
                  },
                ]
              : []),
            { name: 'tmp', emptyDir: {} },
          ],
        },
      },
    },
  })
}

/** A DPU id as a label value (63 of A-Z a-z 0-9 . _ -, alphanumeric at both ends). */
function selectorValue(dpuId: string): string {
  return /^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$/.test(dpuId)
    ? dpuId
    : hashedName('dpu', dpuId, 63)
}
