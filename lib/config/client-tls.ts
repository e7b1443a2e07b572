/**
 * The controller's client certificate for OVSDB servers it does not run: an external
 * shared central (`OVN_NB_DB` / `OVN_SB_DB`) or the centrals an operator names per group
 * (`HYDRAZINE_OVN_CENTRALS_FILE`). An `ssl:` OVSDB server asks every client for a
 * certificate of its CA, so the controller needs one for each `ssl:` remote it connects to:
 *
 * - `HYDRAZINE_OVN_CLIENT_CERT` / `HYDRAZINE_OVN_CLIENT_KEY`: the controller's certificate
 *   and its key (PEM files, read again on every reconnect, so a renewed pair is picked up);
 * - `HYDRAZINE_OVN_CA`: the CA the servers' certificates chain to;
 * - `HYDRAZINE_OVN_TLS_VERIFY_HOSTNAME` (default true): also check that the server's
 *   certificate names the host connected to; `false` for servers whose certificates carry
 *   no names (those `ovs-pki` makes; OVS itself checks the CA only).
 *
 * All three files or none; required when `OVN_NB_DB`, `OVN_SB_DB` or any remote of the
 * centrals file is `ssl:`; refused with centrals Hydrazine runs itself (their NB is a
 * unix socket, their SB the controller reaches on its own socket).
 */
import { createPrivateKey, type KeyObject, X509Certificate } from 'node:crypto'
import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import * as v from 'valibot'

const file = v.optional(v.pipe(v.string(), v.minLength(1)))

export const OvnClientTlsVariables = {
  HYDRAZINE_OVN_CLIENT_CERT: file,
  HYDRAZINE_OVN_CLIENT_KEY: file,
  HYDRAZINE_OVN_CA: file,
  HYDRAZINE_OVN_TLS_VERIFY_HOSTNAME: v.optional(
    v.picklist(['true', 'false'], 'must be true or false'),
  ),
}

/** A client certificate, its key and the servers' CA: absolute paths of PEM files. */
export interface ClientTlsFiles {
  readonly cert: string
  readonly key: string
  readonly ca: string
}

/** `ClientTlsFiles` for the OVSDB servers of centrals the operator runs. */
export interface OvnClientTls extends ClientTlsFiles {
  /** `HYDRAZINE_OVN_TLS_VERIFY_HOSTNAME`: check the server certificate's names too. */
  readonly verifyHostname: boolean
}

/** The variable naming each file. */
export type ClientTlsVariableNames = { readonly [K in keyof ClientTlsFiles]: string }

const OVN_CLIENT_FILES = {
  cert: 'HYDRAZINE_OVN_CLIENT_CERT',
  key: 'HYDRAZINE_OVN_CLIENT_KEY',
  ca: 'HYDRAZINE_OVN_CA',
} as const satisfies ClientTlsVariableNames

type Variables = {
  readonly [K in keyof typeof OvnClientTlsVariables]?: string | undefined
}

export type ClientTlsChoice =
  | { readonly ok: true; readonly tls?: OvnClientTls }
  | { readonly ok: false; readonly path: string; readonly message: string }

/**
 * The controller's OVSDB client TLS from its variables: `remotes` are the OVSDB remotes the
 * controller is configured to reach (external centrals' NB and SB), `operatorCentrals`
 * whether the centrals are the operator's (`shared` with `OVN_NB_DB`, or `external`), `mode`
 * names the central mode for messages. Files are checked (`checkClientTls`) by the caller.
 */
