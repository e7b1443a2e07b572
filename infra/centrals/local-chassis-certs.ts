/**
 * The chassis CAs of the embedded per-group centrals (infra/centrals/local.ts), each in its
 * central's directory (`chassis-ca/`): the record of what it certified is kept beside it
 * (`chassis-<id>.crt`, `chassisRecordsIn`), a rotation replaces the directory whole
 * (`rotateChassisCaDir`). What chassis certificates are and when they are renewed is
 * infra/centrals/chassis-certs.ts, which the Kubernetes-run centrals share.
 */
import { readdir, readFile, rename, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { writeFileAtomic } from '../../lib/files/index.ts'
import { type CertificateAuthority, openCertificateAuthority } from '../../lib/pki/index.ts'
import {
  type CentralChassis as ChassisOf,
  type ChassisRecords,
  certifiedBy,
} from './chassis-certs.ts'

export {
  CHASSIS_CERT_MS,
  type ChassisCert,
  chassisCertificates,
  chassisRenewalsDue,
} from './chassis-certs.ts'

/** What an embedded central holds of its chassis certificates: its CA is a directory's. */
export type CentralChassis = ChassisOf<CertificateAuthority>

/** The record a chassis CA kept in `caDir` holds: `chassis-<id>.crt` beside `ca.crt`. */
export function chassisRecordsIn(caDir: string): ChassisRecords {
  const file = (id: string) => join(caDir, `chassis-${id}.crt`)
  return {
    read: (id) => readFile(file(id), 'utf8').catch(() => undefined),
    async write(id, cert) {
      await writeFileAtomic(file(id), cert)
      return true
    },
    async ids() {
      const files = await readdir(caDir).catch(() => [] as string[])
      return files.flatMap((f) => {
        const id = /^chassis-(.+)\.crt$/.exec(f)?.[1]
        return id === undefined ? [] : [id]
      })
    },
  }
}

/** The record of a directory's CA (`CertificateAuthority.dir`). */
export const chassisRecordsOf = (ca: CertificateAuthority) => chassisRecordsIn(ca.dir)

/**
 * The DPUs the chassis CA in `caDir` certified whose certificate is valid at `now`
 * (`certifiedBy`). Read from the files alone: it answers for a central that does not run
 * too. Undefined when `caDir` holds no CA (a central never started over TLS).
 *
 * @example await chassisCertifiedIn(join(centralDir, CHASSIS_CA_DIR)) // ['dpu-1', 'dpu-2']
 */
export async function chassisCertifiedIn(
  caDir: string,
  now = new Date(),
): Promise<string[] | undefined> {
  const caPem = await readFile(join(caDir, 'ca.crt'), 'utf8').catch(() => undefined)
  if (caPem === undefined) return undefined
  return certifiedBy(caPem, chassisRecordsIn(caDir), now)
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
