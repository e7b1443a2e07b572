/** The Kubernetes API as the central provider calls it: the Role, client-node's bodies. */
import { join } from 'node:path'
import t from 'tap'
import { openCertificateAuthority, trustedBy } from '../../lib/pki/index.ts'
import { refusal, settings, setup } from '../../test/helpers/k8s/fake-centrals.ts'
import { controllerRole } from '../k8s/controller.ts'
import { parseManifestOptions } from '../k8s/options.ts'
import { centralObjects, chassisSecret } from '../k8s/ovn-central.ts'
import { CENTRALS_RBAC_RULES, CHASSIS_CA_RBAC_RULES, fromJson, toJson } from './kubernetes-api.ts'

t.test('the Role grants exactly what the provider calls', async (t) => {
  const centralsOptions = {
    controllerCidrs: ['10.0.0.0/24'],
    sbTlsSecret: 'tls',
    nbTlsSecret: 'nb-tls',
  }
  const roleOf = (centrals: object) =>
    controllerRole(parseManifestOptions({ centrals: { ...centralsOptions, ...centrals } }))
  const asRules = (role: ReturnType<typeof roleOf>) =>
    (role.rules ?? []).map((r) => ({
      apiGroups: r.apiGroups ?? [],
      resources: r.resources ?? [],
      verbs: r.verbs,
    }))
  const grants = (granted: readonly { resources: readonly string[]; verbs: readonly string[] }[]) =>
    granted.flatMap((r) => r.resources.flatMap((res) => r.verbs.map((verb) => `${res}/${verb}`)))
  // The operator's CA of the DPUs' identities: the controller holds its certificate only.
  const pki = await openCertificateAuthority(join(t.testdir(), 'pki'))
  const chassisRole = roleOf({})
  const sharedRole = roleOf({ namespace: 'hydrazine' })
  for (const [name, role, chassis] of [
    ["the centrals' own namespace: their objects and the chassis CAs' Secrets", chassisRole, true],
    ["the controller's namespace (an earlier version's centrals): no Secret", sharedRole, false],
  ] as const) {
    const { api, centrals, ready } = setup(
      {
        nbTlsSecret: 'nb-tls',
        sbTlsSecret: 'tls',
        ...(chassis ? { dpuCa: trustedBy(pki.caCert) } : {}),
      },
      asRules(role),
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
      ...(chassis ? grants(CHASSIS_CA_RBAC_RULES) : []),
    ]
    t.same([...api.used].sort(), expected.sort(), `${name}: every grant used, nothing ungranted`)
  }
  t.equal(chassisRole.metadata?.namespace, 'hydrazine-centrals', "in the centrals' namespace")
  for (const role of [chassisRole, sharedRole]) {
    t.notOk(
      role.rules?.some((r) => r.verbs.includes('*') || r.resources?.includes('*')),
      'no wildcards',
    )
  }
  t.notOk(
    sharedRole.rules?.some((r) => r.resources?.includes('secrets')),
    "centrals in the controller's namespace (beside the DPUs' Secrets): no Secret granted",
  )
  t.same(
    chassisRole.rules?.filter((r) => r.resources?.includes('networkpolicies')),
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
