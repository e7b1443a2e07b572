import t from 'tap'
import {
  type CertificateSigner,
  certificateAuthorityOf,
  newCertificateAuthority,
  trustedBy,
} from '../pki/index.ts'
import { identityVerdict } from './identity.ts'

const DAY_MS = 24 * 60 * 60 * 1000
const operator = await certificateAuthorityOf(await newCertificateAuthority())
const other = await certificateAuthorityOf(await newCertificateAuthority())
const trusted = trustedBy(operator.caCert)
const identity = async (
  ca: CertificateSigner,
  commonName: string,
  dnsNames: string[] = [commonName],
) => (await ca.issueIdentity({ commonName, dnsNames })).cert

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
