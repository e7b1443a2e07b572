/** The Kubernetes API as the central provider calls it: the Role, client-node's bodies. */
import { join } from 'node:path'
import t from 'tap'
import { openCertificateAuthority } from '../../lib/pki/index.ts'
import { refusal, settings, setup } from '../../test/helpers/k8s/fake-centrals.ts'
import { controllerRole } from '../k8s/controller.ts'
import { parseManifestOptions } from '../k8s/options.ts'
import { centralObjects, chassisSecret } from '../k8s/ovn-central.ts'
import { CENTRALS_RBAC_RULES, CHASSIS_CA_RBAC_RULES, fromJson, toJson } from './kubernetes-api.ts'

t.test('the Role grants exactly what the provider calls', async (t) => {
  const role = controllerRole(
    parseManifestOptions({
      centrals: { controllerCidrs: ['10.0.0.0/24'], sbTlsSecret: 'tls', nbTlsSecret: 'nb-tls' },
    }),
  )
  const rules = role.rules ?? []
  const asRules = (granted: typeof rules) =>
    granted.map((r) => ({
      apiGroups: r.apiGroups ?? [],
      resources: r.resources ?? [],
      verbs: r.verbs,
    }))
  const grants = (granted: readonly { resources: readonly string[]; verbs: readonly string[] }[]) =>
    granted.flatMap((r) => r.resources.flatMap((res) => r.verbs.map((verb) => `${res}/${verb}`)))
  const pki = await openCertificateAuthority(join(t.testdir(), 'pki'))
  // The manifests' controller runs no CA; one that does needs the chassis CAs' Secrets too.
  for (const [name, withPki, granted] of [
    ['no CA in the controller: the Role as the manifests make it', false, rules],
    [
      "Hydrazine's CA in the controller: and the chassis CAs' Secrets",
      true,
      [
        ...rules,
        ...CHASSIS_CA_RBAC_RULES.map((r) => ({
          ...r,
          apiGroups: [...r.apiGroups],
          resources: [...r.resources],
          verbs: [...r.verbs],
        })),
      ],
    ],
  ] as const) {
    const { api, centrals, ready } = setup(
      { nbTlsSecret: 'nb-tls', sbTlsSecret: 'tls', ...(withPki ? { pki } : {}) },
      asRules([...granted]),
    )
    // Every path: create, wait, answer, certify a chassis, a DPU leaves, stop (no hosts),
    // start again, list, release, release again, reconcile, re-create.
    await refusal(centrals.ensure('tenant-a'))
    ready('tenant-a')
    await centrals.ensure('tenant-a')
    const { cert: identity } = await pki.issueIdentity({ commonName: 'dpu-1' })
    await centrals.chassisCertificate?.('tenant-a', { id: 'dpu-1', identity })
    await centrals.leaveChassis?.('tenant-a', 'dpu-1')
    await centrals.chassisCertified?.()
    await centrals.stop?.('tenant-a')
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
    const expected = [
      ...grants(CENTRALS_RBAC_RULES),
      ...(withPki ? grants(CHASSIS_CA_RBAC_RULES) : []),
    ]
    t.same([...api.used].sort(), expected.sort(), `${name}: every grant used, nothing ungranted`)
  }
  t.notOk(
    rules.some((r) => r.verbs.includes('*') || r.resources?.includes('*')),
    'no wildcards',
  )
  t.notOk(
    rules.some((r) => r.resources?.includes('secrets')),
    "the manifests' Role reads no Secret",
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
  const secret = chassisSecret('tenant-a', settings, { 'ca.crt': 'PEM' }, '7')
  t.same(clean(sent(secret.toJSON(), 'V1Secret')), clean(secret.toJSON()))
})
