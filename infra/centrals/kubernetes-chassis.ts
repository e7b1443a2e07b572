/**
 * The chassis CAs of Kubernetes-run centrals: one per group, kept in a Secret
 * (`<central>-chassis`, infra/k8s/ovn-central.ts `chassisSecret`) that the controller
 * makes with the central and deletes with it. It holds the CA (`ca.crt`, `ca.key`), the
 * server certificate the group's SB relay presents (`tls.crt`, `tls.key`, from that CA)
 * and the record of what the CA certified (`chassis-<dpu>.crt`); the relay mounts the
 * first three only, and admits only chassis certificates of that CA.
 *
 * The provider's optional methods, with the embedded centrals' semantics
 * (infra/centrals/chassis-certs.ts): `chassisCertificate`, `southboundCa`, `leaveChassis`
 * (a new CA and server certificate replace the Secret's, with no record: the relay drops
 * every session once the kubelet has updated its files, about a minute), `chassisCertified`
 * and `chassisRenewalsDue`. A central whose relay serves the SB Secret every group shares
 * (an earlier version made it) keeps doing so: its DPUs present their identities, trust
 * the CA they trust, and nothing is rotated. Nothing is held in this process that another
 * replica could not read: every answer starts from the Secret as stored, and every write
 * is conditional on the version read.
 */
import type { ISecret } from 'kubernetes-models/v1/Secret'
import { CentralUnavailableError, type OvnCentralProvider } from '../../lib/ovn/central.ts'
import {
  type CertificateSigner,
  certificateAuthorityOf,
  newCertificateAuthority,
} from '../../lib/pki/index.ts'
import {
  type CentralSettings,
  centralName,
  chassisSecret,
  chassisSecretName,
  relayOnChassisCa,
} from '../k8s/ovn-central.ts'
import {
  type CentralChassis,
  type ChassisCert,
  type ChassisRecords,
  type ChassisSigner,
  certifiedBy,
  chassisCertificates,
  chassisRenewalsDue,
} from './chassis-certs.ts'
import { absentOn404, type CentralsApi, call, ignore, statusOf } from './kubernetes-api.ts'

/** How long the relay's server certificate lasts: as long as its CA (ten years). */
const SERVER_CERT_DAYS = 3650
/** How often a write conditional on the version read is tried again (another replica). */
const WRITE_TRIES = 5

/** What `kubernetesChassis` needs. */
export interface KubernetesChassisOptions {
  readonly api: CentralsApi
  readonly settings: CentralSettings
  /** The CA of the DPUs' identities the store keeps (the operator's, or Hydrazine's). */
  readonly dpuCa: Pick<CertificateSigner, 'issued'>
  /** How long a chassis certificate is valid (ms). */
  readonly validityMs: number
  /** The groups that have a central (the provider's `groups()`). */
  readonly groups: () => Promise<string[]>
  readonly log: (line: string) => void
}

/** A group's chassis CA as its Secret holds it now. */
interface SecretCa extends ChassisSigner {
  readonly group: string
  readonly data: Readonly<Record<string, string>>
}

/** The chassis methods of the Kubernetes provider, and the Secret's lifecycle. */
export interface KubernetesChassis
  extends Required<
    Pick<
      OvnCentralProvider,
      | 'chassisCertificate'
      | 'southboundCa'
      | 'leaveChassis'
      | 'chassisCertified'
      | 'chassisRenewalsDue'
    >
  > {
  /** Makes the group's Secret unless it exists (before its StatefulSet: its pods mount it). */
  ensureSecret(group: string): Promise<void>
  /** Deletes the group's Secret (404: gone already). */
  deleteSecret(group: string): Promise<void>
}

/**
 * The chassis CAs of the centrals `settings` builds with `chassisCa`.
 *
 * @example
 * const chassis = kubernetesChassis({ api, settings, dpuCa, validityMs, groups, log })
 * await chassis.leaveChassis('tenant-a', 'dpu-3') // true: a new CA; the relay drops sessions
 */
