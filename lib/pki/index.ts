/**
 * lib/pki: a small certificate authority kept in one directory (`<dataDir>/pki/`), for the
 * TLS between Hydrazine's parts: Redis and OVN SB server certificates, and client
 * certificates for DPUs (CN = the DPU id, which OVN's RBAC reads as the chassis name).
 * Every certificate says what it is for (extended key usage): a server's `serverAuth`
 * only, a client's or a DPU identity's `clientAuth` only, so that no DPU's identity can
 * stand in for a server (OpenSSL's and Node's clients check the purpose); only a cluster
 * member's (`issuePeer`: raft between OVSDB replicas) carries both.
 *
 * Keys are ECDSA P-256 with SHA-256 signatures: OpenSSL 3 (Open vSwitch / OVN 23.03,
 * Redis 7) and Node accept them. Files: `ca.key` (PKCS#8 PEM, mode 0600) and `ca.crt`;
 * issued keys written with `writeIssued` are 0600 too. The directory is 0700.
 *
 * @example
 * const ca = await openCertificateAuthority('.hydrazine/pki')
 * const server = await ca.issueServer({ ips: ['172.18.0.1'], dnsNames: ['localhost'] })
 * const files = await ca.writeIssued('redis', server) // redis.crt, redis.key (0600)
 * const dpu = await ca.issueClient({ commonName: 'dpu-a' })
 */
import 'reflect-metadata'
import { createPrivateKey, X509Certificate as NodeX509, randomBytes, webcrypto } from 'node:crypto'
import { chmod, mkdir, readFile } from 'node:fs/promises'
import { isIP } from 'node:net'
import { join } from 'node:path'
import * as x509 from '@peculiar/x509'
import { writeFileAtomic } from '../files/index.ts'
import { CertificateRequestError, PkiError } from './errors.ts'

export { CertificateRequestError, PkiError } from './errors.ts'

type CryptoKey = webcrypto.CryptoKey
const crypto = webcrypto
x509.cryptoProvider.set(webcrypto)

const KEY_ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256' } as const
const SIGNING_ALGORITHM = { name: 'ECDSA', hash: 'SHA-256' } as const
const DAY_MS = 24 * 60 * 60 * 1000
/** Issued certificates start a little in the past: a peer's clock may be behind. */
const BACKDATE_MS = 5 * 60 * 1000

/** A certificate and its private key, both PEM. */
export interface Issued {
  readonly cert: string
  readonly key: string
}

/**
 * A DPU's identity: `cert` for it as a client (clientAuth only) and `serverCert` for the
 * servers it runs itself (its agent's gRPC and metrics; serverAuth only), both for `key`.
 */
export interface IssuedIdentity extends Issued {
  readonly serverCert: string
}

/** Where `writeIssued` put a certificate, its key (0600) and the CA certificate. */
export interface IssuedFiles {
  readonly certFile: string
  readonly keyFile: string
  readonly caFile: string
}

export interface ServerCertificateRequest {
  /** Subject CN (default: the first DNS name or IP). */
  readonly commonName?: string
  /** DNS subjectAltNames. */
  readonly dnsNames?: readonly string[]
  /** IP subjectAltNames (v4 or v6): clients that connect by address check them. */
  readonly ips?: readonly string[]
  /** Validity in days (default 365). */
  readonly days?: number
}

export interface ClientCertificateRequest {
  /** Subject CN: the identity the server sees (OVN RBAC: the chassis name, e.g. a DPU id). */
  readonly commonName: string
  /** Validity in days (default 365). */
  readonly days?: number
}

/**
 * A CA's signing and checking, wherever its key is kept: `openCertificateAuthority` keeps
 * it in a directory, `certificateAuthorityOf` takes it as PEM text (a Kubernetes Secret's).
 */
