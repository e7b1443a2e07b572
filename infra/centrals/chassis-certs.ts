/**
 * Chassis certificates, whoever keeps a group's chassis CA: the embedded per-group centrals
 * in a directory (infra/centrals/local-chassis-certs.ts), the Kubernetes-run ones in a
 * Secret (infra/centrals/kubernetes-chassis.ts). A group's TLS SB checks client
 * certificates against the group's own chassis CA, never against the CA of the DPUs'
 * identities: a DPU serving the group presents its identity's key certified by that CA
 * (`chassisCertificate`, sent with its `configure`), and a DPU of another group fails the
 * TLS handshake.
 *
 * A chassis certificate is short-lived (`validityMs`, a day by default) and issued anew
 * once less than half of it is left (`chassisRenewalsDue` names the DPUs whose turn it is).
 * When a DPU stops serving the group the chassis CA is replaced, and every certificate the
 * old one signed, the leaver's included, stops opening the SB. Which DPUs the current CA
 * certified is kept beside it (`ChassisRecords`: the last certificate each was given), so
 * that a leaver is found later (`certifiedBy`).
 */
import { X509Certificate } from 'node:crypto'
import {
  CentralUnavailableError,
  ChassisIdentityRefused,
  type OvnCentralProvider,
} from '../../lib/ovn/central.ts'
import { type CertificateSigner, commonNameOf } from '../../lib/pki/index.ts'

const DAY_MS = 24 * 60 * 60 * 1000
/**
 * Default validity of a chassis certificate (`HYDRAZINE_CHASSIS_CERT_HOURS`): a DPU that
 * kept one past its group's CA rotation could not use it anyway, and one copied off a DPU
 * is worth a day at most.
 */
export const CHASSIS_CERT_MS = DAY_MS
/** How much longer than the setting a certificate may seem to last (clocks, rounding). */
const SLACK_MS = 60_000

/** What of a CA chassis certificates need: its certificate, checking and certifying. */
export type ChassisSigner = Pick<CertificateSigner, 'caCert' | 'issued' | 'certifyKeyOf'>

/** The certificate a DPU was last given for a group's SB, and the identity it certifies. */
export interface ChassisCert {
  readonly identity: string
  readonly cert: string
  /** When `cert`, and the identity whose key it certifies, stop being valid (ms). */
  readonly ends: number
  readonly identityEnds: number
}

/** What a group's central holds of its chassis certificates. */
export interface CentralChassis<CA extends ChassisSigner = ChassisSigner> {
  /** The CA its TLS SB checks chassis against. */
  chassisCa?: CA | undefined
  /** Per DPU: the certificate it was last given for this SB, and the identity it certifies. */
  readonly chassisCerts: Map<string, ChassisCert>
}

/** The record a chassis CA keeps beside it: the last certificate it gave each DPU. */
export interface ChassisRecords {
  /** The certificate last kept for DPU `id`, if any. */
  read(id: string): Promise<string | undefined>
  /** Keeps `cert` as DPU `id`'s; false when the CA was replaced meanwhile (nothing kept). */
  write(id: string, cert: string): Promise<boolean>
  /** The DPUs a certificate is kept for. */
  ids(): Promise<string[]>
}

/** What `chassisCertificates` needs. */
export interface ChassisCertificatesOptions<CA extends ChassisSigner> {
  /** Whether the SBs serve TLS; without, no DPU needs a certificate (it gets undefined). */
  readonly tls: boolean
  /** The CA of the DPUs' identities (Hydrazine's, or the operator's on Kubernetes). */
  readonly pki: Pick<CertificateSigner, 'issued'>
  /** How long a chassis certificate is valid (ms); renewed once less than half is left. */
  readonly validityMs: number
  /**
   * The group's central with its chassis CA (undefined: released meanwhile; without a
   * `chassisCa`: its SB takes the DPUs' identities as they are, and they get undefined).
   */
  readonly central: (group: string) => Promise<CentralChassis<CA> | undefined>
  /** The record kept beside the central's chassis CA `ca`. */
  readonly records: (ca: CA) => ChassisRecords
}

/**
 * `chassisCertificate` of a provider: the DPU's identity key certified by the group's
 * chassis CA, one at a time per group and DPU (two attaches at once get the same one).
 *
 * @example
 * const certify = chassisCertificates({ tls, pki, validityMs, central, records })
 * const cert = await certify('tenant-a', { id: 'dpu-1', identity })
 */
