/**
 * The identity a DPU's agent presents (its `--tls-cert`, public, in its heartbeat's
 * `identity`), and when the controller takes it as the DPU's identity on record
 * (`StateStore.dpus.identity`): where the operator's CA, not Hydrazine's, issues the DPUs'
 * certificates, nothing else tells the controller which key a DPU holds.
 *
 * An agent may write only its own heartbeat key (its Redis user), and what it writes there
 * is taken only when it is a certificate of the DPUs' CA naming that DPU, valid now, and
 * newer than the one on record: a DPU cannot have another DPU's certificate recorded as
 * its own, nor an older certificate of its own (an earlier key) replace the current one.
 * The certificate is public and certifies a key only its DPU holds: recording it gives
 * nobody else anything to present.
 */
import { X509Certificate } from 'node:crypto'
import { type CertificateSigner, certifiableKey, commonNameOf } from '../pki/index.ts'

/** Why a presented identity is not taken, in words for a log line; undefined: taken. */
export type IdentityVerdict =
  | { readonly take: true }
  | { readonly take: false; readonly why: string }

/**
 * Whether `presented`, the identity the agent of DPU `dpuId` presents, replaces `recorded`
 * (the one on record, null: none): it must be issued by `trusted` (the DPUs' CA) and valid
 * at `now`, name the DPU (its CN, and its DNS names when it has any, are `dpuId`), hold a
 * key a chassis certificate can certify (`certifiableKey`), and be
 * newer than `recorded` (issued later), unless `recorded` is no valid certificate of
 * `trusted` (expired, or of another CA).
 *
 * @example identityVerdict({ dpuId: 'dpu-1', presented, recorded: null, trusted }) // { take: true }
 */
export function identityVerdict({
  dpuId,
  presented,
  recorded,
  trusted,
  now = new Date(),
}: {
  readonly dpuId: string
  readonly presented: string
  readonly recorded: string | null
  readonly trusted: Pick<CertificateSigner, 'issued'>
  readonly now?: Date
}): IdentityVerdict {
  const refuse = (why: string): IdentityVerdict => ({ take: false, why })
  const cert = certificateOf(presented)
  if (!cert) return refuse('it is not a PEM certificate')
  if (!trusted.issued(presented, now)) return refuse("it is no valid certificate of the DPUs' CA")
  const named = namesOf(cert)
  if (named.commonName !== dpuId) return refuse(`its CN is ${named.commonName ?? '(none)'}`)
  const other = named.dnsNames.find((name) => name !== dpuId)
  if (other !== undefined) return refuse(`it names ${other}`)
  // A group's chassis CA certifies this key as it is.
  const key = certifiableKey(cert)
  if (!key.ok) return refuse(`${key.why}: no chassis certificate can certify it`)
  if (recorded === null || !trusted.issued(recorded, now)) return { take: true }
  const before = certificateOf(recorded)
  if (!before) return { take: true }
  if (before.fingerprint256 === cert.fingerprint256) return refuse('it is the one on record')
  if (Date.parse(cert.validFrom) <= Date.parse(before.validFrom))
    return refuse('the one on record is as new or newer')
  return { take: true }
}

/** The CN and DNS names of a certificate. */
function namesOf(cert: X509Certificate): { commonName?: string; dnsNames: string[] } {
  const commonName = commonNameOf(cert)
  const dnsNames = (cert.subjectAltName ?? '')
    .split(', ')
    .filter((entry) => entry.startsWith('DNS:'))
    .map((entry) => entry.slice(4))
  return { ...(commonName !== undefined ? { commonName } : {}), dnsNames }
}

function certificateOf(pem: string): X509Certificate | undefined {
  try {
    return new X509Certificate(pem)
  } catch {
    return undefined
  }
}
