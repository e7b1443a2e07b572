/**
 * The DPU's TLS identity (`--tls-cert`, `--tls-key`, `--tls-ca`, and `--tls-server-cert`),
 * read and checked once at start-up: ovn-controller and the agent's own Southbound checks
 * for `ssl:` remotes and Redis present the identity (a client certificate); the gRPC
 * server (mTLS) and metrics serve with the server certificate for the same key.
 *
 * OVN RBAC reads the certificate's CN as the chassis name, so the CN must be the agent's
 * `system-id`; the agent refuses to start otherwise, and when the certificate was not
 * issued by the CA, does not match the key, or is not valid now.
 */
import { createPrivateKey, X509Certificate } from 'node:crypto'
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { ConfigError } from '../lib/errors.ts'
import { writeFileAtomic } from '../lib/files/index.ts'
import type { AgentConfig } from './config.ts'
import { SouthboundCertificateRefused } from './errors.ts'

/** The DPU's identity: the files as given (for ovn-controller) and their PEM contents. */
export interface AgentTls {
  readonly files: { readonly cert: string; readonly key: string; readonly ca: string }
  readonly cert: string
  readonly key: string
  readonly ca: string
  /** What its gRPC and metrics serve with: `--tls-server-cert`, else the identity. */
  readonly serverCert: string
  /**
   * False when `serverCert` does not say it is for a server (an identity, clientAuth only,
   * standing in for `--tls-server-cert`): clients that check the purpose refuse it.
   */
  readonly serves: boolean
  /** The certificate's CN: the chassis name. */
  readonly commonName: string
}

/**
 * TLS material for an OVSDB `ssl:` remote, in the shape lib/ovn's `OvsdbClient.connect`
 * takes as its `tls` option: PEM contents, as Node's `tls.connect` takes them.
 */
export interface OvsdbTls {
  readonly ca: string
  readonly cert: string
  readonly key: string
}

type TlsKey = 'tlsCert' | 'tlsKey' | 'tlsCa' | 'tlsServerCert'
const FLAG: Record<TlsKey, string> = {
  tlsCert: '--tls-cert (or HZ_TLS_CERT)',
  tlsKey: '--tls-key (or HZ_TLS_KEY)',
  tlsCa: '--tls-ca (or HZ_TLS_CA)',
  tlsServerCert: '--tls-server-cert (or HZ_TLS_SERVER_CERT)',
}
/** Extended key usage serverAuth (RFC 5280). */
const SERVER_AUTH = '1.3.6.1.5.5.7.3.1'

function refuse(key: TlsKey, message: string): ConfigError {
  return new ConfigError(`agent TLS: ${FLAG[key]} ${message}`, [{ path: FLAG[key], message }])
}

async function readPem(key: TlsKey, path: string): Promise<string> {
  try {
    return await readFile(path, 'utf8')
  } catch (err) {
    throw refuse(key, `cannot be read (${path}): ${(err as Error).message}`)
  }
}

/** Every certificate of a PEM bundle. */
function certificates(pem: string): X509Certificate[] {
  const blocks = pem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? []
  return blocks.map((b) => new X509Certificate(b))
}

/** Why `cert` is not valid at `now`, or undefined when it is. */
function notValidAt(cert: X509Certificate, now: Date): string | undefined {
  const t = now.getTime()
  if (Date.parse(cert.validFrom) <= t && t <= Date.parse(cert.validTo)) return undefined
  return `is not valid now (${cert.validFrom} to ${cert.validTo})`
}

/** Why `pem` cannot be trusted as the CA of a Southbound, or undefined when it can. */
function caRefusal(pem: string): string | undefined {
  try {
    const cas = certificates(pem)
    if (cas.length === 0) return 'sbCa holds no certificate'
    return cas.every((ca) => ca.ca) ? undefined : 'sbCa is not a CA certificate'
  } catch (err) {
    return `sbCa is not a PEM certificate: ${(err as Error).message}`
  }
}

/** The CN of an X.509 subject as Node prints it (`CN=dpu-1\nO=…`). */
export function commonNameOf(cert: X509Certificate): string | undefined {
  return cert.subject
    .split('\n')
    .map((l) => /^CN=(.*)$/.exec(l)?.[1])
    .find((cn) => cn !== undefined)
}

