/**
 * The DPU's IPsec PKI for its Geneve tunnels, as the agent gives it to OVS: the
 * `Open_vSwitch` `other_config` keys `ovs-monitor-ipsec` reads (`certificate`,
 * `private_key`, `ca_cert`), in a real OVS database, with certificates from Hydrazine's
 * PKI (lib/pki) and a group's chassis CA.
 */
import { createPrivateKey, X509Certificate } from 'node:crypto'
import { readdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { GeneveIpsec } from '../../agent/geneve-ipsec.ts'
import { LocalOvs } from '../../agent/ovs.ts'
import { commonNameOf, loadAgentTls } from '../../agent/tls.ts'
import { run } from '../../infra/lab/dpu.ts'
import { openCertificateAuthority } from '../../lib/pki/index.ts'
import { tempDir } from '../helpers/stack.ts'
import { startOvsdb } from '../ovn/ovsdb-fixture.ts'

t.test("OVS's IPsec gets the DPU's chassis certificate, or its identity", async (t) => {
  const dir = await tempDir(t, 'hz-ipsec-')
  const hydrazine = await openCertificateAuthority(join(dir, 'hydrazine-ca'))
  const groupCa = await openCertificateAuthority(join(dir, 'group-ca'))
  const otherGroupCa = await openCertificateAuthority(join(dir, 'other-group-ca'))
  const issued = await hydrazine.issueIdentity({ commonName: 'dpu-1' })
  const files = await hydrazine.writeIssued('dpu-1', issued)
  const tls = await loadAgentTls({
    tlsCert: files.certFile,
    tlsKey: files.keyFile,
    tlsCa: files.caFile,
    systemId: 'dpu-1',
  })
  if (!tls) throw new Error('no identity')

  const server = await startOvsdb(t, '/usr/share/openvswitch/vswitch.ovsschema')
  await run('ovs-vsctl', [`--db=${server.unix}`, '--no-wait', 'init'])
  await run('ovs-vsctl', [
    `--db=${server.unix}`,
    '--no-wait',
    'set',
    'Open_vSwitch',
    '.',
    'other_config:hw-offload=false',
  ])
  const ovs = await LocalOvs.connect(server.unix)
  t.teardown(() => ovs.close())
  const ipsec = new GeneveIpsec(join(dir, 'run', 'ipsec'), tls, files.keyFile)
  const pkiOf = async () => {
    const config = await ovs.otherConfig()
    const cert = new X509Certificate(await readFile(config.certificate ?? '', 'utf8'))
    const ca = new X509Certificate(await readFile(config.ca_cert ?? '', 'utf8'))
    return { config, cert, ca }
  }

  t.test('a chassis certificate that chains to the group CA: the group CA alone', async (t) => {
    const chassis = await groupCa.certifyKeyOf(issued.cert)
    t.ok(await ipsec.use(ovs, { cert: chassis, ca: groupCa.caCert }), 'other_config written')
    const { config, cert, ca } = await pkiOf()
    t.equal(config.private_key, files.keyFile, "the DPU's own key")
    t.equal(commonNameOf(cert), 'dpu-1', 'CN = the chassis name, which peers pin (remote_name)')
    t.ok(cert.checkPrivateKey(createPrivateKey(tls.key)), 'the certificate is for that key')
    t.equal(
      ca.fingerprint256,
      new X509Certificate(groupCa.caCert).fingerprint256,
      "peers are taken only with the group CA's certificates",
    )
    t.notOk(
      cert.verify(new X509Certificate(hydrazine.caCert).publicKey),
      'not a Hydrazine-CA certificate',
    )
    t.equal(config['hw-offload'], 'false', 'other keys are kept')
    t.notOk(
      await ipsec.use(ovs, { cert: chassis, ca: groupCa.caCert }),
      'the same again: no change',
    )
    t.ok(await ipsec.inUse(ovs))
  })

  t.test('a renewed chassis certificate is a new file, the old one goes', async (t) => {
    const before = (await ovs.otherConfig()).certificate
    const renewed = await groupCa.certifyKeyOf(issued.cert, 2)
    t.ok(await ipsec.use(ovs, { cert: renewed, ca: groupCa.caCert }))
    const after = (await ovs.otherConfig()).certificate
    t.not(after, before, 'ovs-monitor-ipsec sees a new path and loads it')
    t.equal(await readFile(after ?? '', 'utf8'), renewed)
    t.same((await readdir(ipsec.dir)).sort().length, 2, 'one certificate and one CA file')
  })

  t.test("a certificate the SB CA did not sign: the identity and Hydrazine's CA", async (t) => {
    const foreign = await otherGroupCa.certifyKeyOf(issued.cert)
    await ipsec.use(ovs, { cert: foreign, ca: groupCa.caCert })
    const { cert, ca } = await pkiOf()
    t.equal(cert.fingerprint256, new X509Certificate(issued.cert).fingerprint256, 'the identity')
    t.equal(ca.fingerprint256, new X509Certificate(hydrazine.caCert).fingerprint256)
  })

  t.test('not asked any more: the keys go, only when they are the agent’s', async (t) => {
    t.ok(await ipsec.stop(ovs))
    const config = await ovs.otherConfig()
    for (const key of ['certificate', 'private_key', 'ca_cert'])
      t.notOk(key in config, `${key} gone`)
    t.equal(config['hw-offload'], 'false')
    t.same(await readdir(ipsec.dir), [], 'its files removed')
    await run('ovs-vsctl', [
      `--db=${server.unix}`,
      '--no-wait',
      'set',
      'Open_vSwitch',
      '.',
      'other_config:certificate=/etc/ipsec.d/certs/operator.pem',
      'other_config:private_key=/etc/ipsec.d/private/operator.pem',
    ])
    t.notOk(await ipsec.stop(ovs), "an operator's own IPsec PKI is left alone")
    t.equal((await ovs.otherConfig()).certificate, '/etc/ipsec.d/certs/operator.pem')
  })
})
