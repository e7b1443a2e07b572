/**
 * The chassis certificates of the embedded per-group centrals (infra/centrals/local.ts). Over TLS
 * a group's SB checks client certificates against the group's own chassis CA
 * (`chassis-ca/` in its directory), never Hydrazine's CA: a DPU serving the group presents
 * its identity's key certified by that CA (`chassisCertificate`, sent with its
 * `configure`), and a DPU of another group fails the TLS handshake.
 */
import { X509Certificate } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { writeFileAtomic } from '../../lib/files/index.ts'
import {
  CentralUnavailableError,
  ChassisIdentityRefused,
  type OvnCentralProvider,
} from '../../lib/ovn/central.ts'
import type { CertificateAuthority } from '../../lib/pki/index.ts'

/** Validity of a chassis certificate; one with less than `RENEW_MS` left is issued anew. */
const CHASSIS_CERT_DAYS = 365
const DAY_MS = 24 * 60 * 60 * 1000
const RENEW_MS = 30 * DAY_MS

/** The certificate a DPU was last given for a group's SB, and the identity it certifies. */
export interface ChassisCert {
  readonly identity: string
  readonly cert: string
  /** When `cert`, and the identity whose key it certifies, stop being valid (ms). */
  readonly ends: number
  readonly identityEnds: number
}

/** What a group's central holds of its chassis certificates. */
export interface CentralChassis {
  /** The CA its TLS SB checks chassis against (opened by its first start). */
  chassisCa?: CertificateAuthority | undefined
  /** Per DPU: the certificate it was last given for this SB, and the identity it certifies. */
  readonly chassisCerts: Map<string, ChassisCert>
}

/** What `chassisCertificates` needs. */
export interface ChassisCertificatesOptions {
  /** Whether the SBs serve TLS; without, no DPU needs a certificate (it gets undefined). */
  readonly tls: boolean
  /** Hydrazine's CA, which issued each DPU's identity. */
  readonly pki: CertificateAuthority
  /** The group's central once it runs (undefined: released meanwhile). */
  readonly central: (group: string) => Promise<CentralChassis | undefined>
}

/**
 * `chassisCertificate` of a provider: the DPU's identity key certified by the group's
 * chassis CA, one at a time per group and DPU (two attaches at once get the same one).
 *
 * @example
 * const cert = await chassisCertificates({ tls, pki, central })('tenant-a', { id, identity })
 */
export function chassisCertificates({
  tls,
  pki,
  central,
}: ChassisCertificatesOptions): NonNullable<OvnCentralProvider['chassisCertificate']> {
  const certify = async (
    group: string,
    { id, identity }: { readonly id: string; readonly identity: string | null },
  ): Promise<string | undefined> => {
    if (!tls) return undefined
    const refuse = (why: string) => new ChassisIdentityRefused(group, id, why)
    if (identity === null) throw refuse('no certificate of it is on record')
    const c = await central(group)
    const ca = c?.chassisCa
    if (!c || !ca) throw new CentralUnavailableError(group, 'it was released', { retryable: false })
    // One per DPU and key, kept while a new one would not last longer: the agent then gets
    // the same certificate on every configure and has no reason to reconnect. An attach
    // for a DPU certified already costs a lookup, no file and no signature check.
    const known = c.chassisCerts.get(id)
    if (known?.identity === identity && lastsEnough(known)) return known.cert
    if (!pki.issued(identity)) {
      throw refuse("its certificate is not a valid one of Hydrazine's CA")
    }
    const holder = new X509Certificate(identity)
    if (holder.subject !== `CN=${id}`) throw refuse(`its certificate names ${holder.subject}`)
    const identityEnds = Date.parse(holder.validTo)
    const file = join(ca.dir, `chassis-${id}.crt`)
    const kept = await readFile(file, 'utf8').catch(() => undefined)
    const keptEnds = kept && ca.issued(kept) && sameKey(kept, holder) ? endOf(kept) : undefined
    let cert: string
    if (kept && keptEnds !== undefined && lastsEnough({ ends: keptEnds, identityEnds })) {
      cert = kept
    } else {
      cert = await ca.certifyKeyOf(identity, CHASSIS_CERT_DAYS)
      await writeFileAtomic(file, cert)
    }
    c.chassisCerts.set(id, { identity, cert, ends: endOf(cert), identityEnds })
    return cert
  }

  const certifying = new Map<string, Promise<string | undefined>>()
  return (group, dpu) => {
    // One at a time per group and DPU: two attaches at once get the same certificate.
    // Keyed by the identity too: a certify for a key its credentials replaced since is
    // not this caller's.
    const key = `${group}\n${dpu.id}\n${dpu.identity ?? ''}`
    const earlier = certifying.get(key)
    if (earlier) return earlier
    const done = certify(group, dpu).finally(() => certifying.delete(key))
    certifying.set(key, done)
    return done
  }
}

/**
 * A chassis certificate is kept while it is valid and a new one would not last much
 * longer: more than `RENEW_MS` left, or its identity's end (past which none is issued)
 * less than a day beyond its own.
 */
function lastsEnough(c: { readonly ends: number; readonly identityEnds: number }): boolean {
  const now = Date.now()
  return c.ends > now && (c.ends - now > RENEW_MS || c.identityEnds - c.ends < DAY_MS)
}

/** When a certificate (PEM) stops being valid (ms). */
function endOf(pem: string): number {
  return Date.parse(new X509Certificate(pem).validTo)
}

/** True when the certificate `pem` certifies the same public key as `holder`. */
function sameKey(pem: string, holder: X509Certificate): boolean {
  try {
    return new X509Certificate(pem).publicKey.equals(holder.publicKey)
  } catch {
    return false
  }
}