export function chassisCertificates<CA extends ChassisSigner>({
  tls,
  pki,
  validityMs,
  central,
  records,
}: ChassisCertificatesOptions<CA>): NonNullable<OvnCentralProvider['chassisCertificate']> {
  const certify = async (
    group: string,
    { id, identity }: { readonly id: string; readonly identity: string | null },
  ): Promise<string | undefined> => {
    if (!tls) return undefined
    const refuse = (why: string) => new ChassisIdentityRefused(group, id, why)
    const c = await central(group)
    if (!c) throw new CentralUnavailableError(group, 'it was released', { retryable: false })
    const ca = c.chassisCa
    if (!ca) return undefined
    if (identity === null) throw refuse('no certificate of it is on record')
    // One per DPU and key, kept while a new one would not last longer: the agent then gets
    // the same certificate on every configure and has no reason to reconnect. An attach
    // for a DPU certified already costs a lookup, no write and no signature check.
    const known = c.chassisCerts.get(id)
    if (known?.identity === identity && lastsEnough(known, validityMs)) return known.cert
    if (!pki.issued(identity)) {
      throw refuse("its certificate is not a valid one of the DPUs' CA")
    }
    const holder = new X509Certificate(identity)
    if (commonNameOf(holder) !== id) throw refuse(`its certificate names ${holder.subject}`)
    const identityEnds = Date.parse(holder.validTo)
    const record = records(ca)
    const kept = await record.read(id)
    const keptEnds = kept && ca.issued(kept) && sameKey(kept, holder) ? endOf(kept) : undefined
    let cert: string
    if (
      kept &&
      keptEnds !== undefined &&
      lastsEnough({ ends: keptEnds, identityEnds }, validityMs)
    ) {
      cert = kept
    } else {
      cert = await ca.certifyKeyOf(identity, validityMs / DAY_MS)
      // The group's CA was replaced meanwhile (a DPU left): certify with the new one.
      if (!(await record.write(id, cert))) return certify(group, { id, identity })
    }
    if (c.chassisCa !== ca) return certify(group, { id, identity })
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
 * A chassis certificate is kept while it is valid, was issued for no longer than
 * `validityMs` (one an earlier version issued for a year is replaced), and a new one would
 * not last much longer: more than half of `validityMs` left, or its identity's end (past
 * which none is issued) less than a quarter of `validityMs` beyond its own.
 */
function lastsEnough(
  c: { readonly ends: number; readonly identityEnds: number },
  validityMs: number,
  now = Date.now(),
): boolean {
  const left = c.ends - now
  if (left <= 0 || left > validityMs + SLACK_MS) return false
  const gain = Math.min(now + validityMs, c.identityEnds) - c.ends
  return left > validityMs / 2 || gain < validityMs / 4
}

/**
 * The DPUs the chassis CA `caPem` certified, by its record, whose certificate that CA
 * signed and is valid at `now`: each could open the group's SB. A CA replaced since signed
 * none of the new one's record, so a rotation empties it. Nothing when `caPem` is none.
 *
 * @example await certifiedBy(caPem, records) // ['dpu-1', 'dpu-2']
 */
export async function certifiedBy(
  caPem: string | undefined,
  records: ChassisRecords,
  now = new Date(),
): Promise<string[]> {
  const ca = caPem === undefined ? undefined : certificateOf(caPem)
  if (!ca) return []
  const certified: string[] = []
  for (const id of await records.ids()) {
    const pem = await records.read(id)
    const cert = pem === undefined ? undefined : certificateOf(pem)
    if (
      cert?.checkIssued(ca) &&
      cert.verify(ca.publicKey) &&
      Date.parse(cert.validFrom) <= now.getTime() &&
      now.getTime() <= Date.parse(cert.validTo)
    )
      certified.push(id)
  }
  return certified.sort()
}

/**
 * The DPUs whose certificate for this central is due for renewal: of its CA, and not
 * one `lastsEnough` keeps. Read from the record (it outlives a controller's restart); a
 * DPU whose identity is not known since the start is due when its certificate is past
 * half its life, and known afterwards. A certificate the current CA did not sign (its DPU
 * left, or the CA was replaced) is none of them: that DPU gets a new one when it is
 * configured for the group again.
 */
export async function chassisRenewalsDue<CA extends ChassisSigner>(
  c: CentralChassis<CA>,
  validityMs: number,
  records: (ca: CA) => ChassisRecords,
  now = Date.now(),
): Promise<string[]> {
  const ca = c.chassisCa
  if (!ca) return []
  const record = records(ca)
  const due: string[] = []
  for (const id of await record.ids()) {
    const pem = await record.read(id)
    if (pem === undefined || !ca.issued(pem, new Date(now))) continue
    const known = c.chassisCerts.get(id)
    const identityEnds = known?.cert === pem ? known.identityEnds : Number.POSITIVE_INFINITY
    if (!lastsEnough({ ends: endOf(pem), identityEnds }, validityMs, now)) due.push(id)
  }
  return due.sort()
}

/** The certificate of a PEM text, or undefined when it is none. */
function certificateOf(pem: string): X509Certificate | undefined {
  try {
    return new X509Certificate(pem)
  } catch {
    return undefined
  }
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
