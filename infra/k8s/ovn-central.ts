/**
 * One resource group's OVN central as Kubernetes objects (pure builders; the `kubernetes`
 * provider in infra/centrals/kubernetes.ts creates them): a StatefulSet whose pods run the
 * NB and SB ovsdb-servers and ovn-northd as three containers sharing their sockets, each
 * replica with its own volume, plus two Services:
 *
 * - `<name>` (ClusterIP, ready pods only): what the controller and the DPUs connect to —
 *   NB 6641 (`pssl:` when the NB has a TLS Secret: the controller's client certificate),
 *   SB 6642 for the DPUs (`pssl:` with OVN's `ovn-controller` RBAC role when the SB has a
 *   TLS Secret), and the controller's own SB on 6645 (full access; beside a TLS SB, or
 *   beside a TLS NB);
 * - `<name>-peers` (headless, the StatefulSet's governing Service, not-ready pods too):
 *   stable pod names for raft (NB 6643, SB 6644) when there are three replicas;
 *
 * The NB's TLS Secret is the central's own certificate: with it, the NB serves `pssl:`,
 * the controller's SB port serves `pssl:` to the same client certificate (the controller's),
 * and raft between replicas runs over `ssl:`, each member verifying its peers against the
 * Secret's `ca.crt`. An ovsdb-server has one TLS identity, so the DPUs' TLS SB (their own
 * CA, the SB Secret) is then served by a second ovsdb-server in the pod, a relay of the SB
 * (`sb-relay`: OVN's RBAC is checked there, writes are forwarded over the pod's unix
 * socket). Without the NB Secret (a plaintext NB, asked for explicitly) raft and the
 * controller's SB port are plaintext too: there is no certificate to present.
 *
 * and a NetworkPolicy `<name>` (created first and deleted once the pods are gone, so that
 * no pod of the central ever runs open), because the NB and the controller's SB port have
 * full write access to the tenant's topology (the latter, and a plaintext NB, with no
 * certificate asked). The pods take connections only:
 *
 * - on raft's ports, from the same central's pods;
 * - on the NB (and the controller's SB: 6645 beside a TLS SB, else 6642), from the
 *   controller's nodes (`controllerCidrs`: the controller runs on the host network, so its
 *   connections come from node addresses, which no pod selector names);
 * - on the SB 6642, from the DPUs (`dpuCidrs`); a TLS SB without `dpuCidrs` from anywhere
 *   (each chassis proves itself with its certificate and gets OVN's `ovn-controller` role).
 *
 * A list left empty admits no one (a rule with no peers would admit everyone). Kubernetes
 * admits the pod's own node whatever the policy says.
 *
 * With `chassisCa` (the controller keeps the DPUs' identities:
 * infra/centrals/kubernetes-chassis.ts) the relay takes its certificate and its clients'
 * CA from the group's own chassis CA, a Secret `<name>-chassis` the controller makes
 * (`chassisSecret`), instead of the SB Secret every group shares: it admits only chassis
 * certificates of its own group, and drops every session when that CA is replaced (a DPU
 * left the group).
 */

