/**
 * A renewed identity taken while the agent runs. Certificates are renewed on disk (the
 * operator issuing credentials again, cert-manager rotating a Secret the kubelet then
 * updates, often with a new key): the agent reads its `--tls-*` files again every
 * `--tls-reload-ms` and, once they agree again (`loadAgentTls`: the certificate for the key,
 * issued by the CA, valid now, this chassis), hands the new identity to whoever presents
 * it. Files caught half-written keep the identity in use, saying why once.
 */
import { X509Certificate } from 'node:crypto'
import type * as grpc from '@grpc/grpc-js'
import { ConfigError } from '../lib/errors.ts'
import type { AgentConfig } from './config.ts'
import { type AgentTls, loadAgentTls } from './tls.ts'

type Identity = grpc.experimental.IdentityCertificateUpdate
type IdentityListener = grpc.experimental.IdentityCertificateUpdateListener
type CaListener = grpc.experimental.CaCertificateUpdateListener

/**
 * The gRPC server's certificates (grpc-js's `CertificateProvider`): the identity's server
 * certificate and key, and the CA its clients' certificates must come from. `use` gives
 * every listener, and so the listening server, a renewed identity: connections made from
 * then on are served with it.
 */
export class ServingCertificates implements grpc.experimental.CertificateProvider {
  private identity: Identity
  private ca: Buffer
  private readonly identityListeners = new Set<IdentityListener>()
  private readonly caListeners = new Set<CaListener>()

  constructor(tls: AgentTls) {
    this.identity = servingIdentity(tls)
    this.ca = Buffer.from(tls.ca)
  }

  use(tls: AgentTls): void {
    this.identity = servingIdentity(tls)
    this.ca = Buffer.from(tls.ca)
    for (const listener of this.identityListeners) listener(this.identity)
    for (const listener of this.caListeners) listener({ caCertificate: this.ca })
  }

  // A new listener hears the current certificates once the caller is done adding it:
  // grpc-js's server starts watching for updates only after it added its listeners.
  addCaCertificateListener(listener: CaListener): void {
    this.caListeners.add(listener)
    queueMicrotask(() => {
      if (this.caListeners.has(listener)) listener({ caCertificate: this.ca })
    })
  }

  removeCaCertificateListener(listener: CaListener): void {
    this.caListeners.delete(listener)
  }

  addIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.add(listener)
    queueMicrotask(() => {
      if (this.identityListeners.has(listener)) listener(this.identity)
    })
  }

  removeIdentityCertificateListener(listener: IdentityListener): void {
    this.identityListeners.delete(listener)
  }
}

function servingIdentity(tls: AgentTls): Identity {
  return { certificate: Buffer.from(tls.serverCert), privateKey: Buffer.from(tls.key) }
}

/** Whether two identities are the same files' contents. */
function sameIdentity(a: AgentTls, b: AgentTls): boolean {
  return a.cert === b.cert && a.key === b.key && a.ca === b.ca && a.serverCert === b.serverCert
}

/**
 * Reads the identity's files every `config.tlsReloadMs` and calls `renewed` with each
 * identity that differs from the one in use and passes `loadAgentTls`'s checks; the next
 * read waits for it. A read that fails the checks (a certificate already replaced, its key
 * not yet) keeps the identity in use and is logged once per reason. Returns the stop.
 *
 * @example
 * const stop = watchIdentity(config, tls, (next) => serving.use(next), log)
 */
export function watchIdentity(
  config: Pick<
    AgentConfig,
    'tlsCert' | 'tlsKey' | 'tlsCa' | 'tlsServerCert' | 'systemId' | 'tlsReloadMs'
  >,
  current: AgentTls,
  renewed: (next: AgentTls) => Promise<void>,
  log: (line: string) => void,
): () => void {
  let inUse = current
  let lastRefusal = ''
  let timer: NodeJS.Timeout | undefined
  let stopped = false
  const check = async () => {
    try {
      const next = await loadAgentTls(config)
      if (!next || sameIdentity(next, inUse)) return
      await renewed(next)
      inUse = next
      lastRefusal = ''
      log(`TLS identity renewed: ${describe(next)}`)
    } catch (err) {
      const why = err instanceof ConfigError ? err.message : `not taken: ${String(err)}`
      if (why !== lastRefusal) log(`TLS identity on disk not taken, the one in use kept: ${why}`)
      lastRefusal = why
    }
  }
  const schedule = () => {
    if (stopped) return
    timer = setTimeout(() => void check().finally(schedule), config.tlsReloadMs)
    timer.unref()
  }
  schedule()
  return () => {
    stopped = true
    clearTimeout(timer)
  }
}

/** What the log says of an identity: its CN, serial and end of validity, never the key. */
function describe(tls: AgentTls): string {
  const cert = new X509Certificate(tls.cert)
  return `CN=${tls.commonName}, serial ${cert.serialNumber}, valid to ${cert.validTo}`
}