/**
 * Reads the TLS files named by the configuration and checks them; undefined when the
 * agent runs without TLS. Throws `ConfigError` naming the option at fault.
 */
export async function loadAgentTls(
  config: Pick<AgentConfig, 'tlsCert' | 'tlsKey' | 'tlsCa' | 'systemId'> &
    Partial<Pick<AgentConfig, 'tlsServerCert'>>,
  now: Date = new Date(),
): Promise<AgentTls | undefined> {
  const { tlsCert, tlsKey, tlsCa, tlsServerCert } = config
  if (tlsCert === undefined || tlsKey === undefined || tlsCa === undefined) return undefined
  const [certPem, keyPem, caPem, serverPem] = await Promise.all([
    readPem('tlsCert', tlsCert),
    readPem('tlsKey', tlsKey),
    readPem('tlsCa', tlsCa),
    tlsServerCert === undefined ? undefined : readPem('tlsServerCert', tlsServerCert),
  ])
  let cert: X509Certificate
  try {
    const first = certificates(certPem)[0]
    if (!first) throw new Error('no certificate in it')
    cert = first
  } catch (err) {
    throw refuse('tlsCert', `is not a PEM certificate: ${(err as Error).message}`)
  }
  let cas: X509Certificate[]
  try {
    cas = certificates(caPem)
    if (cas.length === 0) throw new Error('no certificate in it')
  } catch (err) {
    throw refuse('tlsCa', `is not a PEM certificate: ${(err as Error).message}`)
  }
  try {
    if (!cert.checkPrivateKey(createPrivateKey(keyPem))) {
      throw refuse('tlsKey', 'is not the key of --tls-cert')
    }
  } catch (err) {
    if (err instanceof ConfigError) throw err
    throw refuse('tlsKey', `is not a PEM private key: ${(err as Error).message}`)
  }
  if (!cas.some((ca) => cert.checkIssued(ca) && cert.verify(ca.publicKey))) {
    throw refuse('tlsCert', `was not issued by --tls-ca (its issuer: ${cert.issuer})`)
  }
  const expired = notValidAt(cert, now)
  if (expired) throw refuse('tlsCert', expired)
  const commonName = commonNameOf(cert)
  if (commonName !== config.systemId) {
    throw refuse(
      'tlsCert',
      `has CN ${commonName ?? '(none)'} but the chassis name (--system-id) is ` +
        `${config.systemId}: OVN reads the CN as the chassis, they must be equal`,
    )
  }
  const server = serverPem === undefined ? cert : serverCertificate(serverPem, cert, cas, now)
  return {
    files: { cert: tlsCert, key: tlsKey, ca: tlsCa },
    cert: certPem,
    key: keyPem,
    ca: caPem,
    serverCert: serverPem ?? certPem,
    // No extended key usage at all is good for any purpose.
    serves: server.keyUsage === undefined || server.keyUsage.includes(SERVER_AUTH),
    commonName,
  }
}

/**
 * `--tls-server-cert` parsed and checked: for the identity's key and CN, issued by the CA,
 * valid now. Throws `ConfigError` naming the option.
 */
function serverCertificate(
  pem: string,
  identity: X509Certificate,
  cas: readonly X509Certificate[],
  now: Date,
): X509Certificate {
  let cert: X509Certificate
  try {
    const first = certificates(pem)[0]
    if (!first) throw new Error('no certificate in it')
    cert = first
  } catch (err) {
    throw refuse('tlsServerCert', `is not a PEM certificate: ${(err as Error).message}`)
  }
  if (!cert.publicKey.equals(identity.publicKey)) {
    throw refuse('tlsServerCert', 'is not for the key of --tls-key')
  }
  if (cert.subject !== identity.subject) {
    throw refuse('tlsServerCert', `names ${cert.subject}, not ${identity.subject}`)
  }
  if (!cas.some((ca) => cert.checkIssued(ca) && cert.verify(ca.publicKey))) {
    throw refuse('tlsServerCert', `was not issued by --tls-ca (its issuer: ${cert.issuer})`)
  }
  const expired = notValidAt(cert, now)
  if (expired) throw refuse('tlsServerCert', expired)
  return cert
}