export interface CertificateSigner {
  /** The CA certificate, PEM. */
  readonly caCert: string
  /** A certificate for a TLS server (extended key usage serverAuth) with DNS/IP SANs. */
  issueServer(request: ServerCertificateRequest): Promise<Issued>
  /** A certificate for a TLS client (extended key usage clientAuth) named by its CN. */
  issueClient(request: ClientCertificateRequest): Promise<Issued>
  /**
   * A certificate for a member of a cluster whose members connect to each other (an OVSDB
   * raft member): each end is a server to some peers and a client to others, so both
   * `serverAuth` and `clientAuth`, with DNS/IP SANs.
   */
  issuePeer(request: ServerCertificateRequest): Promise<Issued>
  /**
   * A DPU's identity, named by its CN with optional SANs: one key, certified twice — as a
   * client (clientAuth only: what its agent presents to Redis and the Southbound) and as a
   * server (serverAuth only: what its agent's gRPC and metrics serve with).
   */
  issueIdentity(
    request: ServerCertificateRequest & { readonly commonName: string },
  ): Promise<IssuedIdentity>
  /**
   * A client certificate (clientAuth) from this CA for the subject CN and public key of
   * `cert`, a certificate another CA issued: its holder keeps its private key, and no
   * secret leaves this process. Valid `days` (default 365), never past `cert`'s own end.
   * Returns the certificate, PEM.
   */
  certifyKeyOf(cert: string, days?: number): Promise<string>
  /**
   * True when `cert` (PEM) was signed by this CA and is valid at `at` (default now);
   * false for anything else, unparsable text included.
   */
  issued(cert: string, at?: Date): boolean
}

/** A CA kept in a directory (`ca.key`, `ca.crt`), which also writes what it issues there. */
export interface CertificateAuthority extends CertificateSigner {
  /** The directory holding `ca.key` and `ca.crt` (and what `writeIssued` writes). */
  readonly dir: string
  /** Path of the CA certificate (PEM): what every client and server trusts. */
  readonly caFile: string
  /** Writes `<dir>/<name>.crt` and `<dir>/<name>.key` (0600) and returns their paths. */
  writeIssued(name: string, issued: Issued): Promise<IssuedFiles>
}

/** The DNS and IP subjectAltNames of a request, each checked. */
function altNames(request: ServerCertificateRequest): x509.JsonGeneralNames {
  const ips = request.ips ?? []
  const dnsNames = request.dnsNames ?? []
  for (const ip of ips) {
    if (isIP(ip) === 0) throw new CertificateRequestError(`not an IP address: ${ip}`)
  }
  for (const name of dnsNames) {
    if (!/^[A-Za-z0-9*]([A-Za-z0-9.-]*[A-Za-z0-9])?$/.test(name)) {
      throw new CertificateRequestError(`not a DNS name: ${name}`)
    }
  }
  return [
    ...dnsNames.map((value) => ({ type: 'dns' as const, value })),
    ...ips.map((value) => ({ type: 'ip' as const, value })),
  ]
}

/**
 * Opens the CA under `dir`, creating it (a new P-256 key and a self-signed certificate
 * valid for 10 years) when `ca.key` is absent. Throws PkiError when the files exist but
 * cannot be used.
 */
export async function openCertificateAuthority(dir: string): Promise<CertificateAuthority> {
  await mkdir(dir, { recursive: true, mode: 0o700 })
  await chmod(dir, 0o700)
  const keyFile = join(dir, 'ca.key')
  const caFile = join(dir, 'ca.crt')
  const existingKey = await readFile(keyFile, 'utf8').catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return undefined
    throw new PkiError(dir, `cannot read ca.key: ${error.message}`, error)
  })
  const { caKey, caCert } = existingKey
    ? await loadCa(dir, existingKey, caFile)
    : await createCa(keyFile, caFile)
  await chmod(keyFile, 0o600)
  return {
    ...signerOf(caKey, caCert),
    dir,
    caFile,
    async writeIssued(name, issued) {
      if (!/^[A-Za-z0-9._-]+$/.test(name) || name.startsWith('.') || name === 'ca') {
        throw new CertificateRequestError(`not a usable file name: ${name}`)
      }
      const certFile = join(dir, `${name}.crt`)
      const keyFile = join(dir, `${name}.key`)
      await writePrivate(keyFile, issued.key)
      await writeFileAtomic(certFile, issued.cert)
      return { certFile, keyFile, caFile }
    },
  }
}

/**
 * A new CA (a P-256 key and a self-signed certificate valid for 10 years), as PEM text
 * for whoever keeps it elsewhere than in a directory; `certificateAuthorityOf` opens it.
 *
 * @example const { key, cert } = await newCertificateAuthority()
 */
