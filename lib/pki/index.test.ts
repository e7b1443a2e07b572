import { X509Certificate } from 'node:crypto'
import { readFile, stat, writeFile } from 'node:fs/promises'
import type { AddressInfo } from 'node:net'
import { join } from 'node:path'
import { connect, createServer, type TLSSocket } from 'node:tls'
import t from 'tap'
import {
  CertificateRequestError,
  certificateAuthorityOf,
  newCertificateAuthority,
  openCertificateAuthority,
  PkiError,
} from './index.ts'

const mode = async (path: string) => (await stat(path)).mode & 0o777

t.test('the CA is created once, private, and loaded again afterwards', async (t) => {
  const dir = join(t.testdir({}), 'pki')
  const ca = await openCertificateAuthority(dir)
  t.equal(await mode(dir), 0o700, 'the directory is 0700')
  t.equal(await mode(join(dir, 'ca.key')), 0o600, 'ca.key is 0600')
  t.equal(ca.caFile, join(dir, 'ca.crt'))
  const cert = new X509Certificate(ca.caCert)
  t.ok(cert.ca, 'ca.crt is a CA certificate')
  t.ok(cert.checkIssued(cert), 'self-signed')
  t.match(cert.subject, /^CN=Hydrazine CA [0-9a-f]{8}$/)
  t.match(cert.publicKey.asymmetricKeyDetails, { namedCurve: 'prime256v1' }, 'ECDSA P-256')

  const again = await openCertificateAuthority(dir)
  t.equal(again.caCert, ca.caCert, 'reopening loads the same CA')
  const issued = await again.issueClient({ commonName: 'dpu-a' })
  t.ok(new X509Certificate(issued.cert).verify(cert.publicKey), 'and signs with the same key')
})

t.test('a client certificate carries the CN and verifies against the CA', async (t) => {
  const ca = await openCertificateAuthority(join(t.testdir({}), 'pki'))
  const issued = await ca.issueClient({ commonName: 'dpu-a', days: 30 })
  const cert = new X509Certificate(issued.cert)
  const caCert = new X509Certificate(ca.caCert)
  t.ok(cert.checkIssued(caCert), 'issued by the CA')
  t.equal(cert.issuer, caCert.subject)
  t.ok(cert.verify(caCert.publicKey), 'signature verifies with the CA key')
  t.equal(cert.subject, 'CN=dpu-a')
  t.notOk(cert.ca, 'not a CA')
  t.same(cert.keyUsage, ['1.3.6.1.5.5.7.3.2'], 'extended key usage: clientAuth only')
  t.equal(cert.subjectAltName, undefined, 'no SANs')
  const days = (Date.parse(cert.validTo) - Date.now()) / 86_400_000
  t.ok(days > 29 && days <= 30, `valid for 30 days (${days.toFixed(2)})`)
  t.ok(cert.checkPrivateKey((await import('node:crypto')).createPrivateKey(issued.key)))
})

t.test('a server certificate names its DNS and IP SANs', async (t) => {
  const ca = await openCertificateAuthority(join(t.testdir({}), 'pki'))
  const issued = await ca.issueServer({
    dnsNames: ['localhost'],
    ips: ['127.0.0.1', '100.64.0.1', '::1'],
  })
  const cert = new X509Certificate(issued.cert)
  t.equal(cert.subject, 'CN=localhost')
  t.same(cert.keyUsage, ['1.3.6.1.5.5.7.3.1'], 'extended key usage: serverAuth only')
  t.equal(
    cert.subjectAltName,
    'DNS:localhost, IP Address:127.0.0.1, IP Address:100.64.0.1, IP Address:0:0:0:0:0:0:0:1',
  )
  t.equal(cert.checkIP('100.64.0.1'), '100.64.0.1')
  t.equal(cert.checkIP('100.64.0.2'), undefined)
  t.equal(cert.checkHost('localhost'), 'localhost')
})

t.test("a cluster member's certificate: both ends of its peers' connections", async (t) => {
  const ca = await openCertificateAuthority(join(t.testdir({}), 'pki'))
  const issued = await ca.issuePeer({ dnsNames: ['*.ovn-a-peers.hydrazine.svc.cluster.local'] })
  const cert = new X509Certificate(issued.cert)
  t.equal(cert.subject, 'CN=*.ovn-a-peers.hydrazine.svc.cluster.local')
  t.same(
    cert.keyUsage,
    ['1.3.6.1.5.5.7.3.1', '1.3.6.1.5.5.7.3.2'],
    'extended key usage: serverAuth and clientAuth',
  )
  t.equal(cert.checkHost('ovn-a-1.ovn-a-peers.hydrazine.svc.cluster.local') !== undefined, true)
  t.ok(ca.issued(issued.cert), 'from this CA')
  await t.rejects(
    async () => ca.issuePeer({}),
    CertificateRequestError,
    'a peer certificate needs a name',
  )
})

