/**
 * The chassis CA of a Kubernetes-run central, on the fake API: its Secret, what the relay
 * mounts of it, certificates from it, its rotation when a DPU leaves, its deletion.
 */
import { X509Certificate } from 'node:crypto'
import { join } from 'node:path'
import type { IStatefulSet } from 'kubernetes-models/apps/v1/StatefulSet'
import { Secret } from 'kubernetes-models/v1/Secret'
import t, { type Test } from 'tap'
import { ChassisIdentityRefused } from '../../lib/ovn/central.ts'
import { openCertificateAuthority, trustedBy } from '../../lib/pki/index.ts'
import { NS, refusal, settings, setup } from '../../test/helpers/k8s/fake-centrals.ts'
import { centralName, centralObjects, chassisSecretName } from '../k8s/ovn-central.ts'

const tls = { nbTlsSecret: 'ovn-nb-tls', sbTlsSecret: 'ovn-sb-tls' }

async function withPki(t: Test) {
  const pki = await openCertificateAuthority(join(t.testdir(), 'pki'))
  const identity = async (id: string) => (await pki.issueIdentity({ commonName: id })).cert
  return { pki, identity }
}

/** The Secret's PEM texts, by key. */
function secretOf(api: ReturnType<typeof setup>['api'], group: string) {
  const stored = api.objects.secrets.get(`${NS}/${chassisSecretName(group)}`)
  if (!stored) return undefined
  return Object.fromEntries(
    Object.entries(stored.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString()]),
  )
}

const signedBy = (cert: string | undefined, ca: string | undefined) =>
  cert !== undefined &&
  ca !== undefined &&
  new X509Certificate(cert).verify(new X509Certificate(ca).publicKey)

t.test('a central gets its own chassis CA Secret, and its relay mounts it', async (t) => {
  const { pki } = await withPki(t)
  const { api, centrals } = setup({ ...tls, dpuCa: trustedBy(pki.caCert) })
  await refusal(centrals.ensure('tenant-a'))
  const name = centralName('tenant-a')
  const secretName = chassisSecretName('tenant-a')
  t.same(api.names('secrets'), [secretName], 'one Secret, named for the central')
  const uid = (resource: 'secrets' | 'statefulsets', object: string) =>
    Number(api.objects[resource].get(`${NS}/${object}`)?.metadata?.uid?.replace('uid-', ''))
  t.ok(uid('secrets', secretName) < uid('statefulsets', name), 'made before the StatefulSet')
  const stored = api.objects.secrets.get(`${NS}/${secretName}`)
  const sts = await api.readStatefulSet(NS, name)
  t.same(stored?.metadata?.labels, sts.metadata?.labels, 'labelled as the central')
  t.doesNotThrow(() => new Secret(stored as ConstructorParameters<typeof Secret>[0]).validate())
  const data = secretOf(api, 'tenant-a')
  t.same(Object.keys(data ?? {}).sort(), ['ca.crt', 'ca.key', 'tls.crt', 'tls.key'])
  t.ok(signedBy(data?.['tls.crt'], data?.['ca.crt']), "the relay's certificate is of that CA")
  t.match(
    new X509Certificate(data?.['tls.crt'] ?? '').subjectAltName,
    `${name}.${NS}.svc.cluster.local`,
    "named for the central's Service",
  )

  const spec = sts.spec?.template.spec
  const volume = spec?.volumes?.find((v) => v.name === 'sb-chassis')
  t.equal(volume?.secret?.secretName, secretName)
  t.same(
    volume?.secret?.items?.map((i) => i.key),
    ['ca.crt', 'tls.crt', 'tls.key'],
    "the relay reads its certificate and the CA, never the CA's key or the record",
  )
  const secretsIn = (c: string) =>
    (spec?.containers.find((x) => x.name === c)?.volumeMounts ?? []).flatMap(
      (m) => spec?.volumes?.find((v) => v.name === m.name)?.secret?.secretName ?? [],
    )
  t.same(secretsIn('sb-relay'), [secretName], 'the relay: the group CA, not the shared SB Secret')
  t.same(secretsIn('sb'), ['ovn-nb-tls'])
  t.notOk(
    spec?.volumes?.some((v) => v.secret?.secretName === 'ovn-sb-tls'),
    'the shared SB Secret is mounted nowhere',
  )
  for (const replicas of [1, 3] as const) {
    const built = centralObjects('tenant-a', { ...settings, ...tls, replicas, chassisCa: true })
    t.doesNotThrow(() => built.statefulSet.validate(), `${replicas}: the StatefulSet validates`)
  }

  const before = api.snapshot()
  await refusal(centrals.ensure('tenant-a'))
  t.equal(api.snapshot(), before, 'a second ensure makes no new CA')
  api.objects.secrets.clear()
  await refusal(centrals.ensure('tenant-a'))
  t.same(api.names('secrets'), [secretName], 'deleted by hand: made again while not ready')
})

