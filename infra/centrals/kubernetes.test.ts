/** The Kubernetes central provider on the fake API: create, answer, release, list, fail. */
import type { IStatefulSet } from 'kubernetes-models/apps/v1/StatefulSet'
import type { INetworkPolicySpec } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicySpec'
import t from 'tap'
import type { Rule } from '../../test/helpers/k8s/fake-api.ts'
import { NS, podsOf, refusal, settings, setup } from '../../test/helpers/k8s/fake-centrals.ts'
import { centralName, centralObjects } from '../k8s/ovn-central.ts'
import type { KubernetesCentralsOptions } from './kubernetes.ts'
import { CENTRALS_RBAC_RULES } from './kubernetes-api.ts'

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

t.test(
  "an NB with a TLS Secret: ssl: for the controller's NB and SB, the DPUs' SB from a relay",
  async (t) => {
    const { api, centrals, ready } = setup({ nbTlsSecret: 'ovn-nb-tls', sbTlsSecret: 'ovn-sb-tls' })
    await refusal(centrals.ensure('tenant-a'))
    ready('tenant-a')
    const host = `${centralName('tenant-a')}.${NS}.svc.cluster.local`
    t.match(await centrals.ensure('tenant-a'), {
      nb: `ssl:${host}:6641`,
      sb: `ssl:${host}:6642`,
      sbController: `ssl:${host}:6645`,
    })
    const sts = await api.readStatefulSet(NS, centralName('tenant-a'))
    const spec = sts.spec?.template.spec
    const secretOf = (volume: string) =>
      spec?.volumes?.find((v) => v.name === volume)?.secret?.secretName
    t.same(
      spec?.containers.map((c) => [
        c.name,
        (c.volumeMounts ?? []).flatMap((m) => secretOf(m.name) ?? []),
      ]),
      [
        ['nb', ['ovn-nb-tls']],
        ['sb', ['ovn-nb-tls']],
        ['sb-relay', ['ovn-sb-tls']],
        ['northd', []],
      ],
      "the central's certificate where the controller and raft are served, the DPUs' in the relay, northd none",
    )
    for (const replicas of [1, 3] as const) {
      const built = centralObjects('tenant-a', {
        ...settings,
        replicas,
        nbTlsSecret: 'ovn-nb-tls',
        sbTlsSecret: 'ovn-sb-tls',
      })
      t.doesNotThrow(() => built.statefulSet.validate(), `${replicas}: the StatefulSet validates`)
      for (const service of built.services) t.doesNotThrow(() => service.validate())
    }
  },
)

t.test(
  'a plaintext SB beside a TLS NB: the controller still reaches the SB over ssl:',
  async (t) => {
    const { centrals, ready } = setup({ nbTlsSecret: 'ovn-nb-tls' })
    await refusal(centrals.ensure('tenant-a'))
    ready('tenant-a')
    const host = `${centralName('tenant-a')}.${NS}.svc.cluster.local`
    t.match(await centrals.ensure('tenant-a'), {
      sb: `tcp:${host}:6642`,
      sbController: `ssl:${host}:6645`,
    })
  },
)

t.test(
  'a central serving its NB otherwise than the settings say is refused, naming the fix',
  async (t) => {
    const { api, centrals, ready } = setup()
    await refusal(centrals.ensure('tenant-a'))
    ready('tenant-a')
    t.match((await centrals.ensure('tenant-a')).nb, /^tcp:/, 'made with a plaintext NB')
    // The settings now ask for TLS: the existing central would answer plaintext.
    const withTls = setup({ nbTlsSecret: 'ovn-nb-tls' }, undefined, api).centrals
    const refused = await refusal(withTls.ensure('tenant-a'))
    t.equal(refused?.retryable, false, 'not retried: only deleting the StatefulSet helps')
    t.match(
      refused?.message,
      /serves NB tcp, controller SB and raft tcp, DPU SB direct, and the TLS settings \(HYDRAZINE_K8S_CENTRAL_NB_TLS_SECRET, _TLS_SECRET\) ask for NB ssl, controller SB and raft ssl, DPU SB direct: delete the StatefulSet/,
    )
  },
)

t.test(
  'a central made with a TLS NB before its SB and raft took the certificate is refused too',
  async (t) => {
    const tls = { nbTlsSecret: 'ovn-nb-tls', sbTlsSecret: 'ovn-sb-tls' }
    const { api, centrals } = setup(tls)
    // As such a StatefulSet was made: the NB Secret in the NB container only, no relay.
    const { statefulSet } = centralObjects('tenant-a', { ...settings, ...tls })
    const old = statefulSet.toJSON() as IStatefulSet
    const spec = old.spec?.template.spec
    const containers = (spec?.containers ?? [])
      .filter((c) => c.name !== 'sb-relay')
      .map((c) =>
        c.name === 'sb'
          ? { ...c, volumeMounts: (c.volumeMounts ?? []).filter((m) => m.name !== 'nb-tls') }
          : c,
      )
    await api.createStatefulSet(NS, {
      ...old,
      spec: {
        ...(old.spec ?? { selector: {}, template: {} }),
        template: { ...old.spec?.template, spec: { ...spec, containers } },
      },
    })
    const refused = await refusal(centrals.ensure('tenant-a'))
    t.equal(refused?.retryable, false)
    t.match(
      refused?.message,
      /serves NB ssl, controller SB and raft tcp, DPU SB direct, .* ask for NB ssl, controller SB and raft ssl, DPU SB relay: delete the StatefulSet/,
    )
  },
)

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

t.test('stop scales the central to 0, keeping its volumes; ensure scales it back', async (t) => {
  const rules = CENTRALS_RBAC_RULES as readonly Rule[]
  const { api, centrals, ready } = setup({ replicas: 3 }, rules)
  const name = centralName('tenant-a')
  await refusal(centrals.ensure('tenant-a'))
  ready('tenant-a', 3)
  t.ok(await centrals.ensure('tenant-a'), 'running')

  await centrals.stop?.('tenant-a')
  const stopped = await api.readStatefulSet(NS, name)
  t.equal(stopped.spec?.replicas, 0, 'scaled to 0 through the scale subresource')
  t.ok(api.used.has('statefulsets/scale/update'), 'as RBAC grants it')
  api.settle()
  t.same(podsOf(api, 'tenant-a'), { pods: 0, terminating: 0 }, 'no pod runs')
  t.equal(api.names('persistentvolumeclaims').length, 3, 'its volumes stay (its databases)')
  t.same(api.names('networkpolicies'), [name], 'and its policy')
  t.same(await centrals.list(), [], 'no running central is listed')
  t.same(await centrals.groups(), ['tenant-a'], 'the group still has its central')

  const again = await refusal(centrals.ensure('tenant-a'))
  t.ok(again?.retryable, 'ensure: starting again, retryable')
  t.match(again?.message, /starting again/)
  t.equal((await api.readStatefulSet(NS, name)).spec?.replicas, 3, 'scaled back to 3')
  t.match(
    (await refusal(centrals.ensure('tenant-a')))?.message,
    /0 of 3 replicas ready, 2 needed/,
    'answers once a quorum is ready',
  )
  ready('tenant-a', 2)
  t.ok(await centrals.ensure('tenant-a'), 'running again')

  await centrals.release('tenant-a')
  await centrals.stop?.('tenant-a')
  t.pass('stopping a released central is no error (404)')
})