export function kubernetesChassis(options: KubernetesChassisOptions): KubernetesChassis {
  const { api, settings, validityMs, log } = options
  const { namespace } = settings
  /** Per group: the CA last opened (its key imported once) and what it certified since. */
  const opened = new Map<
    string,
    { pem: string; signer: Promise<CertificateSigner>; certs: Map<string, ChassisCert> }
  >()

  const read = (group: string) =>
    absentOn404(() => api.readSecret(namespace, chassisSecretName(group)))

  /** A new CA and the relay's server certificate from it, as the Secret keeps them. */
  const newCa = async (group: string): Promise<Record<string, string>> => {
    const ca = await newCertificateAuthority()
    const signer = await certificateAuthorityOf(ca)
    const host = `${centralName(group)}.${namespace}.svc.${settings.clusterDomain}`
    const server = await signer.issueServer({
      commonName: centralName(group),
      dnsNames: [host, centralName(group)],
      days: SERVER_CERT_DAYS,
    })
    return {
      'ca.crt': ca.cert,
      'ca.key': ca.key,
      'tls.crt': server.cert,
      'tls.key': server.key,
    }
  }

  /** The Secret's PEM texts, made first when it does not exist. */
  const ensure = async (group: string): Promise<{ data: Record<string, string> }> => {
    for (let i = 0; ; i++) {
      const found = await read(group)
      if (found) return { data: decoded(found) }
      const made = await ignore(
        409,
        api.createSecret(namespace, chassisSecret(group, settings, await newCa(group)).toJSON()),
      )
      if (made)
        log(`central of group ${group}: chassis CA made (Secret ${chassisSecretName(group)})`)
      if (i >= WRITE_TRIES) throw unavailable(group, 'its chassis CA Secret was deleted meanwhile')
    }
  }

  /**
   * Writes `change(data)` over the Secret as read, conditional on its version; read again
   * and retried when another writer came first. `change` answers undefined to write
   * nothing (false then).
   */
  const update = async (
    group: string,
    change: (data: Record<string, string>) => Record<string, string> | undefined,
  ): Promise<boolean> => {
    for (let i = 0; ; i++) {
      const found = await read(group)
      if (!found) return false
      const next = change(decoded(found))
      if (!next) return false
      const body = chassisSecret(group, settings, next, found.metadata?.resourceVersion)
      try {
        await api.replaceSecret(namespace, chassisSecretName(group), body.toJSON())
        return true
      } catch (error) {
        if (statusOf(error) !== 409 || i >= WRITE_TRIES) throw error
      }
    }
  }

  /** The group's CA as the Secret holds it, its signer opened once per CA. */
  const caOf = async (group: string, data: Record<string, string>): Promise<SecretCa> => {
    const pem = data['ca.crt'] ?? ''
    let entry = opened.get(group)
    if (entry?.pem !== pem) {
      const signer = certificateAuthorityOf({ cert: pem, key: data['ca.key'] ?? '' })
      entry = { pem, signer, certs: new Map() }
      opened.set(group, entry)
      signer.catch(() => opened.delete(group))
    }
    const signer = await entry.signer
    return {
      group,
      data,
      caCert: signer.caCert,
      issued: (cert, at) => signer.issued(cert, at),
      certifyKeyOf: (cert, days) => signer.certifyKeyOf(cert, days),
    }
  }

  /** Whether the group's central has its relay on a chassis CA of its own (and exists). */
  const ownCa = async (group: string): Promise<'own' | 'shared' | 'none'> => {
    const sts = await absentOn404(() => api.readStatefulSet(namespace, centralName(group)))
    if (!sts || sts.metadata?.deletionTimestamp !== undefined) return 'none'
    return relayOnChassisCa(sts) ? 'own' : 'shared'
  }

  const central = async (group: string): Promise<CentralChassis<SecretCa> | undefined> => {
    const kind = await call(group, () => ownCa(group))
    if (kind === 'none') return undefined
    if (kind === 'shared') return { chassisCerts: new Map() }
    const { data } = await call(group, () => ensure(group))
    const ca = await caOf(group, data)
    return { chassisCa: ca, chassisCerts: opened.get(group)?.certs ?? new Map() }
  }

  const records = (ca: SecretCa): ChassisRecords => ({
    read: async (id) => ca.data[recordKey(id)],
    write: (id, cert) =>
      call(ca.group, () =>
        update(ca.group, (data) =>
          data['ca.crt'] === ca.caCert ? { ...data, [recordKey(id)]: cert } : undefined,
        ),
      ),
    ids: async () =>
      Object.keys(ca.data).flatMap((key) => {
        const id = /^chassis-(.+)\.crt$/.exec(key)?.[1]
        return id === undefined ? [] : [id]
      }),
  })

  /** The groups whose central checks chassis by a CA of its own, with that CA. */
  const ownCas = async (): Promise<SecretCa[]> => {
    const found: SecretCa[] = []
    for (const group of await options.groups()) {
      if ((await ownCa(group)) !== 'own') continue
      const secret = await read(group)
      if (secret) found.push(await caOf(group, decoded(secret)))
    }
    return found
  }

  return {
    chassisCertificate: chassisCertificates({
      tls: true,
      pki: options.dpuCa,
      validityMs,
      central,
      records,
    }),

    async southboundCa(group) {
      const c = await central(group)
      return c?.chassisCa?.caCert
    },

    async leaveChassis(group, dpuIds) {
      if ((await call(group, () => ownCa(group))) !== 'own') return false
      const who = typeof dpuIds === 'string' ? `DPU ${dpuIds}` : `DPUs ${dpuIds.join(', ')}`
      const fresh = await newCa(group)
      const replaced = await call(group, async () => {
        if (await update(group, () => fresh)) return true
        // No Secret (deleted by hand): a new one is the new CA all the same.
        await ensure(group)
        return true
      })
      opened.delete(group)
      log(
        `central of group ${group}: ${who} left; chassis CA replaced (its relay drops every session once its pods see the new Secret)`,
      )
      return replaced
    },

    async chassisCertified(only) {
      const cas = (await ownCas()).filter((ca) => only === undefined || ca.group === only)
      const certified = await Promise.all(
        cas.map(async (ca) => ({
          group: ca.group,
          dpuIds: await certifiedBy(ca.caCert, records(ca)),
        })),
      )
      return certified
    },

    async chassisRenewalsDue() {
      const due = await Promise.all(
        (await ownCas()).map(async (ca) => {
          const c = { chassisCa: ca, chassisCerts: opened.get(ca.group)?.certs ?? new Map() }
          return (await chassisRenewalsDue(c, validityMs, records)).map((dpuId) => ({
            group: ca.group,
            dpuId,
          }))
        }),
      )
      return due.flat()
    },

    async ensureSecret(group) {
      await ensure(group)
    },

    async deleteSecret(group) {
      opened.delete(group)
      await ignore(404, api.deleteSecret(namespace, chassisSecretName(group)))
    },
  }
}

/** The record's key of a DPU in the Secret (a DPU id is an RFC 1123 label). */
const recordKey = (id: string) => `chassis-${id}.crt`

/** A Secret's values, decoded from base64 (PEM texts). */
function decoded(secret: ISecret): Record<string, string> {
  return Object.fromEntries(
    Object.entries(secret.data ?? {}).map(([key, value]) => [
      key,
      Buffer.from(value, 'base64').toString('utf8'),
    ]),
  )
}

const unavailable = (group: string, why: string) =>
  new CentralUnavailableError(group, why, { retryable: true })
