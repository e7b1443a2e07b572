import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import type { IDaemonSet } from 'kubernetes-models/apps/v1/DaemonSet'
import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment'
import { Deployment } from 'kubernetes-models/apps/v1/Deployment'
import type { IPodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget'
import type { IRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role'
import type { IRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding'
import type { IContainer } from 'kubernetes-models/v1/Container'
import type { IService } from 'kubernetes-models/v1/Service'
import t from 'tap'
import { kubernetesConfig } from '../../lib/config/kubernetes.ts'
import { ConfigError } from '../../lib/errors.ts'
import { CENTRALS_RBAC_RULES } from '../centrals/kubernetes-api.ts'
import { dpuSecretName } from './agent.ts'
import { generate } from './generate.ts'
import { buildManifests, type Manifest, parseYaml, toYaml, validateManifests } from './manifests.ts'
import { type ManifestOptionsInput, parseManifestOptions } from './options.ts'
import { centralObjects } from './ovn-central.ts'

const dpus = [
  {
    id: 'dpu-1',
    node: 'worker-1.dpu',
    fabricIps: ['172.18.0.11', '172.18.0.111'],
    hostPorts: ['pf0hpf', 'pf1hpf'],
    env: { HZ_RELAY_UPLINK_IPS: '100.64.0.11/24' },
  },
  { id: 'BF3_dpu.2', node: 'worker-2.dpu', fabricIps: ['172.18.0.12'], hostPorts: ['pf0hpf'] },
]
/** The least the options take: who may reach the centrals. */
const centrals = {
  controllerCidrs: ['10.0.0.0/24'],
  dpuCidrs: ['172.18.0.0/24'],
  plaintextSouthbound: true,
  plaintextNorthbound: true,
}
const minimal: ManifestOptionsInput = { centrals }
const full: ManifestOptionsInput = {
  namespace: 'net',
  image: 'registry.example/hydrazine:1.2.3',
  controller: { replicas: 3, env: { HYDRAZINE_DHCP_SERVERS: '10.0.0.53' } },
  secrets: { redisCa: 'redis-ca' },
  bgp: { asn: 65001, peers: [{ address: '172.18.0.1', remoteAs: 65000 }] },
  centrals: {
    replicas: 3,
    sbTlsSecret: 'ovn-sb-tls',
    nbTlsSecret: 'ovn-nb-tls',
    storageClassName: 'fast',
    controllerCidrs: ['10.0.0.11/32', '10.0.0.12/32', 'fd00:10::/64'],
  },
  dpus,
}

/** The objects of one kind, as their JSON. */
function ofKind<T>(objects: readonly Manifest[], kind: string): T[] {
  return objects.filter((o) => o.kind === kind).map((o) => o.toJSON() as T)
}
const build = (input: ManifestOptionsInput = minimal) => buildManifests(parseManifestOptions(input))
const podSpec = (o: IDeployment | IDaemonSet) => o.spec?.template.spec
const container = (o: IDeployment | IDaemonSet, name: string): IContainer | undefined =>
  podSpec(o)?.containers.find((c) => c.name === name)

t.test('every generated object validates against the Kubernetes schemas', async (t) => {
  for (const [name, input] of [
    ['defaults', minimal],
    ['every option', full],
  ] as const) {
    const objects = build(input)
    t.doesNotThrow(() => validateManifests(objects), name)
    for (const o of objects) t.doesNotThrow(() => o.validate(), `${name}: ${o.kind}`)
  }
  for (const replicas of [1, 3] as const) {
    const { networkPolicy, services, statefulSet } = centralObjects('tenant-a', {
      namespace: 'net',
      image: 'i',
      replicas,
      storage: '1Gi',
      clusterDomain: 'cluster.local',
      sbTlsSecret: 'tls',
      nbTlsSecret: 'nb-tls',
      controllerCidrs: ['10.0.0.0/24'],
    })
    for (const o of [...services, statefulSet, networkPolicy])
      t.doesNotThrow(() => o.validate(), o.kind)
  }
})

t.test('a wrong object fails validation, naming it', async (t) => {
  const objects = build()
  const deployment = objects.find((o) => o.kind === 'Deployment') as Deployment
  const broken = new Deployment({
    ...(deployment.toJSON() as IDeployment),
    spec: { ...(deployment.spec as NonNullable<IDeployment['spec']>), replicas: 'two' as never },
  })
  t.throws(() => validateManifests([...objects, broken]), {
    name: 'Error',
    message: /^Deployment hydrazine\/hydrazine-controller: .*replicas must be integer/,
  })
  t.throws(() => validateManifests([broken]), { code: 'K8S_MANIFEST_INVALID' })
  const nameless = new Deployment({
    metadata: { name: 'x' },
    spec: {
      selector: {},
      template: { spec: { containers: [{ image: 'i' } as IContainer] } },
    },
  })
  t.throws(() => nameless.validate(), /containers\/0 must have required property name/)
})

t.test('the controller: replicas, probes, selectors, FRR beside it', async (t) => {
  const objects = build()
  const [deployment] = ofKind<IDeployment>(objects, 'Deployment')
  const [pdb] = ofKind<IPodDisruptionBudget>(objects, 'PodDisruptionBudget')
  const [service] = ofKind<IService>(objects, 'Service')
  if (!deployment || !pdb || !service) throw new Error('missing objects')
  t.ok((deployment.spec?.replicas ?? 0) >= 2, 'at least two replicas')
  const controller = container(deployment, 'controller')
  const http = controller?.ports?.find((p) => p.name === 'http')
  t.equal(http?.containerPort, 8080)
  t.equal(controller?.ports?.find((p) => p.name === 'grpc')?.containerPort, 8081)
  t.match(controller?.livenessProbe?.httpGet, { path: '/healthz', port: 'http', scheme: 'HTTPS' })
  t.match(controller?.readinessProbe?.httpGet, { path: '/readyz', port: 'http', scheme: 'HTTPS' })
  const env = Object.fromEntries((controller?.env ?? []).map((e) => [e.name, e]))
  t.equal(env.HYDRAZINE_HTTP_PORT?.value, '8080', 'it listens where the probes ask')
  t.match(env.REDIS_URL?.valueFrom?.secretKeyRef, { name: 'hydrazine-redis', key: 'url' })
  t.match(
    env.AGENTS_REDIS_URL?.valueFrom?.secretKeyRef,
    { name: 'hydrazine-agents-redis', key: 'url' },
    "the agents' Redis is a Redis of its own",
  )
  t.equal(env.HYDRAZINE_OVN_CENTRAL?.value, 'kubernetes')

  const podLabels = deployment.spec?.template.metadata?.labels ?? {}
  const selects = (selector: Record<string, string> | undefined) =>
    Object.entries(selector ?? {}).every(([k, v]) => podLabels[k] === v) &&
    Object.keys(selector ?? {}).length > 0
  t.ok(selects(deployment.spec?.selector.matchLabels), 'the Deployment selects its pods')
  t.ok(selects(pdb.spec?.selector?.matchLabels), 'the PDB selects them')
  t.equal(pdb.spec?.minAvailable, 1)
  t.ok(selects(service.spec?.selector), 'the Service selects them')
  const named = new Set((controller?.ports ?? []).map((p) => p.name))
  for (const port of service.spec?.ports ?? [])
    t.ok(named.has(String(port.targetPort)), `Service port ${port.name} reaches the container`)

  const frr = container(deployment, 'frr')
  const vty = env.HYDRAZINE_FRR_VTY_DIR?.value
  const mountOf = (c: IContainer | undefined) =>
    c?.volumeMounts?.find((m) => m.mountPath === vty)?.name
  t.ok(mountOf(frr), 'FRR has the vty socket directory')
  t.equal(mountOf(frr), mountOf(controller), 'the same volume as the controller')
  t.ok(podSpec(deployment)?.hostNetwork, 'bgpd peers from the node')
  t.match(
    podSpec(deployment)?.affinity?.podAntiAffinity?.requiredDuringSchedulingIgnoredDuringExecution,
    [{ topologyKey: 'kubernetes.io/hostname' }],
  )
  for (const c of podSpec(deployment)?.containers ?? []) {
    t.match(c.securityContext, { readOnlyRootFilesystem: true, allowPrivilegeEscalation: false })
    t.ok(c.resources?.requests && c.resources.limits, `${c.name}: requests and limits`)
  }
  t.match(podSpec(deployment)?.securityContext, { runAsNonRoot: true })
})

t.test("the controller's central settings parse back to what the options say", async (t) => {
  const cases: [string, ManifestOptionsInput][] = [
    ['plaintext SB and NB', minimal],
    ['TLS SB and NB', full],
  ]
  for (const [name, input] of cases) {
    const o = parseManifestOptions(input)
    const [deployment] = ofKind<IDeployment>(buildManifests(o), 'Deployment')
    const env: Record<string, string> = {}
    for (const e of container(deployment as IDeployment, 'controller')?.env ?? [])
      if (e.value !== undefined) env[e.name] = e.value
    const parsed = kubernetesConfig('kubernetes', env, () => o.namespace)
    if (!parsed.ok) throw new Error(`${name}: ${parsed.path}: ${parsed.message}`)
    t.same(parsed.kubernetes?.controllerCidrs, o.centrals.controllerCidrs, `${name}: controller`)
    t.same(parsed.kubernetes?.dpuCidrs, o.centrals.dpuCidrs, `${name}: DPUs`)
    t.same(parsed.kubernetes?.sbTlsSecret, o.centrals.sbTlsSecret, `${name}: TLS Secret`)
    t.same(parsed.kubernetes?.nbTlsSecret, o.centrals.nbTlsSecret, `${name}: NB TLS Secret`)
  }
})

t.test('with an NB TLS Secret the controller mounts its NB client certificate', async (t) => {
  const [deployment] = ofKind<IDeployment>(build(full), 'Deployment')
  if (!deployment) throw new Error('no Deployment')
  const controller = container(deployment, 'controller')
  const env = Object.fromEntries((controller?.env ?? []).map((e) => [e.name, e.value]))
  const volume = podSpec(deployment)?.volumes?.find(
    (v) => v.secret?.secretName === 'hydrazine-ovn-nb-client',
  )
  t.ok(volume, 'the client Secret is a volume of the pod')
  const dir = controller?.volumeMounts?.find((m) => m.name === volume?.name)?.mountPath
  t.ok(dir, 'mounted in the controller')
  t.same(
    [env.HYDRAZINE_K8S_NB_CLIENT_CERT, env.HYDRAZINE_K8S_NB_CLIENT_KEY, env.HYDRAZINE_K8S_NB_CA],
    [`${dir}/tls.crt`, `${dir}/tls.key`, `${dir}/ca.crt`],
    'and its files named for the NB connections',
  )
  t.equal(env.HYDRAZINE_K8S_CENTRAL_NB_TLS_SECRET, 'ovn-nb-tls')
  t.notOk(env.HYDRAZINE_K8S_CENTRAL_PLAINTEXT_NB)
  const [plain] = ofKind<IDeployment>(build(minimal), 'Deployment')
  t.notOk(JSON.stringify(plain).includes('nb-client'), 'a plaintext NB: no client Secret')
})

t.test('bgpd starts from the configuration the embedded FRR would have', async (t) => {
  const [configMap] = ofKind<{ data: Record<string, string> }>(build(full), 'ConfigMap')
  const conf = configMap?.data['bgpd.conf'] ?? ''
  t.match(conf, /router bgp 65001\n bgp router-id 0\.0\.0\.0\n/, 'a router id to fill in')
  t.match(conf, / neighbor 172\.18\.0\.1 remote-as 65000\n/)
  t.match(conf, /route-map HZ-IMPORT deny 10/, 'learns nothing from the fabric')
})

t.test('the RBAC Role grants exactly what the central provider needs', async (t) => {
  const [role] = ofKind<IRole>(build(), 'Role')
  t.same(
    role?.rules,
    CENTRALS_RBAC_RULES.map((r) => ({
      apiGroups: [...r.apiGroups],
      resources: [...r.resources],
      verbs: [...r.verbs],
    })),
  )
  t.equal(ofKind(build(), 'ClusterRole').length, 0, 'nothing cluster-wide')
})

t.test('the centrals in a namespace of their own, where alone Secrets are granted', async (t) => {
  const o = parseManifestOptions(full)
  const objects = buildManifests(o)
  const namespaces = ofKind<{ metadata: { name: string; labels: Record<string, string> } }>(
    objects,
    'Namespace',
  )
  t.same(
    namespaces.map((n) => n.metadata.name),
    ['net', 'net-centrals'],
  )
  t.equal(
    namespaces[1]?.metadata.labels['pod-security.kubernetes.io/enforce'],
    'restricted',
    "the centrals' pods are restricted",
  )
  const roles = ofKind<IRole>(objects, 'Role')
  t.same(
    roles.map((r) => [
      r.metadata?.namespace,
      r.rules?.some((x) => x.resources?.includes('secrets')),
    ]),
    [['net-centrals', true]],
    "one Role, in the centrals' namespace: Secrets there, none in the DPUs' namespace",
  )
  const [binding] = ofKind<IRoleBinding>(objects, 'RoleBinding')
  t.equal(binding?.metadata?.namespace, 'net-centrals')
  t.same(binding?.subjects, [
    { kind: 'ServiceAccount', name: 'hydrazine-controller', namespace: 'net' },
  ])

  const [deployment] = ofKind<IDeployment>(objects, 'Deployment')
  if (!deployment) throw new Error('no Deployment')
  const controller = container(deployment, 'controller')
  const env = Object.fromEntries((controller?.env ?? []).map((e) => [e.name, e.value]))
  t.equal(env.HYDRAZINE_K8S_NAMESPACE, 'net-centrals', 'the controller makes the centrals there')
  const volume = podSpec(deployment)?.volumes?.find(
    (v) => v.secret?.secretName === 'hydrazine-dpu-ca',
  )
  t.same(
    volume?.secret?.items,
    [{ key: 'ca.crt', path: 'ca.crt' }],
    "the DPUs' CA: its certificate only",
  )
  const dir = controller?.volumeMounts?.find((m) => m.name === volume?.name)?.mountPath
  t.equal(env.HYDRAZINE_K8S_DPU_CA, `${dir}/ca.crt`)
  const parsed = kubernetesConfig('kubernetes', env as Record<string, string>, () => undefined)
  if (!parsed.ok) throw new Error(`${parsed.path}: ${parsed.message}`)
  t.equal(parsed.kubernetes?.namespace, 'net-centrals')
  t.equal(parsed.kubernetes?.dpuCaFile, `${dir}/ca.crt`, 'parses back: chassis CAs on')

  // Kept where an earlier version made them: no Secret granted, no chassis CA.
  const kept = buildManifests(
    parseManifestOptions({ ...full, centrals: { ...full.centrals, namespace: 'net' } }),
  )
  t.same(
    ofKind<IRole>(kept, 'Role').map((r) => r.metadata?.namespace),
    ['net'],
  )
  t.notOk(
    ofKind<IRole>(kept, 'Role').some((r) => r.rules?.some((x) => x.resources?.includes('secrets'))),
    "centrals beside the DPUs' Secrets: no Secret granted",
  )
  t.notOk(JSON.stringify(kept).includes('HYDRAZINE_K8S_DPU_CA'), 'and no chassis CAs')
  t.equal(ofKind(kept, 'Namespace').length, 1)
  const plain = buildManifests(parseManifestOptions(minimal))
  t.notOk(JSON.stringify(plain).includes('HYDRAZINE_K8S_DPU_CA'), 'plaintext SB and NB: none')
  t.throws(() => parseManifestOptions({ ...minimal, namespace: 'n'.repeat(60) }), {
    message: /centrals\.namespace: n+-centrals is longer than 63 characters/,
  })
})

t.test('an agent per DPU: its node, the host network, OVS, its own Secret', async (t) => {
  const daemonSets = ofKind<IDaemonSet>(build(full), 'DaemonSet')
  t.equal(daemonSets.length, dpus.length)
  for (const [i, ds] of daemonSets.entries()) {
    const dpu = dpus[i]
    if (!dpu) throw new Error('no DPU')
    const spec = podSpec(ds)
    const agent = container(ds, 'agent')
    const env = Object.fromEntries((agent?.env ?? []).map((e) => [e.name, e]))
    t.equal(env.HZ_DPU_ID?.value, dpu.id)
    t.equal(spec?.hostNetwork, true, 'host network')
    t.match(spec?.nodeSelector, { 'hydrazine.io/dpu': 'true' }, 'DPU nodes only')
    t.match(
      spec?.affinity?.nodeAffinity?.requiredDuringSchedulingIgnoredDuringExecution
        ?.nodeSelectorTerms,
      [{ matchFields: [{ key: 'metadata.name', operator: 'In', values: [dpu.node] }] }],
      'and this DPU node only',
    )
    const ovs = spec?.volumes?.find((v) => v.hostPath?.path === '/var/run/openvswitch')
    const ovsMount = agent?.volumeMounts?.find((m) => m.name === ovs?.name)
    t.ok(ovsMount, 'the host OVS run directory is mounted')
    t.equal(env.HZ_OVS_DB?.value, `unix:${ovsMount?.mountPath}/db.sock`, 'and its socket used')

    const secret = dpuSecretName(dpu)
    t.match(env.REDIS_URL?.valueFrom?.secretKeyRef, { name: secret, key: 'redis-url' })
    const credentials = spec?.volumes?.find((v) => v.secret)
    t.equal(credentials?.secret?.secretName, secret)
    const dir = agent?.volumeMounts?.find((m) => m.name === credentials?.name)?.mountPath
    t.equal(env.HZ_TLS_CERT?.value, `${dir}/tls.crt`)
    t.equal(env.HZ_TLS_KEY?.value, `${dir}/tls.key`)
    const named = JSON.stringify(ds).match(/hydrazine-dpu-[a-z0-9-]+/g) ?? []
    t.same([...new Set(named)], [secret], 'it names no other DPU Secret')
  }
  const firstEnv = container(daemonSets[0] as IDaemonSet, 'agent')?.env ?? []
  t.match(
    firstEnv.filter((e) => e.name === 'HZ_FABRIC_IPS' || e.name === 'HZ_RELAY_UPLINK_IPS'),
    [
      { name: 'HZ_FABRIC_IPS', value: '172.18.0.11,172.18.0.111' },
      { name: 'HZ_RELAY_UPLINK_IPS', value: '100.64.0.11/24' },
    ],
  )
  t.notOk(JSON.stringify(daemonSets[1]).includes('HZ_RELAY_UPLINK_IPS'), 'per-DPU variables')
})

t.test('the YAML round-trips to the same objects', async (t) => {
  const objects = build(full)
  const yaml = toYaml(objects)
  t.match(yaml, /^# Generated by `npm run k8s`/)
  const parsed = parseYaml(yaml)
  t.same(parsed, JSON.parse(JSON.stringify(objects.map((o) => o.toJSON()))))
})

t.test('options: defaults, and every bad field named', async (t) => {
  const o = parseManifestOptions(minimal)
  t.equal(o.namespace, 'hydrazine')
  t.equal(o.controller.replicas, 2)
  t.equal(o.centrals.replicas, 1)
  const tls = {
    controllerCidrs: ['10.0.0.0/24'],
    sbTlsSecret: 'ovn-sb-tls',
    nbTlsSecret: 'ovn-nb-tls',
  }
  t.equal(parseManifestOptions({ centrals: tls }).centrals.dpuCidrs, undefined, 'TLS: no DPU CIDRs')
  const cases: [ManifestOptionsInput, RegExp][] = [
    [{ ...minimal, controller: { replicas: 1 } }, /controller\.replicas/],
    [{ ...minimal, namespace: 'Net' }, /namespace: must be an RFC 1123 label/],
    [{ centrals: { ...centrals, replicas: 2 as 1 } }, /centrals\.replicas/],
    [{} as never, /centrals: required, with controllerCidrs: .*host network/],
    [{ centrals: { dpuCidrs: ['172.18.0.0/24'] } as never }, /centrals\.controllerCidrs: required/],
    [{ centrals: { ...centrals, controllerCidrs: [] } }, /controllerCidrs: must list at least one/],
    [
      { centrals: { ...centrals, controllerCidrs: ['10.0.0.1/24'] } },
      /centrals\.controllerCidrs\.0: must be a network address: no host bits/,
    ],
    [
      { centrals: { ...centrals, dpuCidrs: ['172.18.0.0'] } },
      /centrals\.dpuCidrs\.0: must be a CIDR/,
    ],
    [
      { centrals: { controllerCidrs: ['10.0.0.0/24'], plaintextSouthbound: true } },
      /centrals\.dpuCidrs: required without sbTlsSecret/,
    ],
    [
      { centrals: { controllerCidrs: ['10.0.0.0/24'], dpuCidrs: ['172.18.0.0/24'] } },
      /centrals\.sbTlsSecret: required unless plaintextSouthbound is true/,
    ],
    [
      { centrals: { ...centrals, sbTlsSecret: 'ovn-sb-tls' } },
      /centrals\.sbTlsSecret: required unless plaintextSouthbound is true, and not with it/,
    ],
    [
      { centrals: { ...centrals, plaintextNorthbound: undefined as never } },
      /centrals\.nbTlsSecret: required unless plaintextNorthbound is true/,
    ],
    [
      { centrals: { ...centrals, nbTlsSecret: 'ovn-nb-tls' } },
      /centrals\.nbTlsSecret: required unless plaintextNorthbound is true, and not with it/,
    ],
    [
      { ...minimal, dpus: [{ ...dpus[1], fabricIps: ['fd00::1'] }] as never },
      /dpus\.0\.fabricIps\.0/,
    ],
    [{ ...minimal, dpus: [dpus[0], dpus[0]] as never }, /dpus: id dpu-1 is listed twice/],
    [
      { ...minimal, dpus: [dpus[0], { ...dpus[1], node: dpus[0]?.node }] as never },
      /dpus: node worker-1\.dpu is listed twice/,
    ],
  ]
  for (const [input, message] of cases) t.throws(() => parseManifestOptions(input), message)
  t.throws(() => parseManifestOptions({ ...minimal, controller: { replicas: 1 } }), ConfigError)
})

t.test('the generator writes the stream it validated', async (t) => {
  const dir = t.testdir({ 'options.json': JSON.stringify(full), 'bad.json': '{' })
  const { file, yaml } = await generate(['--config', join(dir, 'options.json'), '--out', dir])
  t.equal(file, join(dir, 'hydrazine.yaml'))
  t.equal(await readFile(join(dir, 'hydrazine.yaml'), 'utf8'), yaml)
  t.same(parseYaml(yaml), JSON.parse(JSON.stringify(build(full).map((o) => o.toJSON()))))
  t.notOk(
    (await generate(['--config', join(dir, 'options.json')])).file,
    'no --out: the caller prints it',
  )
  await t.rejects(generate([]), /centrals: required, with controllerCidrs/, 'no options: refused')
  await t.rejects(generate(['--config', join(dir, 'bad.json')]), /not valid JSON/)
  await t.rejects(generate(['--bogus']), /Unknown option/)
})