import { type IStatefulSet, StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet'
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy'
import type { INetworkPolicyIngressRule } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicyIngressRule'
import type { IContainer } from 'kubernetes-models/v1/Container'
import type { IEnvVar } from 'kubernetes-models/v1/EnvVar'
import { Secret } from 'kubernetes-models/v1/Secret'
import { Service } from 'kubernetes-models/v1/Service'
import type { KubernetesCentralsConfig } from '../../lib/config/kubernetes.ts'
import type { OvnCentralEndpoints } from '../../lib/ovn/central.ts'
import { GROUP_LABEL, hashedName, MANAGED_BY, PART_OF } from './names.ts'
import { restrictedContainer, restrictedPod } from './security.ts'

/** A container of a central's pod. */
type CentralContainer = 'nb' | 'sb' | 'sb-relay' | 'northd'

/**
 * How the controller has its centrals built beyond the operator's settings: with
 * `chassisCa`, the DPUs' TLS SB (a relay) checks chassis against a CA of the group's own.
 */
export type CentralSettings = KubernetesCentralsConfig & { readonly chassisCa?: boolean }

/** The central's ports: clients', raft's, and the controller's SB beside a TLS one. */
export const CENTRAL_PORTS = {
  nb: 6641,
  sb: 6642,
  nbRaft: 6643,
  sbRaft: 6644,
  sbController: 6645,
} as const

/** Labels every central carries; `centralSelector()` finds them all. */
export const CENTRAL_LABELS = {
  'app.kubernetes.io/name': 'ovn-central',
  'app.kubernetes.io/component': 'ovn-central',
  ...PART_OF,
  ...MANAGED_BY,
} as const

/** The label selector of every central Hydrazine created (list, groups). */
export function centralSelector(group?: string): string {
  const labels: Record<string, string> = {
    'app.kubernetes.io/component': CENTRAL_LABELS['app.kubernetes.io/component'],
    ...MANAGED_BY,
    ...(group === undefined ? {} : { [GROUP_LABEL]: group }),
  }
  return labelSelector(labels)
}

/**
 * The labels of a group's central's pods that its StatefulSet, its Services and its
 * NetworkPolicy select them by.
 */
export function centralPodLabels(group: string): Record<string, string> {
  return { 'app.kubernetes.io/instance': centralName(group), ...MANAGED_BY }
}

/** The label selector of a group's central's pods: the pods its NetworkPolicy protects. */
export function centralPodSelector(group: string): string {
  return labelSelector(centralPodLabels(group))
}

function labelSelector(labels: Record<string, string>): string {
  return Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(',')
}

/**
 * The StatefulSet's (and client Service's) name of a group's central: `ovn-`, the group
 * name as far as it fits, a hash of it. At most 52 characters: the StatefulSet controller
 * labels each pod `controller-revision-hash: <name>-<10 characters>`, a label value of at
 * most 63.
 *
 * @example centralName('tenant-a') // 'ovn-tenant-a-' + 16 hex digits
 */
export function centralName(group: string): string {
  return hashedName('ovn', group, 52)
}

/** The Secret holding a group's chassis CA and its relay's certificate (`chassisSecret`). */
export function chassisSecretName(group: string): string {
  return `${centralName(group)}-chassis`
}

/**
 * What of a chassis CA's Secret the relay reads: its server certificate and key, and the
 * CA it checks chassis by; never the CA's key or the record of what it certified.
 */
export const CHASSIS_SECRET_RELAY_KEYS = ['ca.crt', 'tls.crt', 'tls.key'] as const

/**
 * The Secret of a group's chassis CA, labelled as the central's other objects: `data` (PEM
 * texts by key: `ca.crt`, `ca.key`, `tls.crt`, `tls.key`, `chassis-<dpu>.crt`), base64 as
 * the API keeps it.
 */
export function chassisSecret(
  group: string,
  settings: Pick<KubernetesCentralsConfig, 'namespace'>,
  data: Readonly<Record<string, string>>,
  resourceVersion?: string,
): Secret {
  const name = centralName(group)
  return new Secret({
    metadata: {
      name: chassisSecretName(group),
      namespace: settings.namespace,
      labels: { ...CENTRAL_LABELS, [GROUP_LABEL]: group, 'app.kubernetes.io/instance': name },
      ...(resourceVersion === undefined ? {} : { resourceVersion }),
    },
    type: 'Opaque',
    data: Object.fromEntries(
      Object.entries(data).map(([key, value]) => [key, Buffer.from(value).toString('base64')]),
    ),
  })
}

/**
 * Whether the relay of a central's StatefulSet checks chassis against the group's own
 * chassis CA (built with `chassisCa`), rather than the SB Secret every group shares (a
 * central an earlier version made, or one built without `chassisCa`).
 */
export function relayOnChassisCa(statefulSet: IStatefulSet): boolean {
  const containers = statefulSet.spec?.template.spec?.containers ?? []
  const relay = containers.find((c) => c.name === 'sb-relay')
  return relay?.volumeMounts?.some((m) => m.name === 'sb-chassis') ?? false
}

/** Where a group's central answers, given the provider's settings. */
export function centralEndpoints(
  group: string,
  settings: Pick<
    KubernetesCentralsConfig,
    'namespace' | 'clusterDomain' | 'sbTlsSecret' | 'nbTlsSecret'
  >,
): OvnCentralEndpoints {
  const name = centralName(group)
  // Fully qualified: OVS resolves remotes itself (unbound), without resolv.conf's search list.
  const host = `${name}.${settings.namespace}.svc.${settings.clusterDomain}`
  const tls = settings.sbTlsSecret !== undefined
  const nbTls = settings.nbTlsSecret !== undefined
  const sb = `${tls ? 'ssl' : 'tcp'}:${host}:${CENTRAL_PORTS.sb}`
  return {
    nb: `${nbTls ? 'ssl' : 'tcp'}:${host}:${CENTRAL_PORTS.nb}`,
    sb,
    sbController: controllerSouthboundPort(settings)
      ? `${nbTls ? 'ssl' : 'tcp'}:${host}:${CENTRAL_PORTS.sbController}`
      : sb,
    service: name,
    group,
  }
}

/**
 * Whether the controller reaches the SB on a port of its own (6645, full access) rather
 * than the DPUs' 6642: when the DPUs' SB is TLS with RBAC, or when the central has its own
 * certificate (the NB Secret) for the controller's connections.
 */
function controllerSouthboundPort(
  settings: Pick<KubernetesCentralsConfig, 'sbTlsSecret' | 'nbTlsSecret'>,
): boolean {
  return settings.sbTlsSecret !== undefined || settings.nbTlsSecret !== undefined
}

/**
 * How a central's pods serve, read from its StatefulSet's pod template: the NB, the
 * controller's SB port and raft (`ssl` with the central's own certificate, else `tcp`),
 * and whether a relay serves the DPUs' TLS SB. A central made with other TLS settings
 * than the current ones describes itself otherwise than `centralObjects` builds now.
 *
 * @example centralTransport(sts) // 'NB ssl, controller SB and raft ssl, DPU SB relay'
 */
export function centralTransport(statefulSet: IStatefulSet): string {
  const containers = statefulSet.spec?.template.spec?.containers ?? []
  const mounts = (name: string) =>
    containers.find((c) => c.name === name)?.volumeMounts?.map((m) => m.name) ?? []
  const nb = servesNorthboundTls(statefulSet) ? 'ssl' : 'tcp'
  const central = mounts('sb').includes('nb-tls') ? 'ssl' : 'tcp'
  const relay = containers.some((c) => c.name === 'sb-relay') ? 'relay' : 'direct'
  return `NB ${nb}, controller SB and raft ${central}, DPU SB ${relay}`
}

/**
 * Whether the pods of a central's StatefulSet serve their NB over TLS (`ssl:`, as one
 * built with `nbTlsSecret`), read from its NB container's environment: a central created
 * before its settings asked for TLS (or the other way round) answers the other way.
 */
function servesNorthboundTls(statefulSet: IStatefulSet): boolean {
  const nb = statefulSet.spec?.template.spec?.containers.find((c) => c.name === 'nb')
  return nb?.env?.some((e) => e.name === 'NB_TLS_DIR') ?? false
}

/** How many ready replicas answer: one of one, or a raft majority. */
export function quorum(replicas: number): number {
  return Math.floor(replicas / 2) + 1
}

/**
 * The objects of a group's central, in the order they are created: the NetworkPolicy (its
 * pods never run unprotected), the Services (their names resolve when pods start), the
 * StatefulSet.
 */
export function centralObjects(
  group: string,
  settings: CentralSettings,
): { networkPolicy: NetworkPolicy; services: [Service, Service]; statefulSet: StatefulSet } {
  const name = centralName(group)
  const peers = `${name}-peers`
  const labels = { ...CENTRAL_LABELS, [GROUP_LABEL]: group, 'app.kubernetes.io/instance': name }
  const selector = centralPodLabels(group)
  const metadata = (objectName: string) => ({
    name: objectName,
    namespace: settings.namespace,
    labels,
  })
  const tls = settings.sbTlsSecret !== undefined
  const nbTls = settings.nbTlsSecret !== undefined
  const port = (portName: string, number: number) => ({
    name: portName,
    port: number,
    targetPort: number,
    protocol: 'TCP' as const,
  })

  // The DPUs' TLS SB from a relay: the SB's own server presents the central's certificate.
  const relay = tls && nbTls
  // The relay on the group's own chassis CA rather than the SB Secret.
  const ownCa = relay && settings.chassisCa === true
  const client = new Service({
    metadata: metadata(name),
    spec: {
      type: 'ClusterIP',
      selector,
      ports: [
        port('nb', CENTRAL_PORTS.nb),
        port('sb', CENTRAL_PORTS.sb),
        ...(controllerSouthboundPort(settings)
          ? [port('sb-controller', CENTRAL_PORTS.sbController)]
          : []),
      ],
    },
  })
  const governing = new Service({
    metadata: metadata(peers),
    spec: {
      clusterIP: 'None',
      publishNotReadyAddresses: true,
      selector,
      ports: [port('nb-raft', CENTRAL_PORTS.nbRaft), port('sb-raft', CENTRAL_PORTS.sbRaft)],
    },
  })

  const env: IEnvVar[] = [
    { name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } },
    { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { fieldPath: 'metadata.namespace' } } },
    { name: 'STATEFULSET', value: name },
    { name: 'PEERS_SERVICE', value: peers },
    { name: 'CLUSTER_DOMAIN', value: settings.clusterDomain },
    { name: 'REPLICAS', value: String(settings.replicas) },
    { name: 'OVN_DB_DIR', value: DATA_DIR },
    { name: 'OVN_RUN_DIR', value: RUN_DIR },
    { name: 'OVN_SCHEMA_DIR', value: '/usr/share/ovn' },
    ...Object.entries(CENTRAL_PORTS).map(([key, value]) => ({
      name: `${key.replace(/[A-Z]/g, (c) => `_${c}`).toUpperCase()}_PORT`,
      value: String(value),
    })),
    ...(tls ? [{ name: 'SB_TLS_DIR', value: TLS_DIR }] : []),
    ...(nbTls ? [{ name: 'NB_TLS_DIR', value: NB_TLS_DIR }] : []),
  ]
  // The central's certificate (the NB Secret) where raft and the controller are served;
  // the DPUs' (the SB Secret) where they are: the relay, else the SB itself. Never northd.
  const dpuSecret = ownCa ? ('sb-chassis' as const) : ('sb-tls' as const)
  const secretsOf = (c: CentralContainer): ('nb-tls' | 'sb-tls' | 'sb-chassis')[] => [
    ...(nbTls && (c === 'nb' || c === 'sb') ? ['nb-tls' as const] : []),
    ...(tls && c === (relay ? 'sb-relay' : 'sb') ? [dpuSecret] : []),
  ]
  const mounts = (c: CentralContainer) => [
    ...(c === 'sb-relay' ? [] : [{ name: 'data', mountPath: DATA_DIR }]),
    { name: 'run', mountPath: RUN_DIR },
    ...secretsOf(c).map((secret) => ({
      name: secret,
      mountPath: secret === 'nb-tls' ? NB_TLS_DIR : TLS_DIR,
      readOnly: true,
    })),
  ]
  const scripts: Record<CentralContainer, string> = {
    nb: DATABASE_SCRIPT,
    sb: DATABASE_SCRIPT,
    'sb-relay': RELAY_SCRIPT,
    northd: NORTHD_SCRIPT,
  }
  const container = (c: CentralContainer, probe: string[]): IContainer => ({
    name: c,
    image: settings.image,
    command: ['/bin/sh', '-c', scripts[c], c, c],
    env,
    volumeMounts: mounts(c),
    ...(c === 'nb' || c === 'sb'
      ? { lifecycle: { postStart: { exec: { command: postStart(c) } } } }
      : {}),
    readinessProbe: { exec: { command: probe }, periodSeconds: 5, timeoutSeconds: 5 },
    livenessProbe: {
      exec: { command: probe },
      initialDelaySeconds: 30,
      periodSeconds: 10,
      timeoutSeconds: 5,
      failureThreshold: 6,
    },
    resources: {
      requests: { cpu: '50m', memory: '64Mi' },
      limits: { memory: c === 'northd' ? '512Mi' : '1Gi' },
    },
    securityContext: restrictedContainer(),
  })

  const statefulSet = new StatefulSet({
    metadata: metadata(name),
    spec: {
      serviceName: peers,
      replicas: settings.replicas,
      // Raft members must start together: the second and third join the first.
      podManagementPolicy: 'Parallel',
      selector: { matchLabels: selector },
      persistentVolumeClaimRetentionPolicy: { whenDeleted: 'Delete', whenScaled: 'Retain' },
      template: {
        metadata: { labels },
        spec: {
          ...restrictedPod(),
          automountServiceAccountToken: false,
          enableServiceLinks: false,
          terminationGracePeriodSeconds: 30,
          containers: [
            container('nb', dbReady('nb')),
            container('sb', dbReady('sb')),
            ...(relay ? [container('sb-relay', dbReady('sb-relay'))] : []),
            container('northd', ['ovn-appctl', '-t', `${RUN_DIR}/ovn-northd.ctl`, 'status']),
          ],
          volumes: [
            { name: 'run', emptyDir: {} },
            ...(tls && !ownCa
              ? [
                  {
                    name: 'sb-tls',
                    secret: { secretName: settings.sbTlsSecret, defaultMode: 0o440 },
                  },
                ]
              : []),
            ...(ownCa
              ? [
                  {
                    name: 'sb-chassis',
                    secret: {
                      secretName: chassisSecretName(group),
                      defaultMode: 0o440,
                      items: CHASSIS_SECRET_RELAY_KEYS.map((key) => ({ key, path: key })),
                    },
                  },
                ]
              : []),
            ...(nbTls
              ? [
                  {
                    name: 'nb-tls',
                    secret: { secretName: settings.nbTlsSecret, defaultMode: 0o440 },
                  },
                ]
              : []),
          ],
          affinity: {
            podAntiAffinity: {
              preferredDuringSchedulingIgnoredDuringExecution: [
                {
                  weight: 100,
                  podAffinityTerm: {
                    labelSelector: { matchLabels: selector },
                    topologyKey: 'kubernetes.io/hostname',
                  },
                },
              ],
            },
          },
        },
      },
      volumeClaimTemplates: [
        {
          metadata: { name: 'data', labels },
          spec: {
            accessModes: ['ReadWriteOnce'],
            resources: { requests: { storage: settings.storage } },
            ...(settings.storageClassName ? { storageClassName: settings.storageClassName } : {}),
          },
        },
      ],
    },
  })
  const networkPolicy = new NetworkPolicy({
    metadata: metadata(name),
    spec: {
      podSelector: { matchLabels: selector },
      policyTypes: ['Ingress'],
      ingress: centralIngress(settings, selector),
    },
  })
  return { networkPolicy, services: [client, governing], statefulSet }
}

