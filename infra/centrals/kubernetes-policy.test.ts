/**
 * A Kubernetes central's NetworkPolicy: brought to the current settings, put back when
 * deleted by hand, kept while its released central's pods stop, then deleted.
 */
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy'
import t from 'tap'
import {
  controllerNode,
  NS,
  podsOf,
  refusal,
  settings,
  setup,
  storedPolicy,
  tenantPod,
} from '../../test/helpers/k8s/fake-centrals.ts'
import { admits, type Source } from '../../test/helpers/k8s/fake-network-plugin.ts'
import { CENTRAL_PORTS, centralName, centralObjects } from '../k8s/ovn-central.ts'
import { policyUpdate, RELEASED_ANNOTATION } from './kubernetes-policy.ts'

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