export async function newCertificateAuthority(): Promise<Issued> {
  const { caKey, caCert } = await makeCa()
  return { cert: caCert.toString('pem'), key: await privateKeyPem(caKey) }
}

/**
 * The CA whose key and certificate are `ca` (PEM, as `newCertificateAuthority` made them).
 * Throws PkiError when they are not a P-256 key and its certificate.
 */
export async function certificateAuthorityOf(ca: Issued): Promise<CertificateSigner> {
  const { caKey, caCert } = await parseCa('(PEM)', ca.key, ca.cert)
  return signerOf(caKey, caCert)
}

function signerOf(caKey: CryptoKey, caCert: x509.X509Certificate): CertificateSigner {
  const caPem = caCert.toString('pem')

  const caNode = new NodeX509(caPem)

  const sign = async (
    subject: string,
    days: number,
    usages: x509.ExtendedKeyUsage[],
    names: x509.JsonGeneralNames,
    publicKey: CryptoKey,
  ): Promise<x509.X509Certificate> => {
    if (!Number.isFinite(days) || days <= 0) {
      throw new CertificateRequestError(`validity must be a positive number of days, not ${days}`)
    }
    const now = Date.now()
    const cert = await x509.X509CertificateGenerator.create({
      serialNumber: serialNumber(),
      subject: [{ CN: [subject] }],
      issuer: caCert.subject,
      notBefore: new Date(now - BACKDATE_MS),
      notAfter: new Date(now + days * DAY_MS),
      signingAlgorithm: SIGNING_ALGORITHM,
      publicKey,
      signingKey: caKey,
      extensions: [
        new x509.BasicConstraintsExtension(false, undefined, true),
        new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
        new x509.ExtendedKeyUsageExtension(usages),
        ...(names.length > 0 ? [new x509.SubjectAlternativeNameExtension(names)] : []),
        await x509.SubjectKeyIdentifierExtension.create(publicKey),
        await x509.AuthorityKeyIdentifierExtension.create(caCert.publicKey),
      ],
    })
    return cert
  }

  const issue = async (
    subject: string,
    days: number,
    usages: x509.ExtendedKeyUsage[],
    names: x509.JsonGeneralNames,
  ): Promise<Issued> => {
    const keys = await crypto.subtle.generateKey(KEY_ALGORITHM, true, ['sign', 'verify'])
    const cert = await sign(subject, days, usages, names, keys.publicKey)
    return { cert: cert.toString('pem'), key: await privateKeyPem(keys.privateKey) }
  }
  const { clientAuth, serverAuth } = x509.ExtendedKeyUsage

  return {
    caCert: caPem,
    issueServer(request) {
      const commonName = request.commonName ?? request.dnsNames?.[0] ?? request.ips?.[0]
      if (!commonName) throw new CertificateRequestError('a server certificate needs a name')
      return issue(commonName, request.days ?? 365, [serverAuth], altNames(request))
    },
    issueClient(request) {
      if (!request.commonName) throw new CertificateRequestError('a client certificate needs a CN')
      return issue(request.commonName, request.days ?? 365, [clientAuth], [])
    },
    issuePeer(request) {
      const commonName = request.commonName ?? request.dnsNames?.[0] ?? request.ips?.[0]
      if (!commonName) throw new CertificateRequestError('a peer certificate needs a name')
      return issue(commonName, request.days ?? 365, [serverAuth, clientAuth], altNames(request))
    },
    async issueIdentity(request) {
      if (!request.commonName) throw new CertificateRequestError('an identity needs a CN')
      const days = request.days ?? 365
      const names = altNames(request)
      const client = await issue(request.commonName, days, [clientAuth], names)
      const publicKey = await new x509.X509Certificate(client.cert).publicKey.export(
        KEY_ALGORITHM,
        ['verify'],
      )
      const server = await sign(request.commonName, days, [serverAuth], names, publicKey)
      return { ...client, serverCert: server.toString('pem') }
    },
    async certifyKeyOf(pem, days = 365) {
      let holder: x509.X509Certificate
      try {
        holder = new x509.X509Certificate(pem)
      } catch (error) {
        throw new CertificateRequestError(`not a PEM certificate: ${(error as Error).message}`)
      }
      const commonName = holder.subjectName.getField('CN')[0]
      if (!commonName) throw new CertificateRequestError('the certificate has no CN')
      const kind = certifiableKey(new NodeX509(pem))
      if (!kind.ok) throw new CertificateRequestError(`the certificate's key: ${kind.why}`)
      const publicKey = await holder.publicKey.export(kind.algorithm, ['verify'])
      // Never outlives the holder's own certificate: a key replaced or expired there is done.
      const left = (holder.notAfter.getTime() - Date.now()) / DAY_MS
      if (left <= 0) throw new CertificateRequestError('the certificate has expired')
      const validity = Math.min(days, left)
      const cert = await sign(commonName, validity, [clientAuth], [], publicKey)
      return cert.toString('pem')
    },
    issued: issuedBy(caNode),
  }
}