/** Who may connect to which of a central's ports (the file's header says why). */
function centralIngress(
  settings: Pick<
    KubernetesCentralsConfig,
    'sbTlsSecret' | 'nbTlsSecret' | 'controllerCidrs' | 'dpuCidrs'
  >,
  selector: Record<string, string>,
): INetworkPolicyIngressRule[] {
  const tls = settings.sbTlsSecret !== undefined
  const ports = (...numbers: number[]) =>
    numbers.map((port) => ({ protocol: 'TCP' as const, port }))
  // Never a rule without peers: Kubernetes reads an empty `from` as every source.
  const fromCidrs = (cidrs: readonly string[], rulePorts: number[]) =>
    cidrs.length === 0
      ? []
      : [{ from: cidrs.map((cidr) => ({ ipBlock: { cidr } })), ports: ports(...rulePorts) }]
  const { nb, sb, nbRaft, sbRaft, sbController } = CENTRAL_PORTS
  return [
    { from: [{ podSelector: { matchLabels: selector } }], ports: ports(nbRaft, sbRaft) },
    ...fromCidrs(settings.controllerCidrs, [
      nb,
      controllerSouthboundPort(settings) ? sbController : sb,
    ]),
    ...(tls && settings.dpuCidrs === undefined
      ? [{ ports: ports(sb) }]
      : fromCidrs(settings.dpuCidrs ?? [], [sb])),
  ]
}

