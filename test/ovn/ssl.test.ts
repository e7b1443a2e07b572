/**
 * `ssl:` remotes: the OVSDB client over TLS against a real `ovsdb-server
 * --remote=pssl:…`, with certificates from lib/pki.
 */
import { execFile } from 'node:child_process'
import { readFile, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { OvsdbClient } from '../../lib/ovn/client.ts'
import { Database } from '../../lib/ovn/database.ts'
import { OvsdbConnectionError } from '../../lib/ovn/errors.ts'
import { type NbTables, nbSchema } from '../../lib/ovn/schema/nb.generated.ts'
import { openCertificateAuthority } from '../../lib/pki/index.ts'
import { type Teardown, tempDir } from '../helpers/stack.ts'
import { startOvsdb } from './ovsdb-fixture.ts'

const nb = new Database<NbTables>(nbSchema)

/** A CA, an ovsdb-server on pssl: with its server certificate, and a client's files. */
async function sslServer(t: Teardown, serverIps = ['127.0.0.1']) {
  const dir = await tempDir(t, 'hz-ssl-')
  const ca = await openCertificateAuthority(join(dir, 'pki'))
  const serverFiles = await ca.writeIssued('server', await ca.issueServer({ ips: serverIps }))
  const client = await ca.writeIssued('client', await ca.issueClient({ commonName: 'hydrazine' }))
  const server = await startOvsdb(t, undefined, { ssl: serverFiles })
  if (!server.ssl) throw new Error('fixture without ssl')
  return {
    dir,
    server,
    remote: server.ssl,
    tls: { ca: client.caFile, cert: client.certFile, key: client.keyFile },
  }
}

t.test('transact and monitor over ssl:, and reconnect after a restart', async (t) => {
  const { server, remote, tls } = await sslServer(t)
  const client = await OvsdbClient.connect(remote, {
    tls,
    backoff: { initialMs: 50, maxMs: 200 },
  })
  t.teardown(() => client.close())
  t.ok((await client.listDbs()).includes(nb.name), 'lists OVN_Northbound over TLS')
  const seen: string[] = []
  await client.monitor(nb.name, { Logical_Switch: { columns: ['name'] } }, (updates) => {
    for (const row of Object.values(updates.Logical_Switch ?? {})) {
      const name = (row.new as { name?: string } | undefined)?.name
      if (name) seen.push(name)
    }
  })
  await client.transact(nb.name, [nb.insert('Logical_Switch', { name: 'ls-tls' })])
  await t.resolves(
    waitFor(() => seen.includes('ls-tls')),
    'the monitor saw the insert',
  )

  await server.restart()
  await client.transact(nb.name, [nb.insert('Logical_Switch', { name: 'after-restart' })])
  t.ok(client.connected, 'reconnected over TLS after the server restarted')
  await t.resolves(
    waitFor(() => seen.includes('after-restart')),
    'and the monitor came back',
  )
})

t.test('PEM text works as well as paths', async (t) => {
  const { remote, tls } = await sslServer(t)
  const pem = {
    ca: await readFile(tls.ca, 'utf8'),
    cert: await readFile(tls.cert, 'utf8'),
    key: await readFile(tls.key, 'utf8'),
  }
  const client = await OvsdbClient.connect(remote, { tls: pem })
  t.teardown(() => client.close())
  t.ok((await client.listDbs()).includes(nb.name))
})

t.test('refused: a client of another CA, a server of another name, no certificates', async (t) => {
  const { remote, tls, dir } = await sslServer(t)
  const other = await openCertificateAuthority(join(dir, 'other'))
  const stranger = await other.writeIssued(
    'stranger',
    await other.issueClient({ commonName: 'hydrazine' }),
  )
  const quick = { connectTimeoutMs: 300, backoff: { initialMs: 50, maxMs: 100 } }

  // In TLS 1.3 the client's handshake is done before the server has judged its
  // certificate: the refusal shows as a connection that drops before any answer.
  const strangerAsks = async () => {
    const client = await OvsdbClient.connect(remote, {
      ...quick,
      reconnect: false,
      tls: { ca: tls.ca, cert: stranger.certFile, key: stranger.keyFile },
    })
    try {
      return await client.listDbs()
    } finally {
      await client.close()
    }
  }
  await t.rejects(
    strangerAsks(),
    OvsdbConnectionError,
    'the server refuses a certificate it did not issue',
  )
  await t.rejects(
    OvsdbClient.connect(remote, { ...quick, tls: { ...tls, ca: stranger.caFile } }),
    { code: 'OVSDB_CONNECTION', cause: { code: /SELF_SIGNED|UNABLE_TO|CERT/ } },
    'the client refuses a server its CA did not sign',
  )
  await t.rejects(
    OvsdbClient.connect(remote, { ...quick }),
    /an ssl: remote needs tls: \{ ca, cert, key \}/,
    'an ssl: remote without certificates fails at once',
  )
  await t.rejects(
    OvsdbClient.connect(remote, { ...quick, tls: { ...tls, key: join(dir, 'missing.key') } }),
    { cause: { message: /cannot read the TLS private key .*missing\.key/ } },
    'a missing file is named',
  )
})

t.test('the server certificate must name the address connected to', async (t) => {
  const { remote, tls } = await sslServer(t, ['127.0.0.2'])
  const quick = { connectTimeoutMs: 300, backoff: { initialMs: 50, maxMs: 100 } }
  await t.rejects(
    OvsdbClient.connect(remote, { ...quick, tls }),
    { cause: { code: 'ERR_TLS_CERT_ALTNAME_INVALID' } },
    'a certificate for 127.0.0.2 does not do for 127.0.0.1',
  )
  const lax = await OvsdbClient.connect(remote, {
    ...quick,
    tls: { ...tls, verifyHostname: false },
  })
  t.teardown(() => lax.close())
  t.ok((await lax.listDbs()).includes(nb.name), 'unless hostname checks are off (as OVS does)')
})

t.test("OVS's own client refuses a server that presents a DPU's identity", async (t) => {
  // What ovn-controller does when it reaches a Southbound: a DPU in a man-in-the-middle
  // position, presenting its identity (a certificate of the same CA), cannot pose as one.
  const dir = await tempDir(t, 'hz-ssl-')
  const ca = await openCertificateAuthority(join(dir, 'pki'))
  const identity = await ca.issueIdentity({ commonName: 'dpu-a', ips: ['127.0.0.1'] })
  const client = await ca.writeIssued('client', await ca.issueClient({ commonName: 'dpu-b' }))
  const listDbs = (remote: string) =>
    promisify(execFile)('ovsdb-client', [
      `--private-key=${client.keyFile}`,
      `--certificate=${client.certFile}`,
      `--ca-cert=${client.caFile}`,
      '--timeout=5',
      'list-dbs',
      remote,
    ])
  const posing = await startOvsdb(t, undefined, {
    ssl: await ca.writeIssued('posing', identity),
  })
  await t.rejects(listDbs(posing.ssl ?? ''), 'the identity: refused')
  const serving = await startOvsdb(t, undefined, {
    ssl: await ca.writeIssued('serving', { cert: identity.serverCert, key: identity.key }),
  })
  t.match(
    (await listDbs(serving.ssl ?? '')).stdout,
    /OVN_Northbound/,
    'a server certificate: taken',
  )
})

async function waitFor(check: () => boolean, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out')
    await new Promise((r) => setTimeout(r, 20))
  }
}

