import 'reflect-metadata'
import { KeyObject, webcrypto, X509Certificate } from 'node:crypto'
import * as x509 from '@peculiar/x509'
import t from 'tap'
import {
  type CertificateSigner,
  certificateAuthorityOf,
  newCertificateAuthority,
  trustedBy,
} from '../pki/index.ts'
import { identityVerdict } from './identity.ts'

const DAY_MS = 24 * 60 * 60 * 1000
const operatorCa = await newCertificateAuthority()
const operator = await certificateAuthorityOf(operatorCa)
const other = await certificateAuthorityOf(await newCertificateAuthority())
const trusted = trustedBy(operator.caCert)
const identity = async (
  ca: CertificateSigner,
  commonName: string,
  dnsNames: string[] = [commonName],
) => (await ca.issueIdentity({ commonName, dnsNames })).cert

/** Key algorithms an operator's CA may give DPUs (cert-manager's RSA 2048 by default). */
const RSA = (bits: number) => ({
  name: 'RSASSA-PKCS1-v1_5',
  modulusLength: bits,
  publicExponent: new Uint8Array([1, 0, 1]),
  hash: 'SHA-256',
})
const KEYS = {
  rsa2048: RSA(2048),
  rsa1024: RSA(1024),
  p384: { name: 'ECDSA', namedCurve: 'P-384' },
  ed25519: { name: 'Ed25519' },
} as const

/** An identity of the operator's CA for a key of `algorithm`, and that key. */
async function operatorIdentity(
  commonName: string,
  algorithm: (typeof KEYS)[keyof typeof KEYS],
): Promise<{ cert: string; key: KeyObject }> {
  const keys = (await webcrypto.subtle.generateKey(algorithm, true, [
    'sign',
    'verify',
  ])) as webcrypto.CryptoKeyPair
  const ca = new x509.X509Certificate(operator.caCert)
  const caKey = await webcrypto.subtle.importKey(
    'pkcs8',
    x509.PemConverter.decodeFirst(operatorCa.key),
    { name: 'ECDSA', namedCurve: 'P-256' },
    false,
    ['sign'],
  )
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: '01',
    subject: `CN=${commonName}`,
    issuer: ca.subject,
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + DAY_MS),
    signingAlgorithm: { name: 'ECDSA', hash: 'SHA-256' },
    publicKey: keys.publicKey,
    signingKey: caKey,
  })
  return { cert: cert.toString('pem'), key: KeyObject.from(keys.privateKey) }
}

t.test('an agent presents an identity: taken only as its own DPU’s, and newer', async (t) => {
  const own = await identity(operator, 'dpu-1')
  // Issued a second later: `validFrom` has second precision.
  await new Promise((resolve) => setTimeout(resolve, 1100))
  const renewed = await identity(operator, 'dpu-1')
  const cases: [string, string, string | null, true | RegExp][] = [
    ['none on record: taken', own, null, true],
    ['a renewed one replaces the older', renewed, own, true],
    ['the older one does not replace the renewed', own, renewed, /as new or newer/],
    ['the one on record again: nothing to do', own, own, /the one on record/],
    ['another DPU’s certificate', await identity(operator, 'dpu-2'), null, /CN is dpu-2/],
    [
      'a DNS name of another DPU',
      await identity(operator, 'dpu-1', ['dpu-2']),
      null,
      /names dpu-2/,
    ],
    ['another CA’s, with this DPU’s name', await identity(other, 'dpu-1'), null, /DPUs' CA/],
    ['not a certificate', 'hello', null, /not a PEM certificate/],
    [
      'an RSA key of 1,024 bits',
      (await operatorIdentity('dpu-1', KEYS.rsa1024)).cert,
      null,
      /1024 bits, fewer than 2048/,
    ],
    [
      'one on record of another CA (Hydrazine’s, earlier) is replaced',
      own,
      await identity(other, 'dpu-1'),
      true,
    ],
  ]
  for (const [what, presented, recorded, expected] of cases) {
    const verdict = identityVerdict({ dpuId: 'dpu-1', presented, recorded, trusted })
    if (expected === true) t.same(verdict, { take: true }, what)
    else t.match(verdict, { take: false, why: expected }, what)
  }
  const later = new Date(Date.now() + 400 * DAY_MS)
  t.match(
    identityVerdict({ dpuId: 'dpu-1', presented: own, recorded: null, trusted, now: later }),
    { take: false, why: /DPUs' CA/ },
    'an expired one',
  )
})

t.test('trustedBy: a CA bundle, no key; nothing else', async (t) => {
  const both = trustedBy(`${other.caCert}\n${operator.caCert}`)
  t.ok(both.issued(await identity(operator, 'dpu-1')), 'either CA of a bundle')
  t.notOk(trusted.issued(await identity(other, 'dpu-1')), 'not another CA’s')
  t.throws(() => trustedBy('no certificate'), { code: 'PKI_INVALID' })
})

t.test(
  "an operator's DPU keys: RSA, P-384 and Ed25519 taken and certified as they are",
  async (t) => {
    const group = await certificateAuthorityOf(await newCertificateAuthority())
    for (const [what, algorithm] of [
      ['RSA 2048', KEYS.rsa2048],
      ['ECDSA P-384', KEYS.p384],
      ['Ed25519', KEYS.ed25519],
    ] as const) {
      const { cert, key } = await operatorIdentity('dpu-1', algorithm)
      const verdict = identityVerdict({ dpuId: 'dpu-1', presented: cert, recorded: null, trusted })
      t.same(verdict, { take: true }, `${what}: taken`)
      const chassis = new X509Certificate(await group.certifyKeyOf(cert, 1))
      t.ok(
        chassis.checkPrivateKey(key),
        `${what}: the chassis certificate is for the DPU's own key`,
      )
      t.ok(group.issued(chassis.toString()), `${what}: signed by the group's CA`)
    }
    const weak = await operatorIdentity('dpu-1', KEYS.rsa1024)
    await t.rejects(
      group.certifyKeyOf(weak.cert, 1),
      { code: 'PKI_BAD_REQUEST', message: /1024 bits, fewer than 2048/ },
      'a weak key is not certified',
    )
  },
)