const DATA_DIR = '/var/lib/ovn'
const RUN_DIR = '/var/run/ovn'
const TLS_DIR = '/etc/ovn/sb-tls'
const NB_TLS_DIR = '/etc/ovn/nb-tls'

/** A database answers (a raft member: has joined its cluster; the relay: reached the SB). */
function dbReady(db: 'nb' | 'sb' | 'sb-relay'): string[] {
  const name = db === 'nb' ? 'OVN_Northbound' : 'OVN_Southbound'
  return ['ovsdb-client', '--timeout=3', 'wait', `unix:${RUN_DIR}/${db}.sock`, name, 'connected']
}

/**
 * One database's ovsdb-server, in the foreground. `$1` is `nb` or `sb`; every other
 * value comes from the environment the builder sets. A new volume gets an empty database
 * (raft: replica 0 creates the cluster, the others join it); an existing standalone one is
 * converted when the image's schema is newer (a cluster converts online, in postStart).
 *
 * With the central's certificate (`NB_TLS_DIR`, the NB Secret) the server presents it
 * everywhere it listens: the NB's `pssl:` clients, the controller's SB port `pssl:`, and
 * raft (`ssl:` members, each verifying its peers against the Secret's `ca.crt`); the DPUs'
 * TLS SB is then the relay's (`RELAY_SCRIPT`), a plaintext one (asked for) stays here.
 * Without it, a TLS SB serves the DPUs itself (its `db:` remotes: `pssl:` with the
 * `ovn-controller` role) and the controller on plaintext 6645, and raft is `tcp:`.
 */
