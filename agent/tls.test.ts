import { readFile, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t, { type Test } from 'tap'
import { openCertificateAuthority } from '../lib/pki/index.ts'
import { type AgentTls, SouthboundCertificate } from './tls.ts'

/** A DPU identity from one CA, and a group CA that certifies keys for its SB. */
async function identities(t: Test) {
  const dir = t.testdir({ run: {} })
  const root = await openCertificateAuthority(join(dir, 'root'))
  const group = await openCertificateAuthority(join(dir, 'group'))
  const issued = await root.issueIdentity({ commonName: 'dpu-1' })
  const identity: AgentTls = {
    files: { cert: join(dir, 'dpu-1.crt'), key: join(dir, 'dpu-1.key'), ca: root.caFile },
    cert: issued.cert,
    key: issued.key,
    ca: root.caCert,
    serverCert: issued.serverCert,
    serves: true,
    commonName: 'dpu-1',
  }
  return { runDir: join(dir, 'run'), root, group, identity }
}

t.test(
  'the Southbound certificate: the identity first, then what configure hands over',
  async (t) => {
    const { runDir, root, group, identity } = await identities(t)
    const sb = await SouthboundCertificate.open(identity, runDir)
    t.equal(sb.file, join(runDir, 'sb-client.crt'))
    t.equal(await readFile(sb.file, 'utf8'), identity.cert, 'a new DPU presents its identity')

    const certified = await group.certifyKeyOf(identity.cert)
    t.equal(await sb.use(certified), true, 'a new certificate: changed')
    t.equal(await readFile(sb.file, 'utf8'), certified, 'written where ovn-controller reads it')
    t.equal(sb.ovsdbTls().cert, certified, "and the agent's own SB checks use it")
    const notOurs = await group.certifyKeyOf((await root.issueIdentity({ commonName: 'x' })).cert)
    t.equal(sb.ovsdbTls(identity.cert).cert, identity.cert, 'a certificate kept for an SB, for it')
    t.equal(sb.ovsdbTls(notOurs).cert, certified, "one that is not this DPU's: the current one")
    t.equal(await sb.use(certified), false, 'the same again: unchanged')

    const reopened = await SouthboundCertificate.open(identity, runDir)
    t.equal(reopened.current, certified, 'a restarted agent presents the same one')
    t.equal(await reopened.use(undefined), true, 'a central that takes the identity: back to it')
    t.equal(await readFile(sb.file, 'utf8'), identity.cert)

    const other = await root.issueIdentity({ commonName: 'dpu-2' })
    const stranger = await root.issueIdentity({ commonName: 'dpu-1' })
    const refusals: [string, string, RegExp][] = [
      ['another CN', await group.certifyKeyOf(other.cert), /names dpu-2, not this chassis dpu-1/],
      [
        "another DPU's key",
        await group.certifyKeyOf(stranger.cert),
        /does not certify this DPU's key/,
      ],
      ['no certificate', 'junk', /is not a PEM certificate/],
    ]
    for (const [what, pem, message] of refusals) {
      await t.rejects(reopened.use(pem), { code: 'AGENT_SB_CERTIFICATE_REFUSED', message }, what)
    }
    const later = new Date(Date.now() + 400 * 86_400_000)
    await t.rejects(
      reopened.use(certified, undefined, later),
      { message: /is not valid now/ },
      'expired',
    )
    t.equal(await readFile(sb.file, 'utf8'), identity.cert, 'a refusal changes nothing')
  },
)

t.test('the CA trusted for the Southbound: the group’s when configure names one', async (t) => {
  const { runDir, root, group, identity } = await identities(t)
  const sb = await SouthboundCertificate.open(identity, runDir)
  t.equal(sb.currentCa, root.caCert, 'at first the identity’s CA (--tls-ca)')
  t.equal(await readFile(sb.caFile, 'utf8'), root.caCert)
  const certified = await group.certifyKeyOf(identity.cert)
  t.equal(await sb.use(certified, group.caCert), true, 'the group’s CA: changed')
  t.equal(await readFile(sb.caFile, 'utf8'), group.caCert, 'in the file ovn-controller reads')
  t.equal(sb.ovsdbTls().ca, group.caCert, 'and for the agent’s own checks')
  t.equal(sb.ovsdbTls(identity.cert, root.caCert).ca, root.caCert, 'a CA kept for an SB, for it')
  t.equal(await sb.use(certified, group.caCert), false, 'the same again: unchanged')
  await t.rejects(
    sb.use(certified, identity.cert),
    { code: 'AGENT_SB_CERTIFICATE_REFUSED', message: /not a CA certificate/ },
    'a certificate that is no CA is refused',
  )
  t.equal(sb.currentCa, group.caCert, 'changing nothing')
  const reopened = await SouthboundCertificate.open(identity, runDir, certified, group.caCert)
  t.equal(reopened.currentCa, group.caCert, 'kept across a restart')
  t.equal(await sb.use(undefined), true, 'no group CA named: back to the identity’s')
  t.equal(sb.currentCa, root.caCert)
})

t.test('a kept file that is not this DPU’s certificate is replaced by the identity', async (t) => {
  const { runDir, group, root, identity } = await identities(t)
  const foreign = await group.certifyKeyOf((await root.issueIdentity({ commonName: 'x' })).cert)
  await writeFile(join(runDir, 'sb-client.crt'), foreign)
  const sb = await SouthboundCertificate.open(identity, runDir)
  t.equal(sb.current, identity.cert)
  t.equal(await readFile(sb.file, 'utf8'), identity.cert)
})

t.test('after a reboot emptied the run dir, the certificate the OVS database kept', async (t) => {
  const { runDir, group, root, identity } = await identities(t)
  const certified = await group.certifyKeyOf(identity.cert)
  const sb = await SouthboundCertificate.open(identity, runDir, certified)
  t.equal(sb.current, certified, 'presents what the OVS database kept')
  t.equal(await readFile(sb.file, 'utf8'), certified, 'written back into the run dir')
  const foreign = await group.certifyKeyOf((await root.issueIdentity({ commonName: 'x' })).cert)
  const other = await SouthboundCertificate.open(identity, runDir, foreign)
  t.equal(other.current, certified, "a kept one that is not this DPU's: the file's instead")
})

t.test('a renewed identity: the key beside each certificate is the one it certifies', async (t) => {
  const { runDir, root, group, identity } = await identities(t)
  const sb = await SouthboundCertificate.open(identity, runDir)
  t.equal(sb.keyFile, join(runDir, 'sb-client.key'))
  t.equal(await readFile(sb.keyFile, 'utf8'), identity.key, 'the identity, with its key')
  t.equal((await stat(sb.keyFile)).mode & 0o777, 0o600, 'readable by the agent only')
  const certifiedOld = await group.certifyKeyOf(identity.cert)
  await sb.use(certifiedOld, group.caCert)

  // The key rotated on disk (cert-manager): a new identity for another key.
  const issued = await root.issueIdentity({ commonName: 'dpu-1' })
  const renewed: AgentTls = { ...identity, cert: issued.cert, key: issued.key }
  t.equal(await sb.adopt(renewed), false, "the group's certificate for the earlier key stays")
  t.equal(sb.current, certifiedOld)
  t.equal(await readFile(sb.keyFile, 'utf8'), identity.key, 'with the key it certifies')
  t.equal(sb.ovsdbTls().key, identity.key, "the agent's own checks present that pair too")

  const certifiedNew = await group.certifyKeyOf(renewed.cert)
  t.equal(await sb.use(certifiedNew, group.caCert), true, 'configure brings one for the new key')
  t.equal(await readFile(sb.keyFile, 'utf8'), renewed.key, 'and the new key goes beside it')
  t.equal(sb.ovsdbTls().key, renewed.key)
  t.equal(sb.ovsdbTls(certifiedOld).key, identity.key, 'an SB kept the earlier pair: that pair')

  t.equal(await sb.use(undefined), true, 'an SB that takes the identity')
  t.equal(sb.current, renewed.cert, 'takes the renewed one')
  t.equal(await readFile(sb.keyFile, 'utf8'), renewed.key)

  const again: AgentTls = {
    ...renewed,
    ...(await root
      .issueIdentity({ commonName: 'dpu-1' })
      .then((i) => ({ cert: i.cert, key: i.key }))),
  }
  t.equal(await sb.adopt(again), true, 'the identity presented is renewed in place')
  t.equal(await readFile(sb.file, 'utf8'), again.cert)
  t.equal(await readFile(sb.keyFile, 'utf8'), again.key)
  await t.rejects(
    sb.use(certifiedOld),
    { code: 'AGENT_SB_CERTIFICATE_REFUSED', message: /does not certify this DPU's key/ },
    'two renewals on, the first key is no longer held',
  )

  const reopened = await SouthboundCertificate.open(identity, runDir, again.cert)
  t.equal(reopened.current, again.cert, 'a restarted agent keeps the pair its last run presented')
  t.equal(await readFile(reopened.keyFile, 'utf8'), again.key)
})

t.test(
  'restarted between a key rotation and its chassis certificate, then renewed again',
  async (t) => {
    const { runDir, root, group, identity } = await identities(t)
    const first = await SouthboundCertificate.open(identity, runDir)
    const certifiedFirst = await group.certifyKeyOf(identity.cert)
    await first.use(certifiedFirst, group.caCert)

    // The key rotated on disk and the agent restarted before any configure came.
    const second = await root.issueIdentity({ commonName: 'dpu-1' })
    const restarted = await SouthboundCertificate.open(
      { ...identity, cert: second.cert, key: second.key },
      runDir,
      certifiedFirst,
    )
    t.equal(restarted.current, certifiedFirst, "the group's certificate for the first key stays")
    t.equal(await readFile(restarted.keyFile, 'utf8'), identity.key, 'with the first key')

    const third = await root.issueIdentity({ commonName: 'dpu-1' })
    t.equal(
      await restarted.adopt({ ...identity, cert: third.cert, key: third.key }),
      false,
      'renewed again: still nothing for ovn-controller to change',
    )
    t.equal(restarted.ovsdbTls().key, identity.key, 'the pair in use is kept whole')
    t.equal(await restarted.use(await group.certifyKeyOf(third.cert), group.caCert), true)
    t.equal(await readFile(restarted.keyFile, 'utf8'), third.key, 'until one for the newest key')
  },
)