t.test("OVS's TLS takes a chassis certificate for an operator's RSA or Ed25519 key", async (t) => {
  // An operator's CA (cert-manager's RSA 2048 by default) gives a DPU its key; a group's
  // chassis CA (P-256) certifies that key as it is, and the group's SB must admit it.
  const dir = await tempDir(t, 'hz-ssl-')
  const group = await openCertificateAuthority(join(dir, 'group-ca'))
  const sb = await startOvsdb(t, undefined, {
    ssl: await group.writeIssued('sb', await group.issueServer({ ips: ['127.0.0.1'] })),
  })
  for (const [what, newkey] of [
    ['RSA 2048', 'rsa:2048'],
    ['Ed25519', 'ed25519'],
  ] as const) {
    const key = join(dir, `${newkey}.key`)
    const identity = join(dir, `${newkey}.crt`)
    await promisify(execFile)('openssl', [
      ...['req', '-x509', '-newkey', newkey, '-nodes', '-subj', '/CN=dpu-op', '-days', '1'],
      ...['-keyout', key, '-out', identity],
    ])
    const chassis = join(dir, `${newkey}-chassis.crt`)
    await writeFile(chassis, await group.certifyKeyOf(await readFile(identity, 'utf8'), 1))
    const { stdout } = await promisify(execFile)('ovsdb-client', [
      ...[`--private-key=${key}`, `--certificate=${chassis}`, `--ca-cert=${group.caFile}`],
      ...['--timeout=5', 'list-dbs', sb.ssl ?? ''],
    ])
    t.match(stdout, /OVN_Northbound/, `${what}: admitted by the group's SB`)
  }
})