export const DATABASE_SCRIPT = `set -eu
db=$1
case "$db" in
  nb) name=OVN_Northbound port=$NB_PORT raft=$NB_RAFT_PORT ;;
  sb) name=OVN_Southbound port=$SB_PORT raft=$SB_RAFT_PORT ;;
  *) echo "unknown database $db" >&2; exit 2 ;;
esac
schema=$OVN_SCHEMA_DIR/ovn-$db.ovsschema
file=$OVN_DB_DIR/$db.db
peers=$PEERS_SERVICE.$POD_NAMESPACE.svc.$CLUSTER_DOMAIN
proto=tcp
if [ -n "\${NB_TLS_DIR:-}" ]; then proto=ssl; fi
if [ ! -e "$file" ]; then
  if [ "$REPLICAS" -eq 1 ]; then
    ovsdb-tool create "$file" "$schema"
  elif [ "\${POD_NAME##*-}" = 0 ]; then
    ovsdb-tool create-cluster "$file" "$schema" "$proto:$POD_NAME.$peers:$raft"
  else
    ovsdb-tool join-cluster "$file" "$name" "$proto:$POD_NAME.$peers:$raft" "$proto:$STATEFULSET-0.$peers:$raft"
  fi
elif [ "$REPLICAS" -eq 1 ] && [ "$(ovsdb-tool needs-conversion "$file" "$schema")" = yes ]; then
  ovsdb-tool convert "$file" "$schema"
fi
set -- "$file" "--remote=punix:$OVN_RUN_DIR/$db.sock" "--unixctl=$OVN_RUN_DIR/$db.ctl" \\
  --no-chdir -vconsole:info -vfile:off
if [ -n "\${NB_TLS_DIR:-}" ]; then
  set -- "$@" "--private-key=$NB_TLS_DIR/tls.key" "--certificate=$NB_TLS_DIR/tls.crt" \\
    "--ca-cert=$NB_TLS_DIR/ca.crt"
  if [ "$db" = nb ]; then
    set -- "$@" "--remote=pssl:$port"
  else
    set -- "$@" "--remote=pssl:$SB_CONTROLLER_PORT"
    if [ -z "\${SB_TLS_DIR:-}" ]; then set -- "$@" "--remote=ptcp:$port"; fi
  fi
elif [ "$db" = sb ] && [ -n "\${SB_TLS_DIR:-}" ]; then
  set -- "$@" --remote=db:OVN_Southbound,SB_Global,connections \\
    "--private-key=$SB_TLS_DIR/tls.key" "--certificate=$SB_TLS_DIR/tls.crt" \\
    "--ca-cert=$SB_TLS_DIR/ca.crt" "--remote=ptcp:$SB_CONTROLLER_PORT"
else
  set -- "$@" "--remote=ptcp:$port"
fi
exec ovsdb-server "$@"
`