/** Web Crypto's names of the EC curves a certified key may be on (Node names them by OID name). */
const CURVES: Readonly<Record<string, string>> = {
  prime256v1: 'P-256',
  secp384r1: 'P-384',
  secp521r1: 'P-521',
}

/** `certifiableKey`'s answer: the algorithm to import the key as, or why it cannot be. */
export type CertifiableKey =
  | {
      readonly ok: true
      readonly algorithm:
        | webcrypto.EcKeyImportParams
        | webcrypto.RsaHashedImportParams
        | webcrypto.Algorithm
    }
  | { readonly ok: false; readonly why: string }

/** The least RSA key a chassis certificate certifies (NIST SP 800-131A: 2048 bits). */
const MIN_RSA_BITS = 2048

/**
 * Whether `certifyKeyOf` can certify the key of `cert`, and as what Web Crypto algorithm
 * it is imported: an ECDSA key on P-256, P-384 or P-521, an RSA key of at least 2,048
 * bits, or Ed25519 — the keys an operator's CA (cert-manager's issuers, say) gives DPUs,
 * and OpenSSL 3's TLS (Open vSwitch's, Redis') takes. Hydrazine's own are P-256.
 *
 * @example certifiableKey(new X509Certificate(identityPem)) // { algorithm: { name: 'ECDSA', … } }
 */
export function certifiableKey(cert: NodeX509): CertifiableKey {
  const key = cert.publicKey
  const details = key.asymmetricKeyDetails ?? {}
  switch (key.asymmetricKeyType) {
    case 'ec': {
      const curve = CURVES[details.namedCurve ?? '']
      if (curve) return { ok: true, algorithm: { name: 'ECDSA', namedCurve: curve } }
      return {
        ok: false,
        why: `its EC key is on ${details.namedCurve ?? 'an unnamed curve'}, not P-256, P-384 or P-521`,
      }
    }
    case 'rsa':
      if ((details.modulusLength ?? 0) >= MIN_RSA_BITS) {
        return { ok: true, algorithm: { name: 'RSASSA-PKCS1-v1_5', hash: 'SHA-256' } }
      }
      return {
        ok: false,
        why: `its RSA key has ${details.modulusLength ?? 0} bits, fewer than ${MIN_RSA_BITS}`,
      }
    case 'ed25519':
      return { ok: true, algorithm: { name: 'Ed25519' } }
    default:
      return {
        ok: false,
        why: `its key is ${key.asymmetricKeyType ?? 'of no known type'}, not ECDSA, RSA or Ed25519`,
      }
  }
}

/**
 * What checks certificates against a CA whose key this process does not hold (the
 * operator's CA of the DPUs' identities): `issued(cert)` is true when one of the
 * certificates in `caPem` (a PEM bundle) signed `cert` and it is valid at `at`. Throws
 * PkiError when `caPem` holds no certificate.
 *
 * @example trustedBy(await readFile('/etc/hydrazine/dpu-ca/ca.crt', 'utf8')).issued(pem)
 */