export function ovnClientTlsConfig(
  c: Variables,
  remotes: readonly string[],
  operatorCentrals: boolean,
  mode: string,
): ClientTlsChoice {
  const given = Object.values(OVN_CLIENT_FILES).filter((name) => c[name] !== undefined)
  const sslRemote = remotes.find((remote) => remote.startsWith('ssl:'))
  if (given.length === 0) {
    if (c.HYDRAZINE_OVN_TLS_VERIFY_HOSTNAME !== undefined) {
      return {
        ok: false,
        path: 'HYDRAZINE_OVN_TLS_VERIFY_HOSTNAME',
        message:
          'only with HYDRAZINE_OVN_CLIENT_CERT, HYDRAZINE_OVN_CLIENT_KEY and HYDRAZINE_OVN_CA',
      }
    }
    if (sslRemote === undefined) return { ok: true }
    return {
      ok: false,
      path: OVN_CLIENT_FILES.cert,
      message:
        `required to reach ${sslRemote}: an ssl: OVSDB server admits clients with a certificate ` +
        'of its CA (set HYDRAZINE_OVN_CLIENT_CERT, HYDRAZINE_OVN_CLIENT_KEY and HYDRAZINE_OVN_CA)',
    }
  }
  if (!operatorCentrals) {
    return {
      ok: false,
      path: given[0] ?? OVN_CLIENT_FILES.cert,
      message:
        `is for OVN centrals the operator runs (OVN_NB_DB, or HYDRAZINE_OVN_CENTRAL=external): ` +
        `not with ${mode}, whose centrals Hydrazine runs`,
    }
  }
  const missing = Object.values(OVN_CLIENT_FILES).find((name) => c[name] === undefined)
  if (missing !== undefined) {
    return {
      ok: false,
      path: missing,
      message: `required with ${given.join(', ')}: the certificate, its key and the servers' CA go together`,
    }
  }
  return {
    ok: true,
    tls: {
      cert: resolve(c.HYDRAZINE_OVN_CLIENT_CERT ?? ''),
      key: resolve(c.HYDRAZINE_OVN_CLIENT_KEY ?? ''),
      ca: resolve(c.HYDRAZINE_OVN_CA ?? ''),
      verifyHostname: c.HYDRAZINE_OVN_TLS_VERIFY_HOSTNAME !== 'false',
    },
  }
}

/** The variables of `HYDRAZINE_OVN_CLIENT_*` (for `checkClientTls`). */
export const ovnClientFiles: ClientTlsVariableNames = OVN_CLIENT_FILES

/**
 * Reads a client's TLS files: each a PEM of its kind, the key the certificate's. Undefined
 * when they are fine, else the variable (`names`) that is wrong and why. Done once at
 * start-up; connections read the files again on every reconnect.
 */
export function checkClientTls(
  tls: ClientTlsFiles,
  names: ClientTlsVariableNames,
): { path: string; message: string } | undefined {
  const parts: [keyof ClientTlsFiles, string, (pem: string) => unknown][] = [
    ['ca', 'a PEM certificate', (pem) => new X509Certificate(pem)],
    ['cert', 'a PEM certificate', (pem) => new X509Certificate(pem)],
    ['key', 'a PEM key', (pem) => createPrivateKey(pem)],
  ]
  const parsed = new Map<string, unknown>()
  for (const [part, what, parse] of parts) {
    const path = tls[part]
    let pem: string
    try {
      pem = readFileSync(path, 'utf8')
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code ?? 'error'
      return { path: names[part], message: `cannot read ${path}: ${code}` }
    }
    try {
      parsed.set(part, parse(pem))
    } catch {
      return { path: names[part], message: `${path} is not ${what}` }
    }
  }
  const cert = parsed.get('cert') as X509Certificate
  const key = parsed.get('key') as KeyObject
  if (!cert.checkPrivateKey(key)) {
    return { path: names.key, message: `${tls.key} is not the key of ${tls.cert}` }
  }
  return undefined
}

/** The controller's OVSDB client certificates: for `ssl:` NB remotes, and for `ssl:` SB ones. */
export interface ControllerOvsdbTls {
  readonly nb?: ClientTlsFiles & { readonly verifyHostname?: boolean }
  readonly sb?: ClientTlsFiles & { readonly verifyHostname?: boolean }
}

/**
 * Which client certificate the controller presents to which OVSDB server: the operator's
 * centrals' (`HYDRAZINE_OVN_CLIENT_*`) to their NBs and SBs; the Kubernetes-run centrals'
 * (`HYDRAZINE_K8S_NB_CLIENT_*`) to their NBs and to their SBs' controller port, which serve
 * the same certificate (the NB Secret: the central's own) and admit the same CA. At most
 * one of the two is configured (`ovnClientTlsConfig` refuses the former with Hydrazine's
 * own centrals).
 */
export function controllerOvsdbTls(config: {
  readonly ovnClientTls?: OvnClientTls | undefined
  readonly kubernetes?: { readonly nbClientTls?: ClientTlsFiles | undefined } | undefined
}): ControllerOvsdbTls {
  const tls = config.ovnClientTls ?? config.kubernetes?.nbClientTls
  return tls ? { nb: tls, sb: tls } : {}
}