/**
 * The DPUs' TLS SB beside a central with its own certificate: an in-memory relay of the
 * pod's SB (over its unix socket, with full access) presenting the certificate in
 * `SB_TLS_DIR` (the group's chassis CA's Secret, or the SB Secret) and admitting client
 * certificates of its `ca.crt` on the SB's `db:` remotes (`pssl:` with the
 * `ovn-controller` role, which the relay enforces before forwarding a write).
 *
 * When `ca.crt` changes (the kubelet updates a mounted Secret atomically, within its sync
 * period, about a minute), the relay drops every session (`ovsdb-server/reconnect`): it
 * reads its key, certificate and CA files again on its next turn (OVS re-reads a file
 * whose mtime changed), before any client reconnects, so a certificate of the replaced CA
 * opens it no more. It checks every `RELAY_CA_POLL_SECONDS` (5 s).
 */
export const RELAY_SCRIPT = `set -eu
ovsdb-server "relay:OVN_Southbound:unix:$OVN_RUN_DIR/sb.sock" \\
  "--remote=punix:$OVN_RUN_DIR/sb-relay.sock" "--unixctl=$OVN_RUN_DIR/sb-relay.ctl" \\
  --remote=db:OVN_Southbound,SB_Global,connections \\
  "--private-key=$SB_TLS_DIR/tls.key" "--certificate=$SB_TLS_DIR/tls.crt" \\
  "--ca-cert=$SB_TLS_DIR/ca.crt" --no-chdir -vconsole:info -vfile:off &
server=$!
trap 'kill -TERM "$server" 2>/dev/null' TERM INT
ca=$(cksum < "$SB_TLS_DIR/ca.crt")
while kill -0 "$server" 2>/dev/null; do
  sleep "\${RELAY_CA_POLL_SECONDS:-5}" & wait $! || true
  now=$(cksum < "$SB_TLS_DIR/ca.crt" 2>/dev/null || echo none)
  if [ "$now" != "$ca" ] && ovn-appctl -t "$OVN_RUN_DIR/sb-relay.ctl" ovsdb-server/reconnect; then
    echo "sb-relay: $SB_TLS_DIR/ca.crt changed: every session dropped" >&2
    ca=$now
  fi
done
wait "$server"
`