t.test('chassis certificates from the group CA; a leaver rotates it', async (t) => {
  const { pki, identity } = await withPki(t)
  const { api, centrals, ready } = setup({ ...tls, dpuCa: trustedBy(pki.caCert) })
  for (const g of ['tenant-a', 'tenant-b']) {
    await refusal(centrals.ensure(g))
    ready(g)
  }
  const dpu1 = { id: 'dpu-1', identity: await identity('dpu-1') }
  const dpu2 = { id: 'dpu-2', identity: await identity('dpu-2') }
  const a1 = await centrals.chassisCertificate?.('tenant-a', dpu1)
  const a2 = await centrals.chassisCertificate?.('tenant-a', dpu2)
  const b2 = await centrals.chassisCertificate?.('tenant-b', dpu2)
  const caA = secretOf(api, 'tenant-a')?.['ca.crt']
  const caB = secretOf(api, 'tenant-b')?.['ca.crt']
  t.not(caA, caB, 'each group a CA of its own')
  t.ok(signedBy(a1, caA) && signedBy(a2, caA), "tenant-a's certificates are of its CA")
  t.ok(signedBy(b2, caB) && !signedBy(b2, caA), "tenant-b's of its own, not tenant-a's")
  t.equal(new X509Certificate(a1 ?? '').subject, 'CN=dpu-1')
  t.ok(
    new X509Certificate(a1 ?? '').publicKey.equals(new X509Certificate(dpu1.identity).publicKey),
    "the DPU's own key, certified",
  )
  t.equal(await centrals.southboundCa?.('tenant-a'), caA, 'DPUs trust the group CA alone')
  t.equal(await centrals.chassisCertificate?.('tenant-a', dpu1), a1, 'the same one again')
  t.same(await centrals.chassisCertified?.(), [
    { group: 'tenant-a', dpuIds: ['dpu-1', 'dpu-2'] },
    { group: 'tenant-b', dpuIds: ['dpu-2'] },
  ])
  t.same(await centrals.chassisRenewalsDue?.(), [], 'none due: each has a day left')

  t.equal(await centrals.leaveChassis?.('tenant-a', 'dpu-2'), true)
  const rotated = secretOf(api, 'tenant-a')
  t.not(rotated?.['ca.crt'], caA, 'a new CA')
  t.ok(signedBy(rotated?.['tls.crt'], rotated?.['ca.crt']), "and the relay's certificate from it")
  t.notOk(signedBy(a1, rotated?.['ca.crt']), 'no certificate of the old CA passes it')
  t.same(
    await centrals.chassisCertified?.(),
    [
      { group: 'tenant-a', dpuIds: [] },
      { group: 'tenant-b', dpuIds: ['dpu-2'] },
    ],
    "tenant-a's new CA certified no one yet; its SB still admits only its chassis",
  )
  const again = await centrals.chassisCertificate?.('tenant-a', dpu1)
  t.ok(signedBy(again, rotated?.['ca.crt']), 'the one who stays is certified by the new CA')
  t.equal(secretOf(api, 'tenant-b')?.['ca.crt'], caB, "tenant-b's CA is untouched")

  const refused = await centrals
    .chassisCertificate?.('tenant-a', { id: 'dpu-3', identity: null })
    .catch((e: unknown) => e)
  t.ok(refused instanceof ChassisIdentityRefused, 'no identity on record: refused')

  await centrals.release('tenant-a')
  t.same(api.names('secrets'), [chassisSecretName('tenant-b')], 'released with its central')
  t.equal(await centrals.leaveChassis?.('tenant-a', 'dpu-1'), false, 'no central: nothing')
})

