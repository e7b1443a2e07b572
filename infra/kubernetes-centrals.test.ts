import type { IStatefulSet } from 'kubernetes-models/apps/v1/StatefulSet'
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy'
import type { INetworkPolicySpec } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicySpec'
import t from 'tap'
import type { KubernetesCentralsConfig } from '../lib/config/kubernetes.ts'
import { CentralUnavailableError } from '../lib/ovn/central.ts'
import { controllerRole } from './k8s/controller.ts'
import { FakeKubernetes, type Rule } from './k8s/fake-api.ts'
import { admits, type Source } from './k8s/fake-network-plugin.ts'
import { parseManifestOptions } from './k8s/options.ts'
import { CENTRAL_PORTS, centralName, centralObjects } from './k8s/ovn-central.ts'
import { policyUpdate, RELEASED_ANNOTATION } from './kubernetes-central-policy.ts'
import { type KubernetesCentralsOptions, kubernetesCentrals } from './kubernetes-centrals.ts'
import { CENTRALS_RBAC_RULES, fromJson, toJson } from './kubernetes-centrals-api.ts'

const NS = 'hydrazine'
const settings: KubernetesCentralsConfig = {
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
function setup(
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
function storedPolicy(api: FakeKubernetes, group: string): INetworkPolicy | undefined {
  return api.objects.networkpolicies.get(`${NS}/${centralName(group)}`) as
    | INetworkPolicy
    | undefined
}

/** The pods of the group's central: how many, and how many are terminating. */
function podsOf(api: FakeKubernetes, group: string) {
  const pods = [...api.objects.pods.values()].filter((pod) =>
    pod.metadata?.name?.startsWith(`${centralName(group)}-`),
  )
  return {
    pods: pods.length,
    terminating: pods.filter((p) => p.metadata?.deletionTimestamp).length,
  }
}

const controllerNode: Source = { ip: '10.0.0.11' }
const tenantPod: Source = { ip: '10.244.3.7' }

/** What ensure threw, or undefined when it answered. */
async function refusal(promise: Promise<unknown>): Promise<CentralUnavailableError | undefined> {
  try {
    await promise
    return undefined
  } catch (error) {
    if (error instanceof CentralUnavailableError) return error
    throw error
  }
}

t.test('ensure creates the group central, then answers once it is ready', async (t) => {
  const { api, centrals, ready } = setup()
  const name = centralName('tenant-a')

  const first = await refusal(centrals.ensure('tenant-a'))
  t.ok(first?.retryable, 'not ready yet: retryable')
  t.match(first?.message, /0 of 1 replicas ready/)
  t.same(api.names('statefulsets'), [name])
  t.same(api.names('services'), [name, `${name}-peers`].sort())
  t.same(api.names('persistentvolumeclaims'), [`data-${name}-0`], 'its volume, from the template')
  t.same(api.names('networkpolicies'), [name], 'and its NetworkPolicy')
  const uid = (resource: keyof typeof api.objects, object: string) =>
    Number(api.objects[resource].get(`${NS}/${object}`)?.metadata?.uid?.replace('uid-', ''))
  t.ok(
    uid('networkpolicies', name) < uid('services', name) &&
      uid('services', `${name}-peers`) < uid('statefulsets', name),
    'created first: the policy, then the Services, then the StatefulSet',
  )

  const uids = api.snapshot()
  t.ok((await refusal(centrals.ensure('tenant-a')))?.retryable, 'still not ready')
  t.equal(api.snapshot(), uids, 'a second ensure creates nothing new')

  ready('tenant-a')
  const host = `${name}.${NS}.svc.cluster.local`
  t.same(await centrals.ensure('tenant-a'), {
    nb: `tcp:${host}:6641`,
    sb: `tcp:${host}:6642`,
    sbController: `tcp:${host}:6642`,
    service: name,
    group: 'tenant-a',
  })
  t.equal(api.snapshot(), uids, 'nor does ensure once it is ready')
})

t.test('the objects: labels, selectors, volume, the image', async (t) => {
  const { api, centrals } = setup({ storageClassName: 'fast', storage: '2Gi' })
  await refusal(centrals.ensure('tenant-a'))
  const name = centralName('tenant-a')
  const sts = await api.readStatefulSet(NS, name)
  t.match(sts.metadata?.labels, {
    'app.kubernetes.io/managed-by': 'hydrazine',
    'hydrazine.io/group': 'tenant-a',
  })
  const podLabels = sts.spec?.template.metadata?.labels ?? {}
  for (const [k, v] of Object.entries(sts.spec?.selector.matchLabels ?? {}))
    t.equal(podLabels[k], v, `the selector matches the pods: ${k}`)
  t.equal(sts.spec?.serviceName, `${name}-peers`, 'governed by the headless Service')
  t.same(
    sts.spec?.template.spec?.containers.map((c) => [c.name, c.image]),
    ['nb', 'sb', 'northd'].map((c) => [c, settings.image]),
  )
  t.match(sts.spec?.volumeClaimTemplates?.[0]?.spec, {
    accessModes: ['ReadWriteOnce'],
    resources: { requests: { storage: '2Gi' } },
    storageClassName: 'fast',
  })
  const { services } = centralObjects('tenant-a', { ...settings })
  t.same(services[0].spec?.selector, sts.spec?.selector.matchLabels, 'the Service selects them')
  t.equal(services[1].spec?.clusterIP, 'None')
  const policy = api.objects.networkpolicies.get(`${NS}/${name}`) as
    | { metadata?: { labels?: Record<string, string> }; spec?: INetworkPolicySpec }
    | undefined
  t.same(policy?.spec?.podSelector.matchLabels, sts.spec?.selector.matchLabels, 'the policy too')
  t.match(policy?.metadata?.labels, { 'hydrazine.io/group': 'tenant-a' })
})

t.test('no policy, no central: the pods never run open', async (t) => {
  const rules = (CENTRALS_RBAC_RULES as readonly Rule[]).filter(
    (r) => !r.resources.includes('networkpolicies'),
  )
  const { api, centrals } = setup({}, rules)
  const refused = await refusal(centrals.ensure('tenant-a'))
  t.equal(refused?.retryable, false, 'the API refused the policy (403): not retried')
  t.same(api.names('statefulsets'), [], 'no StatefulSet without its policy')
  t.same(api.names('services'), [], 'nor Services')
})

t.test('two groups, two centrals; long names stay valid and distinct', async (t) => {
  const { api, centrals, ready } = setup()
  const long = 'a'.repeat(62)
  const groups = ['tenant-a', 'tenant-b', `${long}1`, `${long}2`, '0-starts-with-a-digit']
  for (const group of groups) await refusal(centrals.ensure(group))
  const names = groups.map(centralName)
  t.equal(new Set(names).size, groups.length, 'distinct names')
  for (const name of names) {
    t.ok(name.length <= 52, `${name}: at most 52 characters`)
    t.match(name, /^[a-z]([a-z0-9-]*[a-z0-9])?$/, `${name}: a DNS-1035 label`)
  }
  t.equal(api.names('statefulsets').length, groups.length, 'the fake API took every one')
  t.equal(centralName('tenant-a'), names[0], 'deterministic')

  for (const group of groups) ready(group)
  const ensured = await Promise.all(groups.map((g) => centrals.ensure(g)))
  t.equal(new Set(ensured.map((e) => e.nb)).size, groups.length, 'distinct NB remotes')
  t.same((await centrals.groups()).sort(), [...groups].sort())
})

t.test('release deletes it all, idempotently; ensure waits for the deletion', async (t) => {
  const { api, centrals, ready } = setup()
  await refusal(centrals.ensure('tenant-a'))
  await refusal(centrals.ensure('tenant-b'))
  ready('tenant-a')
  ready('tenant-b')

  await centrals.release('tenant-a')
  const deleting = await refusal(centrals.ensure('tenant-a'))
  t.ok(deleting?.retryable, 'while it is being deleted: retryable')
  t.match(deleting?.message, /being deleted/)
  t.same(await centrals.groups(), ['tenant-b'], 'a central being deleted is no group of ours')
  t.same(
    (await centrals.list()).map((e) => e.group),
    ['tenant-b'],
  )
  await centrals.release('tenant-a')
  t.pass('release again while deleting: fine')

  api.settle()
  const a = centralName('tenant-a')
  const b = centralName('tenant-b')
  t.same(api.names('statefulsets'), [b], "tenant-a's StatefulSet is gone")
  t.same(api.names('pods'), [`${b}-0`], 'and its pod')
  t.same(api.names('services'), [b, `${b}-peers`].sort(), 'and its Services')
  t.same(api.names('persistentvolumeclaims'), [`data-${b}-0`], 'and its volume')
  t.same(api.names('networkpolicies'), [a, b].sort(), 'its NetworkPolicy outlived its pod')
  await centrals.release('tenant-a')
  t.pass('release once gone: fine (404s)')
  t.same(api.names('networkpolicies'), [b], 'and its NetworkPolicy is gone now that no pod is')

  t.ok((await refusal(centrals.ensure('tenant-a')))?.retryable, 'the group again: a new central')
  t.ok(api.names('statefulsets').includes(centralName('tenant-a')))
})

t.test('a volume still being deleted holds a new central back', async (t) => {
  const { api, centrals } = setup()
  await refusal(centrals.ensure('tenant-a'))
  await centrals.release('tenant-a')
  api.objects.statefulsets.clear() // the StatefulSet is gone, the volume not yet
  const held = await refusal(centrals.ensure('tenant-a'))
  t.ok(held?.retryable)
  t.match(held?.message, /volumes of its previous central are being deleted/)
  t.same(api.names('statefulsets'), [], 'nothing created on top of the old volume')
})

t.test('a Service or the policy deleted by hand comes back while not ready', async (t) => {
  const { api, centrals } = setup()
  await refusal(centrals.ensure('tenant-a'))
  const name = centralName('tenant-a')
  await api.deleteService(NS, `${name}-peers`)
  await api.deleteNetworkPolicy(NS, name)
  await refusal(centrals.ensure('tenant-a'))
  t.same(api.names('services'), [name, `${name}-peers`].sort())
  t.same(api.names('networkpolicies'), [name])
})

t.test('the policy deleted by hand comes back at reconcile, while ready too', async (t) => {
  const { api, centrals, ready } = setup()
  await refusal(centrals.ensure('tenant-a'))
  ready('tenant-a')
  await api.deleteNetworkPolicy(NS, centralName('tenant-a'))
  await centrals.ensure('tenant-a')
  t.equal(storedPolicy(api, 'tenant-a'), undefined, 'a job does not read the policy again')
  await centrals.tidy?.()
  const policy = storedPolicy(api, 'tenant-a')
  t.ok(policy && admits(policy, controllerNode, CENTRAL_PORTS.nb), 'the controller reaches NB')
  t.notOk(policy && admits(policy, tenantPod, CENTRAL_PORTS.nb), 'no other pod does')
})

t.test('release keeps the NetworkPolicy while the central pods terminate', async (t) => {
  const { api, centrals, ready, hooks } = setup({ replicas: 3 })
  await refusal(centrals.ensure('tenant-a'))
  ready('tenant-a', 3)
  const { nb } = CENTRAL_PORTS
  const looks: { terminating: number; policy: boolean; tenantPodReachesNb: boolean }[] = []
  hooks.whileWaiting = () => {
    const policy = storedPolicy(api, 'tenant-a')
    looks.push({
      terminating: podsOf(api, 'tenant-a').terminating,
      policy: policy !== undefined,
      tenantPodReachesNb: policy === undefined || admits(policy, tenantPod, nb),
    })
    if (looks.length === 3) api.settle() // the pods stop
  }
  await centrals.release('tenant-a')
  t.same(
    looks,
    [1, 2, 3].map(() => ({ terminating: 3, policy: true, tenantPodReachesNb: false })),
    'while its pods terminate, the policy stands and still closes NB',
  )
  t.same(podsOf(api, 'tenant-a'), { pods: 0, terminating: 0 })
  t.same(api.names('networkpolicies'), [], 'gone once the pods are, in the same release')
})

t.test('pods that outlast the wait keep the policy until a later pass', async (t) => {
  // Who finishes the release once the pods are gone: reconcile (tidy()) or release again.
  const finishers: [string, (c: ReturnType<typeof setup>['centrals']) => Promise<unknown>][] = [
    ['reconcile (tidy)', (c) => c.tidy?.() ?? Promise.resolve()],
    ['release again', (c) => c.release('tenant-a')],
  ]
  for (const [who, finish] of finishers) {
    const logged: string[] = []
    const { api, centrals, ready } = setup({ log: (line) => logged.push(line) })
    await refusal(centrals.ensure('tenant-a'))
    ready('tenant-a')
    await centrals.release('tenant-a')
    t.same(podsOf(api, 'tenant-a'), { pods: 1, terminating: 1 }, `${who}: a pod still stopping`)
    const policy = storedPolicy(api, 'tenant-a')
    t.ok(policy, `${who}: its policy stays`)
    t.notOk(policy && admits(policy, tenantPod, CENTRAL_PORTS.nb), `${who}: NB still closed`)
    t.match(logged.at(-1), /pods are still stopping, so NetworkPolicy \S+ stays/)

    await finish(centrals)
    t.ok(storedPolicy(api, 'tenant-a'), `${who} while the pod still stops: the policy stays`)
    api.settle()
    await finish(centrals)
    t.same(api.names('networkpolicies'), [], `${who} once the pod is gone: the policy is gone`)
  }
})

t.test('a released policy the group took back is not deleted', async (t) => {
  const { api, centrals, ready, hooks } = setup()
  await refusal(centrals.ensure('tenant-a'))
  ready('tenant-a')
  await centrals.release('tenant-a')
  api.settle()
  t.ok((await refusal(centrals.ensure('tenant-a')))?.retryable, 'the group again: a new central')
  t.notOk(
    storedPolicy(api, 'tenant-a')?.metadata?.annotations?.[RELEASED_ANNOTATION],
    'its policy is its own again, no longer marked released',
  )
  await centrals.tidy?.()
  t.same(api.names('networkpolicies'), [centralName('tenant-a')], 'reconcile leaves it')

  // Another replica takes the policy back while this release waits for the pods.
  const name = centralName('tenant-a')
  hooks.whileWaiting = async () => {
    const marked = await api.readNetworkPolicy(NS, name)
    const retaken = policyUpdate(
      marked,
      centralObjects('tenant-a', settings).networkPolicy.toJSON(),
    )
    if (retaken) await api.replaceNetworkPolicy(NS, name, retaken)
    api.settle()
  }
  await centrals.release('tenant-a')
  t.same(api.names('networkpolicies'), [name], 'changed since release marked it: kept')
})

t.test('a wait that cannot end is refused when the provider is built', async (t) => {
  const cases: [string, Partial<KubernetesCentralsOptions>][] = [
    ['a negative timeout', { podsGoneTimeoutMs: -1 }],
    ['an endless timeout', { podsGoneTimeoutMs: Number.POSITIVE_INFINITY }],
    ['no interval', { podsPollMs: 0 }],
  ]
  for (const [name, options] of cases)
    t.throws(() => setup(options), { code: 'CONFIG_INVALID' }, `${name}: refused`)
  t.doesNotThrow(() => setup({ podsGoneTimeoutMs: 0 }), 'no wait at all: fine')
})

t.test('changed CIDRs reach an existing central policy on its next ensure', async (t) => {
  const { nb, sb, nbRaft, sbRaft } = CENTRAL_PORTS
  const before = { controllerCidrs: ['10.0.0.0/24'], dpuCidrs: ['172.18.0.0/24'] }
  const after = { controllerCidrs: ['10.1.0.0/24', 'fd00:10::/64'], dpuCidrs: ['172.19.0.0/24'] }
  const reaches: [string, Source, number[]][] = [
    ['a controller node of the old list', { ip: '10.0.0.11' }, []],
    ['a controller node of the new list', { ip: '10.1.0.11' }, [nb, sb]],
    ['a controller node over IPv6', { ip: 'fd00:10::11' }, [nb, sb]],
    ['a DPU of the old list', { ip: '172.18.0.21' }, []],
    ['a DPU of the new list', { ip: '172.19.0.21' }, [sb]],
    ["another tenant's pod", tenantPod, []],
    ['a pod of the central', 'central pod', [nbRaft, sbRaft]],
  ]
  for (const state of ['ready', 'not ready'] as const) {
    const { api, centrals, ready } = setup(before)
    await refusal(centrals.ensure('tenant-a'))
    if (state === 'ready') ready('tenant-a')
    const uid = storedPolicy(api, 'tenant-a')?.metadata?.uid

    const logged: string[] = []
    const restarted = setup({ ...after, log: (line) => logged.push(line) }, undefined, api)
    await refusal(restarted.centrals.ensure('tenant-a'))
    const policy = storedPolicy(api, 'tenant-a')
    for (const [who, source, ports] of reaches) {
      const reached = Object.values(CENTRAL_PORTS).filter(
        (p) => policy && admits(policy, source, p),
      )
      t.same(
        reached.sort(),
        ports.sort(),
        `${state}: ${who} reaches ${ports.join(', ') || 'nothing'}`,
      )
    }
    t.equal(policy?.metadata?.uid, uid, `${state}: replaced in place, never absent`)
    t.match(logged, [/NetworkPolicy \S+ updated to the current settings/])

    const written = api.snapshot()
    await refusal(restarted.centrals.ensure('tenant-a'))
    t.equal(api.snapshot(), written, `${state}: in sync, the next ensure writes nothing`)
  }
})

t.test('policyUpdate: what a stored policy needs to be the one built', async (t) => {
  const desired = centralObjects('tenant-a', settings).networkPolicy.toJSON() as INetworkPolicy
  const stored = (change: (p: INetworkPolicy) => void = () => {}): INetworkPolicy => {
    const p = JSON.parse(JSON.stringify(desired)) as INetworkPolicy
    p.metadata = { ...p.metadata, uid: 'uid-1', resourceVersion: '7' }
    change(p)
    return p
  }
  const other = centralObjects('tenant-a', { ...settings, controllerCidrs: ['10.9.0.0/16'] })
  const marked = stored((p) => {
    p.metadata = { ...p.metadata, annotations: { [RELEASED_ANNOTATION]: 'now', note: 'kept' } }
  })
  const cases: [string, INetworkPolicy, 'none' | 'replace'][] = [
    ['as built', stored(), 'none'],
    [
      'with a label someone added',
      stored((p) => {
        p.metadata = { ...p.metadata, labels: { ...p.metadata?.labels, team: 'net' } }
      }),
      'none',
    ],
    [
      'other CIDRs',
      stored((p) => {
        p.spec = other.networkPolicy.toJSON().spec
      }),
      'replace',
    ],
    [
      'a rule removed by hand',
      stored((p) => {
        p.spec = { ...p.spec, podSelector: p.spec?.podSelector ?? {}, ingress: [] }
      }),
      'replace',
    ],
    [
      'one of its labels changed',
      stored((p) => {
        p.metadata = { ...p.metadata, labels: { ...p.metadata?.labels, 'hydrazine.io/group': 'x' } }
      }),
      'replace',
    ],
    ['marked released', marked, 'replace'],
  ]
  for (const [name, current, expected] of cases) {
    const update = policyUpdate(current, desired)
    if (expected === 'none') {
      t.equal(update, undefined, `${name}: nothing to write`)
      continue
    }
    t.same(update?.spec, desired.spec, `${name}: the spec as built`)
    t.equal(update?.metadata?.resourceVersion, '7', `${name}: guarded by the version read`)
    t.equal(update?.metadata?.uid, 'uid-1', `${name}: the same object`)
    t.same(update?.metadata?.labels, { ...current.metadata?.labels, ...desired.metadata?.labels })
    t.notOk(update?.metadata?.annotations?.[RELEASED_ANNOTATION], `${name}: not released`)
  }
  t.same(policyUpdate(marked, desired)?.metadata?.annotations, { note: 'kept' }, 'others stay')
})

t.test('list and groups reflect what exists', async (t) => {
  const { centrals, ready } = setup()
  t.same(await centrals.list(), [])
  t.same(await centrals.groups(), [])
  await refusal(centrals.ensure('tenant-b'))
  await refusal(centrals.ensure('tenant-a'))
  t.same(await centrals.groups(), ['tenant-a', 'tenant-b'], 'running or not')
  t.same(await centrals.list(), [], 'none ready: none to reconcile')
  ready('tenant-a')
  t.same(
    (await centrals.list()).map((e) => [e.group, e.nb]),
    [['tenant-a', `tcp:${centralName('tenant-a')}.${NS}.svc.cluster.local:6641`]],
  )
})

t.test('three replicas in raft: answers with a majority ready', async (t) => {
  const { api, centrals, ready } = setup({ replicas: 3 })
  await refusal(centrals.ensure('tenant-a'))
  const name = centralName('tenant-a')
  t.same(
    api.names('persistentvolumeclaims'),
    [0, 1, 2].map((i) => `data-${name}-${i}`),
  )
  ready('tenant-a', 1)
  t.match((await refusal(centrals.ensure('tenant-a')))?.message, /1 of 3 replicas ready, 2 needed/)
  ready('tenant-a', 2)
  t.equal((await centrals.ensure('tenant-a')).group, 'tenant-a')
})

t.test('an SB with a TLS Secret: ssl: for DPUs, plaintext for the controller', async (t) => {
  const { api, centrals, ready } = setup({ sbTlsSecret: 'ovn-sb-tls' })
  await refusal(centrals.ensure('tenant-a'))
  ready('tenant-a')
  const host = `${centralName('tenant-a')}.${NS}.svc.cluster.local`
  t.match(await centrals.ensure('tenant-a'), {
    sb: `ssl:${host}:6642`,
    sbController: `tcp:${host}:6645`,
  })
  const sts = await api.readStatefulSet(NS, centralName('tenant-a'))
  t.match(sts.spec?.template.spec?.volumes, [{}, { secret: { secretName: 'ovn-sb-tls' } }])
})

t.test('a StatefulSet of that name that is not ours is refused for good', async (t) => {
  const { api, centrals } = setup()
  const { statefulSet } = centralObjects('tenant-a', settings)
  const foreign = statefulSet.toJSON() as IStatefulSet
  await api.createStatefulSet(NS, {
    ...foreign,
    metadata: { ...foreign.metadata, labels: { app: 'someone-else' } },
  })
  const refused = await refusal(centrals.ensure('tenant-a'))
  t.equal(refused?.retryable, false)
  t.match(refused?.message, /belongs to someone else/)
})

t.test('API failures: retryable, unless the API refused the request itself', async (t) => {
  const cases: [number, boolean][] = [
    [500, true],
    [503, true],
    [429, true],
    [403, false],
    [401, false],
    [422, false],
  ]
  for (const [status, retryable] of cases) {
    const { api, centrals } = setup()
    api.failNext = status
    const error = await refusal(centrals.ensure('tenant-a'))
    t.equal(error?.retryable, retryable, `HTTP ${status}: retryable ${retryable}`)
    t.match(error?.message, new RegExp(`HTTP ${status}`))
  }
})

t.test('the Role grants exactly what the provider calls', async (t) => {
  const role = controllerRole(
    parseManifestOptions({ centrals: { controllerCidrs: ['10.0.0.0/24'], sbTlsSecret: 'tls' } }),
  )
  const rules = role.rules ?? []
  const { api, centrals, ready } = setup(
    {},
    rules.map((r) => ({
      apiGroups: r.apiGroups ?? [],
      resources: r.resources ?? [],
      verbs: r.verbs,
    })),
  )
  // Every path: create, wait, answer, list, release, release again, reconcile, re-create.
  await refusal(centrals.ensure('tenant-a'))
  ready('tenant-a')
  await centrals.ensure('tenant-a')
  await centrals.list()
  await centrals.groups()
  await centrals.release('tenant-a')
  await centrals.release('tenant-a')
  api.settle()
  await centrals.tidy?.()
  await refusal(centrals.ensure('tenant-a'))
  const granted = CENTRALS_RBAC_RULES.flatMap((r) =>
    r.resources.flatMap((res) => r.verbs.map((verb) => `${res}/${verb}`)),
  )
  t.same([...api.used].sort(), granted.sort(), 'every grant used, nothing used ungranted')
  t.notOk(
    rules.some((r) => r.verbs.includes('*') || r.resources?.includes('*')),
    'no wildcards',
  )
  t.same(
    rules.filter((r) => r.resources?.includes('networkpolicies')),
    [
      {
        apiGroups: ['networking.k8s.io'],
        resources: ['networkpolicies'],
        verbs: ['create', 'get', 'list', 'update', 'delete'],
      },
    ],
    'NetworkPolicies: no patch, deletecollection or watch',
  )
})

t.test('client-node sends every field of the objects as built', async (t) => {
  const { networkPolicy, services, statefulSet } = centralObjects('tenant-a', {
    ...settings,
    replicas: 3,
    sbTlsSecret: 'ovn-sb-tls',
    storageClassName: 'fast',
  })
  // What the adapter hands client-node, serialized as client-node serializes a request body.
  const sent = (json: unknown, type: string) => toJson(fromJson(json, type), type)
  const clean = (value: unknown) => JSON.parse(JSON.stringify(value))
  t.same(clean(sent(statefulSet.toJSON(), 'V1StatefulSet')), clean(statefulSet.toJSON()))
  for (const service of services)
    t.same(clean(sent(service.toJSON(), 'V1Service')), clean(service.toJSON()))
  t.same(clean(sent(networkPolicy.toJSON(), 'V1NetworkPolicy')), clean(networkPolicy.toJSON()))
})