export function trustedBy(caPem: string): Pick<CertificateSigner, 'caCert' | 'issued'> {
  const blocks = caPem.match(/-----BEGIN CERTIFICATE-----[^-]+-----END CERTIFICATE-----/g) ?? []
  const cas = blocks.flatMap((block) => {
    try {
      return [new NodeX509(block)]
    } catch {
      return []
    }
  })
  if (cas.length === 0) throw new PkiError('(PEM)', 'no CA certificate in the text given')
  const checks = cas.map(issuedBy)
  return { caCert: caPem, issued: (pem, at) => checks.some((issued) => issued(pem, at)) }
}

/**
 * The CN of a certificate's subject, when it has exactly one (whatever else the subject
 * holds: an operator's CA may add `O=`).
 *
 * @example commonNameOf(new X509Certificate(pem)) // 'dpu-1'
 */
export function commonNameOf(cert: NodeX509): string | undefined {
  const names = cert.subject
    .split('\n')
    .filter((line) => line.startsWith('CN='))
    .map((line) => line.slice(3))
  return names.length === 1 ? names[0] : undefined
}

/** `issued` of a CA whose certificate is `ca`. */
function issuedBy(ca: NodeX509): CertificateSigner['issued'] {
  return (pem, at = new Date()) => {
    try {
      const cert = new NodeX509(pem)
      return (
        cert.checkIssued(ca) &&
        cert.verify(ca.publicKey) &&
        new Date(cert.validFrom) <= at &&
        at <= new Date(cert.validTo)
      )
    } catch {
      return false
    }
  }
}

async function createCa(keyFile: string, caFile: string) {
  const { caKey, caCert } = await makeCa()
  // The certificate first, each file whole: `ca.key` marks a CA that was made to the end.
  // A cut between the two leaves a certificate without its key, from a creation nothing
  // used yet, which the next start makes again (never a key without its certificate).
  await writeFileAtomic(caFile, caCert.toString('pem'))
  await writePrivate(keyFile, await privateKeyPem(caKey))
  return { caKey, caCert }
}

async function makeCa() {
  const keys = await crypto.subtle.generateKey(KEY_ALGORITHM, true, ['sign', 'verify'])
  const now = Date.now()
  const name: x509.JsonName = [{ CN: [`Hydrazine CA ${randomBytes(4).toString('hex')}`] }]
  const caCert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serialNumber(),
    name,
    notBefore: new Date(now - BACKDATE_MS),
    notAfter: new Date(now + 3650 * DAY_MS),
    signingAlgorithm: SIGNING_ALGORITHM,
    keys,
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign,
        true,
      ),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  })
  return { caKey: keys.privateKey, caCert }
}

async function loadCa(dir: string, keyPem: string, caFile: string) {
  const certPem = await readFile(caFile, 'utf8').catch((error: Error) => {
    throw new PkiError(dir, `ca.key exists but ca.crt cannot be read: ${error.message}`, error)
  })
  return parseCa(dir, keyPem, certPem)
}

async function parseCa(dir: string, keyPem: string, certPem: string) {
  let caCert: x509.X509Certificate
  let caKey: CryptoKey
  try {
    caCert = new x509.X509Certificate(certPem)
    caKey = await crypto.subtle.importKey(
      'pkcs8',
      x509.PemConverter.decodeFirst(keyPem),
      KEY_ALGORITHM,
      false,
      ['sign'],
    )
  } catch (error) {
    throw new PkiError(dir, `ca.key or ca.crt is not a P-256 key / certificate`, error)
  }
  if (!new NodeX509(certPem).checkPrivateKey(createPrivateKey(keyPem)))
    throw new PkiError(dir, 'ca.key does not belong to ca.crt')
  return { caKey, caCert }
}

async function privateKeyPem(key: CryptoKey): Promise<string> {
  const der = await crypto.subtle.exportKey('pkcs8', key)
  return x509.PemConverter.encode(der, 'PRIVATE KEY')
}

/** A positive 128-bit serial number, hex (RFC 5280: at most 20 octets, unique per CA). */
function serialNumber(): string {
  const bytes = randomBytes(16)
  bytes[0] = (bytes[0] ?? 0) & 0x7f
  return bytes.toString('hex')
}

/** Writes a secret with mode 0600 from the first byte, whole or not at all (lib/files). */
export async function writePrivate(path: string, data: string): Promise<void> {
  await writeFileAtomic(path, data, { mode: 0o600 })
}