t.test('a central made before keeps its relay on the shared SB Secret', async (t) => {
  const { pki, identity } = await withPki(t)
  const { api, centrals, ready } = setup({ ...tls, dpuCa: trustedBy(pki.caCert) })
  // As an earlier version made it: the relay on the SB Secret, no chassis CA.
  const { statefulSet } = centralObjects('tenant-a', { ...settings, ...tls })
  await api.createStatefulSet(NS, statefulSet.toJSON() as IStatefulSet)
  ready('tenant-a')
  t.match(await centrals.ensure('tenant-a'), { sb: /^ssl:/ }, 'it still answers')
  const dpu = { id: 'dpu-1', identity: await identity('dpu-1') }
  t.equal(await centrals.chassisCertificate?.('tenant-a', dpu), undefined, 'its identity as is')
  t.equal(await centrals.southboundCa?.('tenant-a'), undefined, 'trusting the CA it trusts')
  t.equal(await centrals.leaveChassis?.('tenant-a', 'dpu-1'), false, 'nothing to rotate')
  t.same(api.names('secrets'), [], 'no Secret made for it')
})

t.test('without the CA of the DPU identities: the shared SB Secret, as before', async (t) => {
  const { api, centrals } = setup(tls)
  await refusal(centrals.ensure('tenant-a'))
  t.same(api.names('secrets'), [])
  t.equal(centrals.chassisCertificate, undefined)
  const sts = await api.readStatefulSet(NS, centralName('tenant-a'))
  t.ok(sts.spec?.template.spec?.volumes?.some((v) => v.secret?.secretName === 'ovn-sb-tls'))
})

t.test('two controller replicas: a rotation by one holds for the other', async (t) => {
  const { pki, identity } = await withPki(t)
  const { api, centrals: x, ready } = setup({ ...tls, dpuCa: trustedBy(pki.caCert) })
  const y = setup({ ...tls, dpuCa: trustedBy(pki.caCert) }, undefined, api).centrals
  await refusal(x.ensure('tenant-a'))
  ready('tenant-a')
  const dpu1 = { id: 'dpu-1', identity: await identity('dpu-1') }
  const before = await x.chassisCertificate?.('tenant-a', dpu1)
  t.equal(await y.chassisCertificate?.('tenant-a', dpu1), before, 'the same certificate from both')
  t.equal(await y.leaveChassis?.('tenant-a', 'dpu-2'), true)
  const ca = secretOf(api, 'tenant-a')?.['ca.crt']
  const after = await x.chassisCertificate?.('tenant-a', dpu1)
  t.ok(signedBy(after, ca) && !signedBy(before, ca), 'the other replica certifies with the new CA')
  t.equal(await x.southboundCa?.('tenant-a'), ca, 'and names it')
})

t.test('a chassis certificate past half its life is due for renewal', async (t) => {
  const { pki, identity } = await withPki(t)
  const { centrals, ready } = setup({ ...tls, dpuCa: trustedBy(pki.caCert), chassisCertMs: 10_000 })
  await refusal(centrals.ensure('tenant-a'))
  ready('tenant-a')
  const dpu1 = { id: 'dpu-1', identity: await identity('dpu-1') }
  const first = await centrals.chassisCertificate?.('tenant-a', dpu1)
  t.same(await centrals.chassisRenewalsDue?.(), [], 'fresh: not due')
  await new Promise((r) => setTimeout(r, 5_500))
  t.same(await centrals.chassisRenewalsDue?.(), [{ group: 'tenant-a', dpuId: 'dpu-1' }])
  const second = await centrals.chassisCertificate?.('tenant-a', dpu1)
  t.not(second, first, 'a new one is issued')
  t.same(await centrals.chassisRenewalsDue?.(), [], 'and it is not due')
})
