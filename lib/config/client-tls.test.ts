import { writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import t from 'tap'
import { ConfigError } from '../errors.ts'
import { openCertificateAuthority } from '../pki/index.ts'
import { controllerOvsdbTls } from './client-tls.ts'
import { loadConfig } from './index.ts'

/** The variable and message `loadConfig` refuses `env` with. */
function refusal(env: Record<string, string>): { path: string; message: string } | undefined {
  try {
    loadConfig(env)
    return undefined
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error
    const [issue] = error.issues ?? []
    return issue ? { path: issue.path, message: issue.message } : undefined
  }
}

t.test("the controller's client certificate for the operator's ssl: centrals", async (t) => {
  const dir = t.testdir({})
  const ca = await openCertificateAuthority(join(dir, 'pki'))
  const client = await ca.writeIssued(
    'controller',
    await ca.issueClient({ commonName: 'hydrazine-controller' }),
  )
  const other = await ca.writeIssued('other', await ca.issueClient({ commonName: 'other' }))
  const notPem = join(dir, 'not.pem')
  await writeFile(notPem, 'hello')
  const files = {
    HYDRAZINE_OVN_CLIENT_CERT: client.certFile,
    HYDRAZINE_OVN_CLIENT_KEY: client.keyFile,
    HYDRAZINE_OVN_CA: ca.caFile,
  }
  const sslShared = { OVN_NB_DB: 'ssl:10.0.0.5:6641', OVN_SB_DB: 'ssl:10.0.0.5:6642' }

  t.same(
    loadConfig({ ...sslShared, ...files }).ovnClientTls,
    { cert: client.certFile, key: client.keyFile, ca: ca.caFile, verifyHostname: true },
    'an external shared central over ssl: with the three files',
  )
  const operatorTls = {
    cert: client.certFile,
    key: client.keyFile,
    ca: ca.caFile,
    verifyHostname: true,
  }
  t.same(
    controllerOvsdbTls(loadConfig({ ...sslShared, ...files })),
    { nb: operatorTls, sb: operatorTls },
    "the controller presents it to the operator's NBs and SBs",
  )
  t.equal(
    loadConfig({ ...sslShared, ...files, HYDRAZINE_OVN_TLS_VERIFY_HOSTNAME: 'false' }).ovnClientTls
      ?.verifyHostname,
    false,
    'names not checked, for certificates made by ovs-pki',
  )
  t.equal(
    loadConfig({ OVN_NB_DB: 'tcp:10.0.0.5:6641', OVN_SB_DB: 'tcp:10.0.0.5:6642' }).ovnClientTls,
    undefined,
    'plaintext remotes need none',
  )

  t.match(
    refusal(sslShared),
    {
      path: 'HYDRAZINE_OVN_CLIENT_CERT',
      message: /required to reach ssl:10\.0\.0\.5:6641: an ssl: OVSDB server admits clients/,
    },
    'an ssl: remote without a certificate is refused at start, not at the first connection',
  )
  t.match(
    refusal({ OVN_NB_DB: 'tcp:10.0.0.5:6641', OVN_SB_DB: 'ssl:10.0.0.5:6642' }),
    { path: 'HYDRAZINE_OVN_CLIENT_CERT', message: /ssl:10\.0\.0\.5:6642/ },
    'the SB alone over ssl: needs it too (the controller follows the SB)',
  )
  const { HYDRAZINE_OVN_CA: _ca, ...withoutCa } = files
  t.match(
    refusal({ ...sslShared, ...withoutCa }),
    { path: 'HYDRAZINE_OVN_CA', message: /go together/ },
    'a missing piece is named',
  )
  t.match(
    refusal({ ...sslShared, ...files, HYDRAZINE_OVN_CLIENT_KEY: other.keyFile }),
    { path: 'HYDRAZINE_OVN_CLIENT_KEY', message: /is not the key of/ },
    "another certificate's key",
  )
  t.match(refusal({ ...sslShared, ...files, HYDRAZINE_OVN_CA: notPem }), {
    path: 'HYDRAZINE_OVN_CA',
    message: /is not a PEM certificate/,
  })
  t.match(
    refusal({ ...sslShared, ...files, HYDRAZINE_OVN_CLIENT_CERT: join(dir, 'missing.crt') }),
    { path: 'HYDRAZINE_OVN_CLIENT_CERT', message: /cannot read .*ENOENT/ },
  )
  t.match(
    refusal({ ...files }),
    { path: 'HYDRAZINE_OVN_CLIENT_CERT', message: /not with an embedded shared central|per-group/ },
    "refused with the centrals Hydrazine runs: they take no operator's certificate",
  )
  t.match(refusal({ ...sslShared, HYDRAZINE_OVN_TLS_VERIFY_HOSTNAME: 'false' }), {
    path: 'HYDRAZINE_OVN_TLS_VERIFY_HOSTNAME',
    message: /only with/,
  })
  t.match(refusal({ ...sslShared, ...files, HYDRAZINE_OVN_TLS_VERIFY_HOSTNAME: 'no' }), {
    path: 'HYDRAZINE_OVN_TLS_VERIFY_HOSTNAME',
    message: 'must be true or false',
  })

  // The centrals file: every ssl: remote the controller reaches asks for the certificate.
  const centralsFile = join(dir, 'centrals.json')
  await writeFile(
    centralsFile,
    JSON.stringify({
      'tenant-a': {
        nb: 'unix:/run/a/nb.sock',
        sb: 'ssl:10.0.0.5:6642',
        sbController: 'unix:/run/a/sb.sock',
      },
      'tenant-b': { nb: 'ssl:10.0.0.6:6641', sb: 'ssl:10.0.0.6:6642' },
    }),
  )
  const external = { HYDRAZINE_OVN_CENTRAL: 'external', HYDRAZINE_OVN_CENTRALS_FILE: centralsFile }
  t.match(
    refusal(external),
    { path: 'HYDRAZINE_OVN_CLIENT_CERT', message: /ssl:10\.0\.0\.6:6641/ },
    "a group's ssl: NB in the centrals file",
  )
  t.ok(loadConfig({ ...external, ...files }).ovnClientTls, 'given: accepted')
  await writeFile(
    centralsFile,
    JSON.stringify({
      'tenant-a': {
        nb: 'unix:/run/a/nb.sock',
        sb: 'ssl:10.0.0.5:6642',
        sbController: 'unix:/run/a/sb.sock',
      },
    }),
  )
  t.equal(
    loadConfig(external).ovnClientTls,
    undefined,
    'an ssl: SB only the DPUs reach (the controller follows its unix socket) needs none',
  )
})