/** ovn-northd, following the pod's own NB and SB (raft: one pod's northd is active). */
export const NORTHD_SCRIPT = `set -eu
exec ovn-northd "--ovnnb-db=unix:$OVN_RUN_DIR/nb.sock" "--ovnsb-db=unix:$OVN_RUN_DIR/sb.sock" \\
  "--unixctl=$OVN_RUN_DIR/ovn-northd.ctl" --no-chdir -vconsole:info -vfile:off
`

/**
 * After a database starts: a raft member converts the cluster's database to the image's
 * schema when it is older; a TLS SB gets its `pssl:` remote with the `ovn-controller` role
 * (a row of the database itself: written again, the same, by every replica).
 */
export const POST_START_SCRIPT = `db=$1
sock=unix:$OVN_RUN_DIR/$db.sock
schema=$OVN_SCHEMA_DIR/ovn-$db.ovsschema
for _ in $(seq 60); do ovsdb-client --timeout=5 list-dbs "$sock" >/dev/null 2>&1 && break; sleep 1; done
if [ "$REPLICAS" -ne 1 ] && [ "$(ovsdb-client --timeout=30 needs-conversion "$sock" "$schema")" = yes ]; then
  ovsdb-client --timeout=60 convert "$sock" "$schema" || exit 1
fi
if [ "$db" = sb ] && [ -n "\${SB_TLS_DIR:-}" ]; then
  ovn-sbctl "--db=$sock" --no-leader-only --timeout=30 set-connection role=ovn-controller "pssl:$SB_PORT" || exit 1
fi
exit 0
`

function postStart(db: 'nb' | 'sb'): string[] {
  return ['/bin/sh', '-c', POST_START_SCRIPT, db, db]
}