/**
 * The certificate this DPU presents to the Southbound it follows, kept in one file
 * (`<runDir>/sb-client.crt`) that ovn-controller and the agent's own Southbound checks
 * read: the DPU's identity, or — for a group's SB that admits only its own chassis — the
 * identity's key certified by that group's chassis CA, as `configure` hands it over. The
 * agent also keeps it in the OVS database (`SB_CERTIFICATE_KEY`), beside `ovn-remote`:
 * a restarted agent, or one whose run directory a reboot emptied, follows the same SB
 * with the same certificate.
 *
 * Beside it, the key it certifies (`<runDir>/sb-client.key`, 0600): ovn-controller reads
 * the key from there, not from `--tls-key`, so that a key renewed on disk (cert-manager
 * rotating it) never meets, at ovn-controller's next start, a certificate made for the
 * key before it. When the agent takes a renewed identity (`adopt`), a chassis
 * certificate for the earlier key stays in use, with that key, until `configure` brings
 * one for the new key.
 *
 * And the CA it trusts for that SB (`<runDir>/sb-ca.crt`, kept as `SB_CA_KEY`): the
 * group's own CA when `configure` names one (`group.sbCa`), so that only that group's SB,
 * and no other holder of a certificate from Hydrazine's CA, is taken for it; else the
 * identity's CA (`--tls-ca`).
 */
export class SouthboundCertificate {
  /**
   * The keys this DPU holds, PEM, the identity's first: the one before a renewal stays
   * while a certificate for it may still be presented.
   */
  private keys: string[]
  /** The CA trusted for the SB, PEM. */
  private caPem: string
  /** The key `pem` certifies, PEM: what `keyFile` holds. */
  private keyPem: string

  private constructor(
    private identity: AgentTls,
    readonly file: string,
    private pem: string,
    readonly caFile: string,
    readonly keyFile: string,
  ) {
    this.keys = [identity.key]
    this.caPem = identity.ca
    this.keyPem = identity.key
  }

  /**
   * Opens the file under `runDir` with the certificate to present: `kept` (what the OVS
   * database holds) when it is still this DPU's, else the file's when it is, else the
   * identity. Writes the files when they hold anything else. The key an earlier run
   * presented (`sb-client.key`) counts as this DPU's: it held it.
   */
  static async open(
    identity: AgentTls,
    runDir: string,
    kept?: string,
    keptCa?: string,
  ): Promise<SouthboundCertificate> {
    const file = join(runDir, 'sb-client.crt')
    const caFile = join(runDir, 'sb-ca.crt')
    const keyFile = join(runDir, 'sb-client.key')
    const [inFile, caInFile, keyInFile] = await Promise.all(
      [file, caFile, keyFile].map((f) => readFile(f, 'utf8').catch(() => undefined)),
    )
    const sb = new SouthboundCertificate(identity, file, identity.cert, caFile, keyFile)
    if (keyInFile !== undefined && keyInFile !== identity.key && parsesAsKey(keyInFile)) {
      sb.keys.push(keyInFile)
    }
    const usable = [kept, inFile].find((pem) => pem !== undefined && !sb.refusal(pem))
    await sb.write(usable ?? identity.cert, inFile, keyInFile)
    sb.caPem = [keptCa, caInFile].find((pem) => pem !== undefined && !caRefusal(pem)) ?? identity.ca
    if (caInFile !== sb.caPem) await writeFileAtomic(caFile, sb.caPem, { mode: 0o644 })
    return sb
  }

  /** The certificate in use, PEM. */
  get current(): string {
    return this.pem
  }

  /** The CA trusted for the SB, PEM. */
  get currentCa(): string {
    return this.caPem
  }

  /**
   * The `tls` option of an OVSDB connection to a Southbound: with `kept` (the certificate
   * last presented to that SB) while it is still this DPU's, else the current one, and
   * the key it certifies; trusting `keptCa` (the CA last trusted for that SB), else the
   * current one.
   */
  ovsdbTls(kept?: string, keptCa?: string): OvsdbTls {
    const keptKey = kept === undefined ? undefined : this.keyFor(kept)
    const ca = keptCa !== undefined && caRefusal(keptCa) === undefined ? keptCa : this.caPem
    if (kept !== undefined && keptKey !== undefined && this.refusal(kept) === undefined) {
      return { ca, cert: kept, key: keptKey }
    }
    return { ca, cert: this.pem, key: this.keyPem }
  }