t.test(
  'a server certificate works in a TLS handshake that wants client certificates',
  async (t) => {
    const ca = await openCertificateAuthority(join(t.testdir({}), 'pki'))
    const server = await ca.issueServer({ ips: ['127.0.0.1'] })
    const client = await ca.issueClient({ commonName: 'dpu-a' })
    const stranger = await (
      await openCertificateAuthority(join(t.testdir({}), 'other'))
    ).issueClient({ commonName: 'dpu-a' })

    const seen: { cn: string; authorized: boolean }[] = []
    const tlsServer = createServer(
      // Not rejecting here, so that the test sees how an unauthorized client was judged.
      {
        cert: server.cert,
        key: server.key,
        ca: ca.caCert,
        requestCert: true,
        rejectUnauthorized: false,
      },
      (socket: TLSSocket) => {
        const peer = socket.getPeerCertificate()
        seen.push({ cn: String(peer.subject?.CN), authorized: socket.authorized })
        socket.end('hello\n')
      },
    )
    await new Promise<void>((r) => tlsServer.listen(0, '127.0.0.1', r))
    t.teardown(() => tlsServer.close())
    const { port } = tlsServer.address() as AddressInfo

    const hello = (identity?: { cert: string; key: string }, trust = ca.caCert) =>
      new Promise<string>((resolve, reject) => {
        const socket = connect({ host: '127.0.0.1', port, ca: trust, ...identity }, () => {
          let data = ''
          socket.on('data', (c: Buffer) => {
            data += c.toString()
          })
          socket.on('end', () => resolve(data))
        })
        socket.on('error', reject)
      })

    t.equal(await hello(client), 'hello\n', 'the client trusts the server (IP SAN 127.0.0.1)')
    t.same(seen.at(-1), { cn: 'dpu-a', authorized: true }, 'the server sees CN=dpu-a, verified')
    await hello(stranger)
    t.same(seen.at(-1), { cn: 'dpu-a', authorized: false }, 'another CA’s client is not authorized')
    await t.rejects(
      hello(client, stranger.cert),
      /self-signed|unable to (get|verify)/i,
      'a client that trusts another CA refuses the server',
    )
  },
)

t.test('a DPU identity is a client only; its server certificate a server only', async (t) => {
  const ca = await openCertificateAuthority(join(t.testdir({}), 'pki'))
  const identity = await ca.issueIdentity({ commonName: 'dpu-a', ips: ['127.0.0.1'] })
  const client = new X509Certificate(identity.cert)
  const server = new X509Certificate(identity.serverCert)
  t.same(client.keyUsage, ['1.3.6.1.5.5.7.3.2'], 'the identity: clientAuth only')
  t.same(server.keyUsage, ['1.3.6.1.5.5.7.3.1'], 'its server certificate: serverAuth only')
  const { createPrivateKey } = await import('node:crypto')
  t.ok(server.checkPrivateKey(createPrivateKey(identity.key)), 'both for the one key')
  t.equal(server.subject, 'CN=dpu-a')
  t.ok(ca.issued(identity.cert) && ca.issued(identity.serverCert), 'both of this CA')

  // A server that presents the identity (a DPU posing as a Southbound, say) is refused by
  // a client that trusts the CA: OpenSSL checks the purpose of the server's certificate.
  const serve = async (cert: string) => {
    const tlsServer = createServer({ cert, key: identity.key }, (socket) => socket.end('hi\n'))
    await new Promise<void>((r) => tlsServer.listen(0, '127.0.0.1', r))
    t.teardown(() => tlsServer.close())
    const { port } = tlsServer.address() as AddressInfo
    return new Promise<string>((resolve, reject) => {
      const socket = connect({ host: '127.0.0.1', port, ca: ca.caCert }, () => {
        socket.once('data', (c: Buffer) => resolve(c.toString()))
      })
      socket.on('error', reject)
    })
  }
  await t.rejects(
    serve(identity.cert),
    { code: 'INVALID_PURPOSE', message: /unsuitable certificate purpose/ },
    'the identity cannot serve',
  )
  t.equal(await serve(identity.serverCert), 'hi\n', 'its server certificate can')
})

t.test('issued files: key 0600, cert beside it', async (t) => {
  const ca = await openCertificateAuthority(join(t.testdir({}), 'pki'))
  const files = await ca.writeIssued('redis', await ca.issueServer({ ips: ['127.0.0.1'] }))
  t.equal(await mode(files.keyFile), 0o600)
  t.equal(files.caFile, ca.caFile)
  t.match(await readFile(files.certFile, 'utf8'), /^-----BEGIN CERTIFICATE-----/)
  t.rejects(ca.writeIssued('../x', { cert: '', key: '' }), CertificateRequestError)
  t.rejects(ca.writeIssued('ca', { cert: '', key: '' }), CertificateRequestError)
})

