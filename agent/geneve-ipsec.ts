/**
 * IPsec on the DPU's Geneve tunnels, as OVS does it: when the group's central says
 * `NB_Global.ipsec`, ovn-controller names the remote chassis on every tunnel port
 * (`options:remote_name`), and `ovs-monitor-ipsec` (Debian's `openvswitch-ipsec`, run
 * beside `ovs-vswitchd` like it) negotiates one IPsec SA per tunnel with the certificate,
 * key and CA it finds in the `Open_vSwitch` row's `other_config` (`certificate`,
 * `private_key`, `ca_cert`): its own identity is the certificate's CN, and a peer is
 * taken only with a certificate from that CA whose CN is the chassis the tunnel names.
 * This module puts them there when `configure` asks (`group.geneveIpsec`).
 *
 * Which certificate: the one the DPU presents to its group's SB when it chains to the CA
 * the DPU trusts for that SB — the DPU's chassis certificate from the group's own chassis
 * CA (a per-group embedded central over TLS), so that only the group's DPUs of the moment
 * authenticate each other, and a DPU that left the group (its CA replaced) no longer
 * does; else the DPU's identity (CN = its chassis name) and Hydrazine's CA. Every DPU of a
 * group gets the same kind from the same central. The key is the identity's
 * (`--tls-key`); both certificates are for it.
 *
 * The files are named after their content (`cert-<sha256>.pem`, `ca-<sha256>.pem`): a
 * renewed certificate is a new path in `other_config`, which `ovs-monitor-ipsec` sees as a
 * change and loads; the files no longer named are removed.
 */
import { createHash, X509Certificate } from 'node:crypto'
import { mkdir, readdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { writeFileAtomic } from '../lib/files/index.ts'
import type { LocalOvs } from './ovs.ts'
import type { AgentTls } from './tls.ts'

/** The `Open_vSwitch` `other_config` keys `ovs-monitor-ipsec` reads its PKI from. */
export const IPSEC_PKI_KEYS = ['certificate', 'private_key', 'ca_cert'] as const

/** The certificate and CA (PEM) the DPU's IPsec authenticates with and trusts. */
export interface IpsecPki {
  readonly cert: string
  readonly ca: string
}

/**
 * The SB's certificate and CA when the certificate chains to that CA, else the identity's.
 *
 * @example ipsecPkiOf({ cert: chassisCert, ca: groupCa }, identity) // the group's
 */
export function ipsecPkiOf(southbound: IpsecPki, identity: IpsecPki): IpsecPki {
  return issuedBy(southbound.cert, southbound.ca) ? southbound : identity
}

function issuedBy(certPem: string, caPem: string): boolean {
  try {
    const cert = new X509Certificate(certPem)
    const blocks = caPem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g)
    return (blocks ?? []).some((block) => {
      const ca = new X509Certificate(block)
      return cert.checkIssued(ca) && cert.verify(ca.publicKey)
    })
  } catch {
    return false
  }
}

/** Points OVS's IPsec at the DPU's certificate, or takes it away. */
export class GeneveIpsec {
  /**
   * @param dir where the certificate and CA files go (`<runDir>/ipsec`)
   * @param identity the DPU's TLS identity (`loadAgentTls`)
   * @param keyFile `private_key`: the key of the certificate the SB is shown
   *   (`SouthboundCertificate.keyFile`, which a renewed identity's key reaches once that
   *   certificate is for it)
   */
  constructor(
    readonly dir: string,
    private readonly identity: AgentTls,
    readonly keyFile: string,
  ) {}

  /**
   * Writes the certificate and CA `ipsecPkiOf(southbound, identity)` picks and makes
   * `other_config` name them; true when `other_config` changed.
   */
  async use(ovs: LocalOvs, southbound: IpsecPki): Promise<boolean> {
    const pki = ipsecPkiOf(southbound, { cert: this.identity.cert, ca: this.identity.ca })
    await mkdir(this.dir, { recursive: true })
    const certFile = await this.write('cert', pki.cert)
    const caFile = await this.write('ca', pki.ca)
    const changed = await ovs.setOtherConfig({
      certificate: certFile,
      private_key: this.keyFile,
      ca_cert: caFile,
    })
    await this.removeFilesBut([certFile, caFile])
    return changed
  }

  /**
   * Takes the DPU's IPsec PKI out of `other_config`, when it is the one this module put
   * there (files under `dir`); true when it did.
   */
  async stop(ovs: LocalOvs): Promise<boolean> {
    const config = await ovs.otherConfig()
    if (!config.certificate?.startsWith(`${this.dir}/`)) return false
    const changed = await ovs.setOtherConfig({}, IPSEC_PKI_KEYS)
    await this.removeFilesBut([])
    return changed
  }

  /** True when `other_config` names this DPU's IPsec PKI (what `use` wrote). */
  async inUse(ovs: LocalOvs): Promise<boolean> {
    const config = await ovs.otherConfig()
    return (
      config.private_key === this.keyFile &&
      config.certificate?.startsWith(`${this.dir}/`) === true &&
      config.ca_cert?.startsWith(`${this.dir}/`) === true
    )
  }

  private async write(kind: 'cert' | 'ca', pem: string): Promise<string> {
    const digest = createHash('sha256').update(pem).digest('hex').slice(0, 16)
    const file = join(this.dir, `${kind}-${digest}.pem`)
    await writeFileAtomic(file, pem, { mode: 0o644 })
    return file
  }

  private async removeFilesBut(keep: readonly string[]): Promise<void> {
    const names = await readdir(this.dir).catch(() => [] as string[])
    for (const name of names) {
      const file = join(this.dir, name)
      if (/^(cert|ca)-[0-9a-f]{16}\.pem$/.test(name) && !keep.includes(file)) {
        await rm(file, { force: true })
      }
    }
  }
}