  /**
   * Presents `pem` from now on (the identity when undefined) and trusts `ca` for the SB
   * (the identity's CA when undefined). Throws `SouthboundCertificateRefused` when `pem`
   * is not this DPU's certificate (another CN, a key it does not hold, not valid now) or
   * `ca` is no CA certificate, changing nothing. True when either changed.
   */
  async use(pem: string | undefined, ca?: string, now: Date = new Date()): Promise<boolean> {
    const next = pem ?? this.identity.cert
    const nextCa = ca ?? this.identity.ca
    const why = this.refusal(next, now) ?? caRefusal(nextCa)
    if (why !== undefined) throw new SouthboundCertificateRefused(this.identity.commonName, why)
    if (next === this.pem && nextCa === this.caPem) return false
    if (nextCa !== this.caPem) {
      await writeFileAtomic(this.caFile, nextCa, { mode: 0o644 })
      this.caPem = nextCa
    }
    if (next !== this.pem) await this.write(next, this.pem, this.keyPem)
    return true
  }

  /**
   * Takes a renewed identity (`loadAgentTls` checked it): its key is held from now on,
   * with the one before it and the one in use. Where the identity itself was presented,
   * or its CA trusted, the renewed one is from now on; a certificate the group's chassis
   * CA made for an earlier key stays, with that key, until `use` replaces it. True when
   * what ovn-controller reads changed.
   */
  async adopt(identity: AgentTls): Promise<boolean> {
    const before = this.identity
    if (identity.cert === before.cert && identity.key === before.key && identity.ca === before.ca) {
      return false
    }
    this.identity = identity
    // The one in use stays held too (an earlier run's, from `sb-client.key`, say).
    this.keys = [...new Set([identity.key, this.keyPem, before.key])]
    const pem = this.pem === before.cert ? identity.cert : this.pem
    const ca = this.caPem === before.ca ? identity.ca : this.caPem
    return this.use(pem, ca)
  }

  /** The held key `pem` certifies, PEM; undefined when it is no certificate or none. */
  private keyFor(pem: string): string | undefined {
    let cert: X509Certificate
    try {
      cert = new X509Certificate(pem)
    } catch {
      return undefined
    }
    return this.keys.find((key) => cert.checkPrivateKey(createPrivateKey(key)))
  }

  /** Why `pem` cannot stand for this DPU, or undefined when it can. */
  private refusal(pem: string, now: Date = new Date()): string | undefined {
    let cert: X509Certificate
    try {
      cert = new X509Certificate(pem)
    } catch (err) {
      return `is not a PEM certificate: ${(err as Error).message}`
    }
    const cn = commonNameOf(cert)
    if (cn !== this.identity.commonName) {
      return `names ${cn ?? '(no CN)'}, not this chassis ${this.identity.commonName}`
    }
    if (this.keyFor(pem) === undefined) {
      return "does not certify this DPU's key"
    }
    return notValidAt(cert, now)
  }

  /**
   * Presents `pem` (this DPU's: `refusal` passed) and its key. Each file whole or not at
   * all (lib/files): ovn-controller never reads half a certificate; the key first, so that
   * a certificate is never beside another key than its own once both are written. Writes
   * only the files whose content (`certInFile`, `keyInFile`) differs.
   */
  private async write(pem: string, certInFile?: string, keyInFile?: string): Promise<void> {
    const key = this.keyFor(pem) ?? this.identity.key
    if (keyInFile !== key) await writeFileAtomic(this.keyFile, key, { mode: 0o600 })
    if (certInFile !== pem) await writeFileAtomic(this.file, pem, { mode: 0o644 })
    this.pem = pem
    this.keyPem = key
  }
}

/** Whether `pem` is a private key Node can read. */
function parsesAsKey(pem: string): boolean {
  try {
    createPrivateKey(pem)
    return true
  } catch {
    return false
  }
}