const badRequests: [string, () => Promise<unknown>][] = [
  ['a bad IP', () => ca0.then((ca) => ca.issueServer({ ips: ['300.1.1.1'] }))],
  ['a bad DNS name', () => ca0.then((ca) => ca.issueServer({ dnsNames: ['a b'] }))],
  ['no name at all', () => ca0.then((ca) => ca.issueServer({}))],
  ['an empty CN', () => ca0.then((ca) => ca.issueClient({ commonName: '' }))],
  ['zero days', () => ca0.then((ca) => ca.issueClient({ commonName: 'x', days: 0 }))],
]
const ca0 = openCertificateAuthority(join(t.testdir({}), 'requests'))
for (const [name, request] of badRequests) {
  t.test(`a request with ${name} is refused`, async (t) => {
    await t.rejects(request(), CertificateRequestError)
  })
}

t.test('a CA whose key does not match its certificate is refused', async (t) => {
  const root = t.testdir({})
  const a = await openCertificateAuthority(join(root, 'a'))
  await openCertificateAuthority(join(root, 'b'))
  await writeFile(join(root, 'b', 'ca.crt'), a.caCert)
  await t.rejects(openCertificateAuthority(join(root, 'b')), PkiError)
  await writeFile(join(root, 'b', 'ca.key'), 'not a key')
  await t.rejects(openCertificateAuthority(join(root, 'b')), { code: 'PKI_INVALID' })
})

t.test("another CA certifies a holder's key: same CN and key, this CA's signature", async (t) => {
  const root = await openCertificateAuthority(join(t.testdir({}), 'root'))
  const group = await openCertificateAuthority(join(t.testdir({}), 'group'))
  const identity = await root.issueIdentity({ commonName: 'dpu-a', dnsNames: ['dpu-a'] })
  const pem = await group.certifyKeyOf(identity.cert, 30)
  const cert = new X509Certificate(pem)
  const { createPrivateKey } = await import('node:crypto')
  t.equal(cert.subject, 'CN=dpu-a', 'the holder’s CN')
  t.ok(cert.checkPrivateKey(createPrivateKey(identity.key)), 'the holder’s key: it keeps it')
  t.same(cert.keyUsage, ['1.3.6.1.5.5.7.3.2'], 'clientAuth only')
  t.ok(group.issued(pem), 'issued by the group CA')
  t.notOk(root.issued(pem), 'not by the root')
  t.ok(root.issued(identity.cert), 'the identity is the root’s')
  t.notOk(group.issued(identity.cert), 'and not the group’s')
  t.notOk(group.issued(pem, new Date(Date.now() + 31 * 86_400_000)), 'not once it expired')
  t.notOk(group.issued('not a certificate'), 'text is no certificate')
  await t.rejects(group.certifyKeyOf('junk'), CertificateRequestError)

  const shortLived = await root.issueIdentity({ commonName: 'dpu-b', days: 10 })
  const capped = new X509Certificate(await group.certifyKeyOf(shortLived.cert, 365))
  t.ok(
    Date.parse(capped.validTo) <= Date.parse(new X509Certificate(shortLived.cert).validTo),
    "never valid past the holder's own certificate",
  )
})

t.test('a CA kept as PEM text: made, opened, signing as one in a directory', async (t) => {
  const made = await newCertificateAuthority()
  const ca = await certificateAuthorityOf(made)
  t.equal(ca.caCert, made.cert)
  t.ok(new X509Certificate(made.cert).ca, 'a CA certificate')
  const server = await ca.issueServer({ dnsNames: ['ovn-a.hydrazine.svc.cluster.local'] })
  t.ok(ca.issued(server.cert), 'what it signs, it knows')
  const holder = await openCertificateAuthority(t.testdir())
  const identity = await holder.issueIdentity({ commonName: 'dpu-1' })
  const certified = await ca.certifyKeyOf(identity.cert, 1)
  t.ok(ca.issued(certified) && !holder.issued(certified), "its signature, not the holder's CA's")
  const other = await newCertificateAuthority()
  t.notOk((await certificateAuthorityOf(other)).issued(server.cert), 'another CA: not its own')
  await t.rejects(
    certificateAuthorityOf({ cert: made.cert, key: other.key }),
    PkiError,
    "a key that is not the certificate's is refused",
  )
  await t.rejects(certificateAuthorityOf({ cert: '', key: '' }), PkiError, 'and no PEM at all')
})
