/**
 * The chassis certificates of the embedded per-group centrals (infra/centrals/local.ts). Over TLS
 * a group's SB checks client certificates against the group's own chassis CA
 * (`chassis-ca/` in its directory), never Hydrazine's CA: a DPU serving the group presents
 * its identity's key certified by that CA (`chassisCertificate`, sent with its
 * `configure`), and a DPU of another group fails the TLS handshake.
 *
 * A chassis certificate is short-lived (`validityMs`, a day by default) and issued anew
 * once less than half of it is left (`chassisRenewalsDue` names the DPUs whose turn it is;
 * the controller's reconcile sends them a `configure` with the new one). When a DPU stops
 * serving the group, the group's chassis CA is replaced (`rotateChassisCaDir`): every
 * certificate the old one signed, the leaver's included, stops opening the SB. Which DPUs
 * the current CA certified is kept beside it (`chassisCertifiedIn`), so that a leaver
 * whose detach left the rotation to another (`leaveGroupSouthbound`) is found later.
 */
import { X509Certificate } from 'node:crypto'
import { readdir, readFile, rename, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { writeFileAtomic } from '../../lib/files/index.ts'
import {
  CentralUnavailableError,
  ChassisIdentityRefused,
  type OvnCentralProvider,
} from '../../lib/ovn/central.ts'
import { type CertificateAuthority, openCertificateAuthority } from '../../lib/pki/index.ts'

const DAY_MS = 24 * 60 * 60 * 1000
/**
 * Default validity of a chassis certificate (`HYDRAZINE_CHASSIS_CERT_HOURS`): a DPU that
 * kept one past its group's CA rotation could not use it anyway, and one copied off a DPU
 * is worth a day at most.
 */
export const CHASSIS_CERT_MS = DAY_MS
/** How much longer than the setting a certificate may seem to last (clocks, rounding). */
const SLACK_MS = 60_000

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
  /** How long a chassis certificate is valid (ms); renewed once less than half is left. */
  readonly validityMs: number
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
  validityMs,
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
    if (known?.identity === identity && lastsEnough(known, validityMs)) return known.cert
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
    if (
      kept &&
      keptEnds !== undefined &&
      lastsEnough({ ends: keptEnds, identityEnds }, validityMs)
    ) {
      cert = kept
    } else {
      cert = await ca.certifyKeyOf(identity, validityMs / DAY_MS)
      await writeFileAtomic(file, cert)
    }
    // The group's CA was replaced meanwhile (a DPU left): certify with the new one.
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

/** The DPUs a chassis certificate was issued to, by their files in the chassis CA's dir. */
async function certifiedDpus(caDir: string): Promise<string[]> {
  const files = await readdir(caDir).catch(() => [] as string[])
  return files.flatMap((f) => {
    const id = /^chassis-(.+)\.crt$/.exec(f)?.[1]
    return id === undefined ? [] : [id]
  })
}

/**
 * The DPUs the chassis CA in `caDir` certified, by the record it keeps (the last
 * certificate each was given, `chassis-<id>.crt`), whose certificate that CA signed and
 * is valid at `now`: each could open the group's SB. A CA replaced since signed none of
 * the new one's files, so a rotation empties the record. Nothing when `caDir` holds no CA.
 * Read from the files alone: it answers for a central that does not run too.
 *
 * @example await chassisCertifiedIn(join(centralDir, CHASSIS_CA_DIR)) // ['dpu-1', 'dpu-2']
 */
export async function chassisCertifiedIn(caDir: string, now = new Date()): Promise<string[]> {
  const caPem = await readFile(join(caDir, 'ca.crt'), 'utf8').catch(() => undefined)
  const ca = caPem === undefined ? undefined : certificateOf(caPem)
  if (!ca) return []
  const certified: string[] = []
  for (const id of await certifiedDpus(caDir)) {
    const pem = await readFile(join(caDir, `chassis-${id}.crt`), 'utf8').catch(() => undefined)
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
 * The DPUs whose certificate for this central is due for renewal: of this CA, and not
 * one `lastsEnough` keeps. Read from the files (they outlive a controller's restart); a DPU
 * whose identity is not known since the start is due when its certificate is past half
 * its life, and known afterwards. A certificate the current CA did not sign (its DPU
 * left, or the CA was replaced) is none of them: that DPU gets a new one when it is
 * configured for the group again.
 */
export async function chassisRenewalsDue(
  c: CentralChassis,
  validityMs: number,
  now = Date.now(),
): Promise<string[]> {
  const ca = c.chassisCa
  if (!ca) return []
  const due: string[] = []
  for (const id of await certifiedDpus(ca.dir)) {
    const pem = await readFile(join(ca.dir, `chassis-${id}.crt`), 'utf8').catch(() => undefined)
    if (pem === undefined || !ca.issued(pem, new Date(now))) continue
    const known = c.chassisCerts.get(id)
    const identityEnds = known?.cert === pem ? known.identityEnds : Number.POSITIVE_INFINITY
    if (!lastsEnough({ ends: endOf(pem), identityEnds }, validityMs, now)) due.push(id)
  }
  return due.sort()
}

/** The chassis CA's directory in a central's, and where its successor is made. */
export const CHASSIS_CA_DIR = 'chassis-ca'
const NEXT_CA_DIR = 'chassis-ca.next'
const OLD_CA_DIR = 'chassis-ca.old'

/**
 * Replaces a central's chassis CA with a new one (a new key, nothing it signed kept) and
 * returns it. The new CA is made beside the old and renamed into its place, so the path
 * the SB reads (`chassis-ca/ca.crt`) holds one CA or the other, never none; a cut between
 * the renames is finished by `settleChassisCaDir` at the next start.
 */
export async function rotateChassisCaDir(centralDir: string): Promise<CertificateAuthority> {
  const next = join(centralDir, NEXT_CA_DIR)
  const old = join(centralDir, OLD_CA_DIR)
  await rm(next, { recursive: true, force: true })
  await openCertificateAuthority(next)
  await rm(old, { recursive: true, force: true })
  await rename(join(centralDir, CHASSIS_CA_DIR), old).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'ENOENT') throw error
  })
  await rename(next, join(centralDir, CHASSIS_CA_DIR))
  await rm(old, { recursive: true, force: true })
  return openCertificateAuthority(join(centralDir, CHASSIS_CA_DIR))
}

/**
 * Finishes a rotation a cut stopped between its renames: the new CA, made whole, takes
 * the place the old one left. Anything else left beside it goes.
 */
export async function settleChassisCaDir(centralDir: string): Promise<void> {
  const current = join(centralDir, CHASSIS_CA_DIR)
  const next = join(centralDir, NEXT_CA_DIR)
  const hasCurrent = await readFile(join(current, 'ca.crt')).then(
    () => true,
    () => false,
  )
  const nextWhole = await readFile(join(next, 'ca.crt')).then(
    () => true,
    () => false,
  )
  if (!hasCurrent && nextWhole) {
    await rm(current, { recursive: true, force: true })
    await rename(next, current)
  }
  await rm(next, { recursive: true, force: true })
  await rm(join(centralDir, OLD_CA_DIR), { recursive: true, force: true })
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
