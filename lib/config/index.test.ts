import { writeFile } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import t from 'tap'
import { ConfigError } from '../errors.ts'
import { controllerOvsdbTls } from './client-tls.ts'
import { loadConfig } from './index.ts'
import { inClusterNamespace } from './kubernetes.ts'

t.test('defaults: everything embedded', async (t) => {
  const config = loadConfig({})
  t.same(config.http, { host: '127.0.0.1', port: 8080 })
  t.equal(config.dataDir, resolve('.hydrazine'))
  t.equal(config.redisUrl, undefined)
  t.equal(config.ovn, undefined)
  t.equal(config.ovnCentral, 'per-group', 'one embedded OVN central per group')
  t.same(config.bgp, { asn: 65000, routerId: '127.0.0.1', peers: [] })
  t.equal(config.logLevel, 'info')
  t.equal(config.grpcPort, 8081)
  t.equal(config.embeddedListen, '127.0.0.1')
  t.same(config.fabric, { dummyIp: '172.18.0.254/24', physicalNetwork: 'physnet' })
  t.equal(config.tokensFile, undefined)
  t.equal(config.producersFile, undefined, 'no producers')
  t.equal(config.webhookSecret, undefined)
})

t.test('fabric, gRPC and paths from env; an empty variable is unset', async (t) => {
  const config = loadConfig({
    HYDRAZINE_FABRIC_DUMMY_IP: '10.99.0.254/16',
    HYDRAZINE_FABRIC_GATEWAY: '10.99.0.1',
    HYDRAZINE_FABRIC_DUMMY_IP6: 'fd00:fab::fa/64',
    HYDRAZINE_FABRIC_GATEWAY6: 'fd00:fab::1',
    HYDRAZINE_PHYSICAL_NETWORK: 'fabric_1',
    HYDRAZINE_GRPC_PORT: '0',
    HYDRAZINE_FRR_VTY_DIR: 'run/frr',
    HYDRAZINE_TOKENS_FILE: 'tokens.json',
    HYDRAZINE_PRODUCERS_FILE: 'producers.json',
    REDIS_URL: '',
  })
  t.same(config.fabric, {
    dummyIp: '10.99.0.254/16',
    gateway: '10.99.0.1',
    dummyIp6: 'fd00:fab::fa/64',
    gateway6: 'fd00:fab::1',
    physicalNetwork: 'fabric_1',
  })
  t.equal(config.grpcPort, 0, 'gRPC off')
  t.equal(config.frrVtyDir, resolve('run/frr'), 'paths are made absolute')
  t.equal(config.tokensFile, resolve('tokens.json'))
  t.equal(config.producersFile, resolve('producers.json'))
  t.equal(config.redisUrl, undefined, 'empty REDIS_URL: embedded Redis')
  t.equal(config.dpuRedisMaxBytes, 64 * 1024 * 1024, "a DPU may hold 64 MB in the agents' Redis")
  t.equal(loadConfig({ HYDRAZINE_DPU_REDIS_MAX_MB: '0' }).dpuRedisMaxBytes, 0, '0: not measured')
  t.equal(config.producerRedisMaxBytes, 64 * 1024 * 1024, 'a queue producer, 64 MB too')
  t.equal(
    loadConfig({ HYDRAZINE_PRODUCER_REDIS_MAX_MB: '8' }).producerRedisMaxBytes,
    8 * 1024 * 1024,
  )
  t.throws(
    () => loadConfig({ HYDRAZINE_PRODUCER_REDIS_MAX_MB: '-1' }),
    /HYDRAZINE_PRODUCER_REDIS_MAX_MB: must be a number of megabytes/,
  )
  t.throws(
    () => loadConfig({ HYDRAZINE_DPU_REDIS_MAX_MB: '1e3' }),
    /HYDRAZINE_DPU_REDIS_MAX_MB: must be a number of megabytes/,
  )
})

t.test('attaches park while their commit waits, unless told not to', async (t) => {
  t.equal(loadConfig({}).parkForCommit, true, 'on by default')
  t.equal(loadConfig({ HYDRAZINE_PARK_FOR_COMMIT: 'false' }).parkForCommit, false)
  t.equal(loadConfig({ HYDRAZINE_PARK_FOR_COMMIT: 'true' }).parkForCommit, true)
  t.throws(
    () => loadConfig({ HYDRAZINE_PARK_FOR_COMMIT: 'no' }),
    /HYDRAZINE_PARK_FOR_COMMIT: must be true or false/,
  )
})

t.test('external services and BGP peers from env', async (t) => {
  const config = loadConfig({
    REDIS_URL: 'redis://10.0.0.5:6379/2',
    OVN_NB_DB: 'tcp:10.0.0.6:6641',
    OVN_SB_DB: 'tcp:[fd00::6]:6642',
    HYDRAZINE_BGP_PEERS: '172.18.0.1:65001, [fd00::1]:65002',
    HYDRAZINE_HTTP_PORT: '9090',
  })
  t.equal(config.redisUrl, 'redis://10.0.0.5:6379/2')
  t.same(config.ovn, { nb: 'tcp:10.0.0.6:6641', sb: 'tcp:[fd00::6]:6642' })
  t.equal(config.ovnCentral, 'shared', 'an external central is shared by every group')
  t.same(config.bgp.peers, [
    { address: '172.18.0.1', remoteAs: 65001 },
    { address: 'fd00::1', remoteAs: 65002 },
  ])
  t.equal(config.http.port, 9090)
})

const bad: [string, Record<string, string>, RegExp][] = [
  [
    'port not a number',
    { HYDRAZINE_HTTP_PORT: 'http' },
    /HYDRAZINE_HTTP_PORT: must be a port number/,
  ],
  ['port out of range', { HYDRAZINE_HTTP_PORT: '70000' }, /HYDRAZINE_HTTP_PORT: must be 1..65535/],
  ['redis url scheme', { REDIS_URL: 'http://x' }, /REDIS_URL: must be a redis:\/\//],
  [
    'nb remote',
    { OVN_NB_DB: 'nb.sock', OVN_SB_DB: 'unix:/sb' },
    /OVN_NB_DB: must be an OVSDB remote/,
  ],
  ['nb without sb', { OVN_NB_DB: 'unix:/nb.sock' }, /OVN_SB_DB: required/],
  [
    'central mode',
    { HYDRAZINE_OVN_CENTRAL: 'each' },
    /HYDRAZINE_OVN_CENTRAL: must be shared, per-group, external or kubernetes/,
  ],
  [
    'per-group with an external central',
    { OVN_NB_DB: 'unix:/nb.sock', OVN_SB_DB: 'unix:/sb.sock', HYDRAZINE_OVN_CENTRAL: 'per-group' },
    /HYDRAZINE_OVN_CENTRAL: per-group centrals are embedded/,
  ],
  ['router id', { HYDRAZINE_BGP_ROUTER_ID: 'fd00::1' }, /HYDRAZINE_BGP_ROUTER_ID: must be an IPv4/],
  ['asn', { HYDRAZINE_BGP_ASN: '0' }, /HYDRAZINE_BGP_ASN: must be 1..4294967295/],
  [
    'peer',
    { HYDRAZINE_BGP_PEERS: '172.18.0.1' },
    /HYDRAZINE_BGP_PEERS: each peer must be address:asn/,
  ],
  ['log level', { LOG_LEVEL: 'loud' }, /LOG_LEVEL: must be one of/],
  [
    'short secret',
    { HYDRAZINE_WEBHOOK_SECRET: 'abc' },
    /HYDRAZINE_WEBHOOK_SECRET: must be at least 32/,
  ],
  [
    'listen',
    { HYDRAZINE_EMBEDDED_LISTEN: 'everywhere' },
    /HYDRAZINE_EMBEDDED_LISTEN: must be an IP address/,
  ],
  [
    'gRPC port out of range',
    { HYDRAZINE_GRPC_PORT: '65536' },
    /HYDRAZINE_GRPC_PORT: must be 0..65535/,
  ],
  [
    'peer AS out of range',
    { HYDRAZINE_BGP_PEERS: '172.18.0.1:4294967296' },
    /HYDRAZINE_BGP_PEERS: peer AS must be 1..4294967295/,
  ],
  [
    'dummy IP without prefix',
    { HYDRAZINE_FABRIC_DUMMY_IP: '172.18.0.254' },
    /HYDRAZINE_FABRIC_DUMMY_IP: must be an IPv4 address with prefix/,
  ],
  [
    'dummy IP prefix too long',
    { HYDRAZINE_FABRIC_DUMMY_IP: '172.18.0.254/33' },
    /HYDRAZINE_FABRIC_DUMMY_IP: must be an IPv4 address with prefix/,
  ],
  [
    'dummy IP not an address',
    { HYDRAZINE_FABRIC_DUMMY_IP: '300.18.0.254/24' },
    /HYDRAZINE_FABRIC_DUMMY_IP: must be an IPv4 address with prefix/,
  ],
  [
    'fabric gateway IPv6',
    { HYDRAZINE_FABRIC_GATEWAY: 'fd00::1' },
    /HYDRAZINE_FABRIC_GATEWAY: must be an IPv4 address/,
  ],
  [
    'IPv6 dummy IP without prefix',
    { HYDRAZINE_FABRIC_DUMMY_IP6: 'fd00:fab::fa' },
    /HYDRAZINE_FABRIC_DUMMY_IP6: must be an IPv6 address with prefix/,
  ],
  [
    'IPv6 dummy IP that is IPv4',
    { HYDRAZINE_FABRIC_DUMMY_IP6: '172.18.0.254/24' },
    /HYDRAZINE_FABRIC_DUMMY_IP6: must be an IPv6 address with prefix/,
  ],
  [
    'IPv6 fabric gateway that is IPv4',
    { HYDRAZINE_FABRIC_DUMMY_IP6: 'fd00:fab::fa/64', HYDRAZINE_FABRIC_GATEWAY6: '10.0.0.1' },
    /HYDRAZINE_FABRIC_GATEWAY6: must be an IPv6 address/,
  ],
  [
    'IPv6 fabric gateway without the IPv6 dummy IP',
    { HYDRAZINE_FABRIC_GATEWAY6: 'fd00:fab::1' },
    /HYDRAZINE_FABRIC_GATEWAY6: needs HYDRAZINE_FABRIC_DUMMY_IP6/,
  ],
  [
    'physical network name',
    { HYDRAZINE_PHYSICAL_NETWORK: 'phys net' },
    /HYDRAZINE_PHYSICAL_NETWORK: must be a bridge-mapping name/,
  ],
]
for (const [name, env, message] of bad) {
  t.test(`bad config is refused, naming the variable: ${name}`, async (t) => {
    const error = (() => {
      try {
        loadConfig(env)
      } catch (e) {
        return e
      }
    })()
    t.type(error, ConfigError)
    t.match((error as Error).message, message)
  })
}

t.test('every bad variable is named at once', async (t) => {
  const error = (() => {
    try {
      loadConfig({ HYDRAZINE_HTTP_PORT: 'x', LOG_LEVEL: 'y' })
    } catch (e) {
      return e
    }
  })()
  t.type(error, ConfigError)
  t.same(
    (error as ConfigError).issues.map((i) => i.path),
    ['HYDRAZINE_HTTP_PORT', 'LOG_LEVEL'],
  )
})

t.test('a config file, overridden by env', async (t) => {
  const dir = t.testdir({})
  const file = join(dir, 'hydrazine.json')
  await writeFile(file, JSON.stringify({ HYDRAZINE_HTTP_PORT: 7000, HYDRAZINE_BGP_ASN: 64512 }))
  const config = loadConfig({ HYDRAZINE_CONFIG: file, HYDRAZINE_HTTP_PORT: '7001' })
  t.equal(config.http.port, 7001)
  t.equal(config.bgp.asn, 64512)

  await writeFile(file, JSON.stringify({ HTTP_PORT: 1 }))
  t.throws(() => loadConfig({ HYDRAZINE_CONFIG: file }), /unknown key HTTP_PORT/)
  await writeFile(file, JSON.stringify(['HYDRAZINE_HTTP_PORT']))
  t.throws(() => loadConfig({ HYDRAZINE_CONFIG: file }), /must hold a JSON object/)
  await writeFile(file, '{not json')
  t.throws(() => loadConfig({ HYDRAZINE_CONFIG: file }), /HYDRAZINE_CONFIG: cannot read/)
})

t.test('TLS files, REDIS_CA and the plaintext-only-on-loopback rule', async (t) => {
  const { openCertificateAuthority } = await import('../pki/index.ts')
  const dir = t.testdir({})
  const ca = await openCertificateAuthority(join(dir, 'pki'))
  const api = await ca.writeIssued('api', await ca.issueServer({ ips: ['10.0.0.5'] }))
  const other = await ca.writeIssued('other', await ca.issueServer({ ips: ['10.0.0.6'] }))
  const notPem = join(dir, 'not.pem')
  await writeFile(notPem, 'hello')

  const good = loadConfig({
    HYDRAZINE_HTTP_HOST: '0.0.0.0',
    HYDRAZINE_TLS_CERT: api.certFile,
    HYDRAZINE_TLS_KEY: api.keyFile,
    REDIS_URL: 'rediss://default:pw@10.0.0.7:6380',
    REDIS_CA: ca.caFile,
  })
  t.same(good.tls, { certFile: api.certFile, keyFile: api.keyFile }, 'cert and key paths')
  t.equal(good.redisCaFile, ca.caFile)
  t.equal(good.agentsRedis, undefined, "no AGENTS_REDIS_URL: an embedded agents' Redis")
  const client = await ca.writeIssued('ctl', await ca.issueClient({ commonName: 'ctl' }))
  const agents = loadConfig({
    AGENTS_REDIS_URL: 'rediss://default:pw@10.0.0.8:6380',
    AGENTS_REDIS_CA: ca.caFile,
    AGENTS_REDIS_CERT: client.certFile,
    AGENTS_REDIS_KEY: client.keyFile,
  })
  t.same(
    agents.agentsRedis,
    {
      url: 'rediss://default:pw@10.0.0.8:6380',
      caFile: ca.caFile,
      certFile: client.certFile,
      keyFile: client.keyFile,
    },
    "the agents' Redis, its CA and the controller's client certificate",
  )
  t.equal(loadConfig({ HYDRAZINE_HTTP_HOST: '::1' }).tls, undefined, 'loopback needs no TLS')

  const cases: [string, Record<string, string>, RegExp][] = [
    [
      'a non-loopback HTTP host without certificates',
      { HYDRAZINE_HTTP_HOST: '0.0.0.0' },
      /^invalid configuration: HYDRAZINE_HTTP_HOST: 0\.0\.0\.0 is not loopback: serving the API there needs HYDRAZINE_TLS_CERT and HYDRAZINE_TLS_KEY \(plaintext is only allowed on loopback\)$/,
    ],
    [
      'a certificate without its key',
      { HYDRAZINE_TLS_CERT: api.certFile },
      /HYDRAZINE_TLS_KEY: required when the other/,
    ],
    [
      'a key without its certificate',
      { HYDRAZINE_TLS_KEY: api.keyFile },
      /HYDRAZINE_TLS_CERT: required when the other/,
    ],
    [
      'an unreadable certificate',
      { HYDRAZINE_TLS_CERT: join(dir, 'missing.crt'), HYDRAZINE_TLS_KEY: api.keyFile },
      /HYDRAZINE_TLS_CERT: cannot read .*missing\.crt: ENOENT/,
    ],
    [
      'a certificate that is not one',
      { HYDRAZINE_TLS_CERT: notPem, HYDRAZINE_TLS_KEY: api.keyFile },
      /HYDRAZINE_TLS_CERT: .*not\.pem is not a PEM certificate/,
    ],
    [
      'the key of another certificate',
      { HYDRAZINE_TLS_CERT: api.certFile, HYDRAZINE_TLS_KEY: other.keyFile },
      /HYDRAZINE_TLS_KEY: .*other\.key is not the key of .*api\.crt/,
    ],
    [
      'a Redis CA for a plaintext Redis',
      { REDIS_URL: 'redis://10.0.0.7:6379', REDIS_CA: ca.caFile },
      /REDIS_CA: needs a rediss:\/\/ \(TLS\) REDIS_URL/,
    ],
    [
      "an agents' Redis URL that is not one",
      { AGENTS_REDIS_URL: 'http://10.0.0.8' },
      /AGENTS_REDIS_URL: must be a redis:\/\//,
    ],
    [
      "a client certificate for a plaintext agents' Redis",
      {
        AGENTS_REDIS_URL: 'redis://10.0.0.8:6379',
        AGENTS_REDIS_CERT: client.certFile,
        AGENTS_REDIS_KEY: client.keyFile,
      },
      /AGENTS_REDIS_CERT: needs a rediss:\/\/ \(TLS\) AGENTS_REDIS_URL/,
    ],
    [
      "an agents' Redis certificate without its key",
      { AGENTS_REDIS_URL: 'rediss://10.0.0.8:6379', AGENTS_REDIS_CERT: client.certFile },
      /AGENTS_REDIS_KEY: required when the other/,
    ],
    [
      "an agents' Redis key of another certificate",
      {
        AGENTS_REDIS_URL: 'rediss://10.0.0.8:6379',
        AGENTS_REDIS_CERT: client.certFile,
        AGENTS_REDIS_KEY: other.keyFile,
      },
      /AGENTS_REDIS_KEY: .*other\.key is not the key of .*ctl\.crt/,
    ],
    [
      "an agents' Redis CA that is not a certificate",
      { AGENTS_REDIS_URL: 'rediss://10.0.0.8:6379', AGENTS_REDIS_CA: notPem },
      /AGENTS_REDIS_CA: .*not\.pem is not a PEM certificate/,
    ],
    [
      "an unreadable agents' Redis CA",
      { AGENTS_REDIS_URL: 'rediss://10.0.0.8:6379', AGENTS_REDIS_CA: join(dir, 'nope.pem') },
      /AGENTS_REDIS_CA: cannot read .*nope\.pem: ENOENT/,
    ],
    [
      'a Redis CA that is not a certificate',
      { REDIS_URL: 'rediss://10.0.0.7:6379', REDIS_CA: notPem },
      /REDIS_CA: .*not\.pem is not a PEM certificate/,
    ],
  ]
  for (const [name, env, message] of cases) {
    t.throws(() => loadConfig(env), message, name)
  }
  t.throws(
    () => loadConfig({ REDIS_URL: 'http://default:s3cret-pass@10.0.0.7:6379' }),
    { message: /^(?!.*s3cret-pass)/ },
    'a bad REDIS_URL is refused without repeating its password',
  )
})

t.test('external centrals: named per group in a file checked at start-up', async (t) => {
  const dir = t.testdir({
    'centrals.json': JSON.stringify({
      'tenant-a': { nb: 'tcp:10.0.0.5:6641', sb: 'tcp:10.0.0.5:6642' },
    }),
    'bad.json': JSON.stringify({ 'tenant-a': { nb: 'ssl:10.0.0.5:6641', sb: 'ssl:10.0.0.5' } }),
  })
  const file = join(dir, 'centrals.json')
  const bad = join(dir, 'bad.json')

  const external = loadConfig({
    HYDRAZINE_OVN_CENTRAL: 'external',
    HYDRAZINE_OVN_CENTRALS_FILE: file,
  })
  t.equal(external.ovnCentral, 'external')
  t.equal(external.ovnCentralsFile, file)
  t.equal(external.ovn, undefined, 'no shared central')
  t.equal(
    loadConfig({ HYDRAZINE_OVN_CENTRALS_FILE: file }).ovnCentral,
    'external',
    'a centrals file alone means external',
  )
  t.equal(loadConfig({}).ovnCentralsFile, undefined)

  const cases: [string, Record<string, string>, RegExp][] = [
    [
      'external without a file',
      { HYDRAZINE_OVN_CENTRAL: 'external' },
      /^invalid configuration: HYDRAZINE_OVN_CENTRALS_FILE: required with HYDRAZINE_OVN_CENTRAL=external/,
    ],
    [
      'external with OVN_NB_DB',
      {
        HYDRAZINE_OVN_CENTRAL: 'external',
        HYDRAZINE_OVN_CENTRALS_FILE: file,
        OVN_NB_DB: 'tcp:10.0.0.6:6641',
        OVN_SB_DB: 'tcp:10.0.0.6:6642',
      },
      /^invalid configuration: HYDRAZINE_OVN_CENTRAL: external centrals are named per group in HYDRAZINE_OVN_CENTRALS_FILE: not with OVN_NB_DB/,
    ],
    [
      'a centrals file with OVN_NB_DB',
      {
        HYDRAZINE_OVN_CENTRALS_FILE: file,
        OVN_NB_DB: 'tcp:10.0.0.6:6641',
        OVN_SB_DB: 'tcp:10.0.0.6:6642',
      },
      /HYDRAZINE_OVN_CENTRALS_FILE: names external centrals: only with HYDRAZINE_OVN_CENTRAL=external, not shared/,
    ],
    [
      'a centrals file with per-group centrals',
      { HYDRAZINE_OVN_CENTRAL: 'per-group', HYDRAZINE_OVN_CENTRALS_FILE: file },
      /HYDRAZINE_OVN_CENTRALS_FILE: names external centrals: only with HYDRAZINE_OVN_CENTRAL=external, not per-group/,
    ],
    [
      'a missing file',
      { HYDRAZINE_OVN_CENTRAL: 'external', HYDRAZINE_OVN_CENTRALS_FILE: join(dir, 'none.json') },
      /^invalid configuration: HYDRAZINE_OVN_CENTRALS_FILE: .*none\.json: cannot read: ENOENT$/,
    ],
    [
      'a bad remote in the file',
      { HYDRAZINE_OVN_CENTRAL: 'external', HYDRAZINE_OVN_CENTRALS_FILE: bad },
      /^invalid configuration: HYDRAZINE_OVN_CENTRALS_FILE: .*bad\.json: tenant-a\.sb: must be an OVSDB remote/,
    ],
  ]
  for (const [name, env, message] of cases) {
    t.throws(() => loadConfig(env), message, name)
  }
  const error = (() => {
    try {
      loadConfig({ HYDRAZINE_OVN_CENTRALS_FILE: bad })
    } catch (e) {
      return e
    }
  })()
  t.match(
    (error as ConfigError).issues,
    [{ path: 'HYDRAZINE_OVN_CENTRALS_FILE', message: /^tenant-a\.sb: must be/ }],
    'the file is reported under its variable',
  )
})

t.test('HYDRAZINE_DPU_HEALTH_MS: how often DPU heartbeats are checked', async (t) => {
  const cases: [string | undefined, number | RegExp][] = [
    [undefined, 2000],
    ['250', 250],
    ['0', 0],
    ['50', /HYDRAZINE_DPU_HEALTH_MS: must be 0 \(off\) or at least 100/],
    ['soon', /HYDRAZINE_DPU_HEALTH_MS: must be a number of milliseconds/],
  ]
  for (const [value, expected] of cases) {
    const env = value === undefined ? {} : { HYDRAZINE_DPU_HEALTH_MS: value }
    if (typeof expected === 'number')
      t.equal(loadConfig(env).dpuHealthEveryMs, expected, `${value}`)
    else t.throws(() => loadConfig(env), expected, `${value}`)
  }
})

t.test('HYDRAZINE_CHASSIS_CERT_HOURS: how long a chassis certificate lasts', async (t) => {
  const cases: [string | undefined, number | RegExp][] = [
    [undefined, 24 * 3_600_000],
    ['1', 3_600_000],
    ['720', 720 * 3_600_000],
    ['0', /HYDRAZINE_CHASSIS_CERT_HOURS: must be 1\.\.720/],
    ['721', /HYDRAZINE_CHASSIS_CERT_HOURS: must be 1\.\.720/],
    ['1.5', /HYDRAZINE_CHASSIS_CERT_HOURS: must be a whole number of hours/],
  ]
  for (const [value, expected] of cases) {
    const env = value === undefined ? {} : { HYDRAZINE_CHASSIS_CERT_HOURS: value }
    if (typeof expected === 'number') t.equal(loadConfig(env).chassisCertMs, expected, `${value}`)
    else t.throws(() => loadConfig(env), expected, `${value}`)
  }
})

t.test('HYDRAZINE_JOB_LOCK_MS: how long a dead controller holds its jobs', async (t) => {
  const cases: [string | undefined, number | RegExp][] = [
    [undefined, 30_000],
    ['2000', 2000],
    ['999', /HYDRAZINE_JOB_LOCK_MS: must be 1000\.\.600000/],
    ['600001', /HYDRAZINE_JOB_LOCK_MS: must be 1000\.\.600000/],
    ['2s', /HYDRAZINE_JOB_LOCK_MS: must be a number of milliseconds/],
  ]
  for (const [value, expected] of cases) {
    const env = value === undefined ? {} : { HYDRAZINE_JOB_LOCK_MS: value }
    if (typeof expected === 'number') t.equal(loadConfig(env).jobLockMs, expected, `${value}`)
    else t.throws(() => loadConfig(env), expected, `${value}`)
  }
})

t.test('HYDRAZINE_QUOTAS: per-tenant limits on groups, hosts and public IPs', async (t) => {
  const builtIn = { groups: 100, hosts: 10_000, publicIps: 1_000 }
  t.same(loadConfig({}).quotas, { default: builtIn, tenants: {} }, 'unset: generous defaults')

  const good: [string, string, object][] = [
    ['empty object', '{}', { default: builtIn, tenants: {} }],
    [
      'a partial default keeps the built-in rest',
      '{"default": {"groups": 50, "publicIps": 0}}',
      { default: { groups: 50, hosts: 10_000, publicIps: 0 }, tenants: {} },
    ],
    [
      'a tenant override',
      '{"default": {"hosts": 2000}, "tenants": {"tenant-a": {"hosts": 5000}}}',
      { default: { ...builtIn, hosts: 2000 }, tenants: { 'tenant-a': { hosts: 5000 } } },
    ],
  ]
  for (const [name, value, expected] of good) {
    t.same(loadConfig({ HYDRAZINE_QUOTAS: value }).quotas, expected, name)
  }

  const bad: [string, string, RegExp][] = [
    ['not JSON', '{groups: 1}', /HYDRAZINE_QUOTAS: is not valid JSON/],
    ['not an object', '[1]', /HYDRAZINE_QUOTAS: must be a JSON object/],
    ['an unknown field', '{"defaults": {}}', /HYDRAZINE_QUOTAS: defaults: is not a field/],
    [
      'an unknown quota',
      '{"default": {"networks": 3}}',
      /HYDRAZINE_QUOTAS: default\.networks: is not a quota \(LIMITS is \{"groups"\?: N, "hosts"\?: N, "publicIps"\?: N\}\)/,
    ],
    [
      'a negative limit',
      '{"default": {"groups": -1}}',
      /HYDRAZINE_QUOTAS: default\.groups: must be a whole number from 0 to 1000000000/,
    ],
    [
      'a fraction',
      '{"tenants": {"tenant-a": {"hosts": 2.5}}}',
      /HYDRAZINE_QUOTAS: tenants\.tenant-a\.hosts: must be a whole number/,
    ],
    [
      'a string limit',
      '{"tenants": {"tenant-a": {"publicIps": "10"}}}',
      /HYDRAZINE_QUOTAS: tenants\.tenant-a\.publicIps: must be a whole number/,
    ],
    [
      'a tenant that cannot exist',
      '{"tenants": {"Tenant A": {"hosts": 1}}}',
      /HYDRAZINE_QUOTAS: tenant name tenants\.Tenant A: must be an RFC 1123 label/,
    ],
  ]
  for (const [name, value, message] of bad) {
    t.throws(() => loadConfig({ HYDRAZINE_QUOTAS: value }), message, name)
  }

  const error = (() => {
    try {
      loadConfig({ HYDRAZINE_QUOTAS: '{"default": {"groups": -1}}', LOG_LEVEL: 'loud' })
    } catch (e) {
      return e
    }
  })()
  t.same(
    (error as ConfigError).issues.map((i) => i.path),
    ['HYDRAZINE_QUOTAS', 'LOG_LEVEL'],
    'named with every other bad variable at once',
  )

  const dir = t.testdir({
    'config.json': JSON.stringify({ HYDRAZINE_QUOTAS: { tenants: { 'tenant-b': { groups: 2 } } } }),
  })
  t.same(
    loadConfig({ HYDRAZINE_CONFIG: join(dir, 'config.json') }).quotas.tenants,
    { 'tenant-b': { groups: 2 } },
    'a config file may give the quotas as a JSON object',
  )
})

t.test(
  'HYDRAZINE_METRICS_LISTEN and _TOKEN: open on loopback, token and TLS elsewhere',
  async (t) => {
    const { openCertificateAuthority } = await import('../pki/index.ts')
    const ca = await openCertificateAuthority(join(t.testdir({}), 'pki'))
    const api = await ca.writeIssued('api', await ca.issueServer({ ips: ['10.0.0.5'] }))
    const tls = { HYDRAZINE_TLS_CERT: api.certFile, HYDRAZINE_TLS_KEY: api.keyFile }
    const token = 'metrics-token-0123456789'

    const good: [string, Record<string, string>, unknown][] = [
      ['default', {}, { listen: { host: '127.0.0.1', port: 9464 } }],
      ['off', { HYDRAZINE_METRICS_LISTEN: 'off' }, undefined],
      [
        'IPv6 loopback',
        { HYDRAZINE_METRICS_LISTEN: '[::1]:9100' },
        { listen: { host: '::1', port: 9100 } },
      ],
      [
        'a token on loopback is required there too',
        { HYDRAZINE_METRICS_TOKEN: token },
        { listen: { host: '127.0.0.1', port: 9464 }, token },
      ],
      [
        'elsewhere with a token and TLS',
        { HYDRAZINE_METRICS_LISTEN: '0.0.0.0:9464', HYDRAZINE_METRICS_TOKEN: token, ...tls },
        { listen: { host: '0.0.0.0', port: 9464 }, token },
      ],
    ]
    for (const [name, env, metrics] of good) t.same(loadConfig(env).metrics, metrics, name)

    const bad: [string, Record<string, string>, RegExp][] = [
      [
        'not host:port',
        { HYDRAZINE_METRICS_LISTEN: '9464' },
        /HYDRAZINE_METRICS_LISTEN: must be host:port \(\[v6\]:port for IPv6\) or off/,
      ],
      [
        'a port out of range',
        { HYDRAZINE_METRICS_LISTEN: '127.0.0.1:70000' },
        /HYDRAZINE_METRICS_LISTEN: must be host:port/,
      ],
      [
        'a short token',
        { HYDRAZINE_METRICS_TOKEN: 'short' },
        /HYDRAZINE_METRICS_TOKEN: must be at least 16 characters/,
      ],
      [
        'elsewhere without a token',
        { HYDRAZINE_METRICS_LISTEN: '0.0.0.0:9464', ...tls },
        /HYDRAZINE_METRICS_TOKEN: required: HYDRAZINE_METRICS_LISTEN 0\.0\.0\.0 is not loopback/,
      ],
      [
        'elsewhere without TLS',
        { HYDRAZINE_METRICS_LISTEN: '10.0.0.5:9464', HYDRAZINE_METRICS_TOKEN: token },
        /HYDRAZINE_METRICS_LISTEN: 10\.0\.0\.5 is not loopback: serving metrics there needs HYDRAZINE_TLS_CERT and HYDRAZINE_TLS_KEY/,
      ],
    ]
    for (const [name, env, message] of bad) t.throws(() => loadConfig(env), message, name)
    t.throws(
      () => loadConfig({ HYDRAZINE_METRICS_TOKEN: 'short-s3cret' }),
      { message: /^(?!.*short-s3cret)/ },
      'a bad token is refused without repeating it',
    )
  },
)

t.test('kubernetes centrals: HYDRAZINE_K8S_* with HYDRAZINE_OVN_CENTRAL=kubernetes', async (t) => {
  const image = 'registry.example/hydrazine:0.1.0'
  const defaults = loadConfig({
    HYDRAZINE_OVN_CENTRAL: 'kubernetes',
    HYDRAZINE_K8S_CENTRAL_IMAGE: image,
    HYDRAZINE_K8S_CONTROLLER_CIDRS: '10.0.0.0/24',
    HYDRAZINE_K8S_DPU_CIDRS: '172.18.0.0/24',
    HYDRAZINE_K8S_CENTRAL_PLAINTEXT_SB: 'true',
    HYDRAZINE_K8S_CENTRAL_PLAINTEXT_NB: 'true',
  })
  t.equal(defaults.ovnCentral, 'kubernetes')
  t.same(defaults.kubernetes, {
    namespace: inClusterNamespace() ?? 'hydrazine',
    image,
    replicas: 1,
    storage: '1Gi',
    clusterDomain: 'cluster.local',
    controllerCidrs: ['10.0.0.0/24'],
    dpuCidrs: ['172.18.0.0/24'],
  })
  t.equal(loadConfig({}).kubernetes, undefined, 'no Kubernetes settings for other centrals')

  // The controller's client certificate for the NBs, and the CA of theirs.
  const { openCertificateAuthority } = await import('../pki/index.ts')
  const dir = t.testdir({})
  const ca = await openCertificateAuthority(join(dir, 'pki'))
  const client = await ca.writeIssued(
    'controller',
    await ca.issueClient({ commonName: 'hydrazine-controller' }),
  )
  const other = await ca.writeIssued('other', await ca.issueClient({ commonName: 'other' }))
  const notPem = join(dir, 'not.pem')
  await writeFile(notPem, 'hello')
  const nbTls = {
    HYDRAZINE_K8S_CENTRAL_NB_TLS_SECRET: 'ovn-nb-tls',
    HYDRAZINE_K8S_NB_CLIENT_CERT: client.certFile,
    HYDRAZINE_K8S_NB_CLIENT_KEY: client.keyFile,
    HYDRAZINE_K8S_NB_CA: ca.caFile,
  }
  const { HYDRAZINE_K8S_NB_CLIENT_CERT: _cert, ...nbTlsWithoutCert } = nbTls
  const every = loadConfig({
    ...nbTls,
    HYDRAZINE_OVN_CENTRAL: 'kubernetes',
    HYDRAZINE_K8S_CENTRAL_IMAGE: image,
    HYDRAZINE_K8S_NAMESPACE: 'net-system',
    HYDRAZINE_K8S_CENTRAL_REPLICAS: '3',
    HYDRAZINE_K8S_CENTRAL_STORAGE: '512Mi',
    HYDRAZINE_K8S_CENTRAL_STORAGE_CLASS: 'fast-ssd',
    HYDRAZINE_K8S_CENTRAL_TLS_SECRET: 'ovn-sb-tls',
    HYDRAZINE_K8S_CLUSTER_DOMAIN: 'k8s.example',
    HYDRAZINE_K8S_CONTROLLER_CIDRS: '10.0.0.11/32, 10.0.0.12/32,fd00:10::/64',
  })
  t.same(every.kubernetes, {
    namespace: 'net-system',
    image,
    replicas: 3,
    storage: '512Mi',
    storageClassName: 'fast-ssd',
    sbTlsSecret: 'ovn-sb-tls',
    nbTlsSecret: 'ovn-nb-tls',
    nbClientTls: { cert: client.certFile, key: client.keyFile, ca: ca.caFile },
    clusterDomain: 'k8s.example',
    controllerCidrs: ['10.0.0.11/32', '10.0.0.12/32', 'fd00:10::/64'],
  })
  t.notOk('dpuCidrs' in (every.kubernetes ?? {}), 'TLS without DPU CIDRs: the SB is open to all')
  const controllerTls = { cert: client.certFile, key: client.keyFile, ca: ca.caFile }
  t.same(
    controllerOvsdbTls(every),
    { nb: controllerTls, sb: controllerTls },
    "the same certificate for the NBs and the SBs' controller port (no plaintext SB left)",
  )
  t.same(controllerOvsdbTls(defaults), {}, 'plaintext NB (asked for): no certificate to present')
  const withDpuCa = loadConfig({
    ...nbTls,
    HYDRAZINE_OVN_CENTRAL: 'kubernetes',
    HYDRAZINE_K8S_CENTRAL_IMAGE: image,
    HYDRAZINE_K8S_CENTRAL_TLS_SECRET: 'ovn-sb-tls',
    HYDRAZINE_K8S_CONTROLLER_CIDRS: '10.0.0.11/32',
    HYDRAZINE_K8S_DPU_CA: ca.caFile,
  })
  t.equal(withDpuCa.kubernetes?.dpuCaFile, ca.caFile, "the DPUs' CA: a certificate, no key")

  const k8s = {
    HYDRAZINE_OVN_CENTRAL: 'kubernetes',
    HYDRAZINE_K8S_CENTRAL_IMAGE: image,
    HYDRAZINE_K8S_CONTROLLER_CIDRS: '10.0.0.0/24',
    HYDRAZINE_K8S_DPU_CIDRS: '172.18.0.0/24',
    HYDRAZINE_K8S_CENTRAL_PLAINTEXT_SB: 'true',
    HYDRAZINE_K8S_CENTRAL_PLAINTEXT_NB: 'true',
  }
  const { HYDRAZINE_K8S_CENTRAL_PLAINTEXT_SB: _p, ...notSaidPlaintext } = k8s
  const { HYDRAZINE_K8S_CENTRAL_PLAINTEXT_NB: _n, ...notSaidPlaintextNb } = k8s
  const { HYDRAZINE_K8S_CONTROLLER_CIDRS: _c, ...noControllerCidrs } = k8s
  const { HYDRAZINE_K8S_DPU_CIDRS: _d, ...noDpuCidrs } = k8s
  const many = Array.from({ length: 33 }, (_, i) => `10.1.${i}.0/24`).join(',')
  const cases: [string, Record<string, string>, string, RegExp][] = [
    [
      'no image',
      { HYDRAZINE_OVN_CENTRAL: 'kubernetes' },
      'HYDRAZINE_K8S_CENTRAL_IMAGE',
      /required with HYDRAZINE_OVN_CENTRAL=kubernetes/,
    ],
    [
      'no controller CIDRs',
      noControllerCidrs,
      'HYDRAZINE_K8S_CONTROLLER_CIDRS',
      /required with HYDRAZINE_OVN_CENTRAL=kubernetes: .*hostNetwork.*cannot be selected by pod labels/,
    ],
    [
      'a plaintext SB not asked for',
      notSaidPlaintext,
      'HYDRAZINE_K8S_CENTRAL_TLS_SECRET',
      /required with HYDRAZINE_OVN_CENTRAL=kubernetes: without it each group's SB is plaintext tcp: with no RBAC.*HYDRAZINE_K8S_CENTRAL_PLAINTEXT_SB=true/,
    ],
    [
      'plaintext and a TLS Secret',
      { ...k8s, HYDRAZINE_K8S_CENTRAL_TLS_SECRET: 'ovn-sb-tls' },
      'HYDRAZINE_K8S_CENTRAL_PLAINTEXT_SB',
      /true only without HYDRAZINE_K8S_CENTRAL_TLS_SECRET/,
    ],
    [
      'a plaintext NB not asked for',
      notSaidPlaintextNb,
      'HYDRAZINE_K8S_CENTRAL_NB_TLS_SECRET',
      /required with HYDRAZINE_OVN_CENTRAL=kubernetes: without it each group's NB.*plaintext tcp:.*HYDRAZINE_K8S_CENTRAL_PLAINTEXT_NB=true/,
    ],
    [
      'a plaintext NB and an NB TLS Secret',
      { ...k8s, ...nbTls },
      'HYDRAZINE_K8S_CENTRAL_PLAINTEXT_NB',
      /true only without HYDRAZINE_K8S_CENTRAL_NB_TLS_SECRET/,
    ],
    [
      "an NB TLS Secret without the controller's certificate",
      { ...notSaidPlaintextNb, ...nbTlsWithoutCert },
      'HYDRAZINE_K8S_NB_CLIENT_CERT',
      /required with HYDRAZINE_K8S_CENTRAL_NB_TLS_SECRET/,
    ],
    [
      'a client certificate for a plaintext NB',
      { ...k8s, HYDRAZINE_K8S_NB_CA: ca.caFile },
      'HYDRAZINE_K8S_NB_CA',
      /only with HYDRAZINE_K8S_CENTRAL_NB_TLS_SECRET/,
    ],
    [
      'an NB CA that is not a certificate',
      { ...notSaidPlaintextNb, ...nbTls, HYDRAZINE_K8S_NB_CA: notPem },
      'HYDRAZINE_K8S_NB_CA',
      /not\.pem is not a PEM certificate/,
    ],
    [
      'an unreadable client key',
      { ...notSaidPlaintextNb, ...nbTls, HYDRAZINE_K8S_NB_CLIENT_KEY: join(dir, 'missing.key') },
      'HYDRAZINE_K8S_NB_CLIENT_KEY',
      /cannot read .*missing\.key: ENOENT/,
    ],
    [
      "another certificate's key",
      { ...notSaidPlaintextNb, ...nbTls, HYDRAZINE_K8S_NB_CLIENT_KEY: other.keyFile },
      'HYDRAZINE_K8S_NB_CLIENT_KEY',
      /is not the key of/,
    ],
    [
      "the DPUs' CA without TLS (no relay to serve a group's chassis CA)",
      { ...k8s, HYDRAZINE_K8S_DPU_CA: ca.caFile },
      'HYDRAZINE_K8S_DPU_CA',
      /only with HYDRAZINE_K8S_CENTRAL_TLS_SECRET and _NB_TLS_SECRET/,
    ],
    [
      "a DPUs' CA that is not a certificate",
      {
        ...notSaidPlaintextNb,
        ...nbTls,
        HYDRAZINE_K8S_CENTRAL_PLAINTEXT_SB: 'false',
        HYDRAZINE_K8S_CENTRAL_TLS_SECRET: 'ovn-sb-tls',
        HYDRAZINE_K8S_DPU_CA: notPem,
      },
      'HYDRAZINE_K8S_DPU_CA',
      /not\.pem holds no CA certificate/,
    ],
    [
      'no DPU CIDRs and no TLS Secret',
      noDpuCidrs,
      'HYDRAZINE_K8S_DPU_CIDRS',
      /required without HYDRAZINE_K8S_CENTRAL_TLS_SECRET/,
    ],
    [
      'a controller CIDR with host bits',
      { ...k8s, HYDRAZINE_K8S_CONTROLLER_CIDRS: '10.0.0.0/24,10.0.1.1/24' },
      'HYDRAZINE_K8S_CONTROLLER_CIDRS',
      /entry 2 must be a network address: no host bits/,
    ],
    [
      'an address without a prefix',
      { ...k8s, HYDRAZINE_K8S_DPU_CIDRS: '172.18.0.11' },
      'HYDRAZINE_K8S_DPU_CIDRS',
      /entry 1 must be a CIDR like 10\.0\.0\.0\/24 or fd00::\/64/,
    ],
    [
      'an IPv6 prefix too long',
      { ...k8s, HYDRAZINE_K8S_DPU_CIDRS: 'fd00::/129' },
      'HYDRAZINE_K8S_DPU_CIDRS',
      /entry 1 must be a CIDR/,
    ],
    [
      'every address',
      { ...k8s, HYDRAZINE_K8S_CONTROLLER_CIDRS: '0.0.0.0/0' },
      'HYDRAZINE_K8S_CONTROLLER_CIDRS',
      /entry 1 must not be \/0/,
    ],
    [
      'an empty entry',
      { ...k8s, HYDRAZINE_K8S_CONTROLLER_CIDRS: '10.0.0.0/24,' },
      'HYDRAZINE_K8S_CONTROLLER_CIDRS',
      /entry 2 is empty/,
    ],
    [
      'more than 32',
      { ...k8s, HYDRAZINE_K8S_DPU_CIDRS: many },
      'HYDRAZINE_K8S_DPU_CIDRS',
      /must list at most 32 CIDRs, not 33/,
    ],
    [
      'CIDRs for embedded centrals',
      { HYDRAZINE_K8S_DPU_CIDRS: '172.18.0.0/24' },
      'HYDRAZINE_K8S_DPU_CIDRS',
      /only with HYDRAZINE_OVN_CENTRAL=kubernetes, not per-group/,
    ],
    [
      'two replicas',
      { ...k8s, HYDRAZINE_K8S_CENTRAL_REPLICAS: '2' },
      'HYDRAZINE_K8S_CENTRAL_REPLICAS',
      /must be 1 \(one server\) or 3 \(a raft cluster\)/,
    ],
    [
      'a size without a unit',
      { ...k8s, HYDRAZINE_K8S_CENTRAL_STORAGE: '1GB' },
      'HYDRAZINE_K8S_CENTRAL_STORAGE',
      /must be a storage size like 512Mi or 1Gi/,
    ],
    [
      'a namespace with capitals',
      { ...k8s, HYDRAZINE_K8S_NAMESPACE: 'Hydrazine' },
      'HYDRAZINE_K8S_NAMESPACE',
      /must be a Kubernetes namespace name/,
    ],
    [
      'a Secret name with a slash',
      { ...k8s, HYDRAZINE_K8S_CENTRAL_TLS_SECRET: 'ns/secret' },
      'HYDRAZINE_K8S_CENTRAL_TLS_SECRET',
      /must be a Secret name/,
    ],
    [
      'an image with a space',
      { ...k8s, HYDRAZINE_K8S_CENTRAL_IMAGE: 'hydrazine latest' },
      'HYDRAZINE_K8S_CENTRAL_IMAGE',
      /must be a container image reference/,
    ],
    [
      'Kubernetes settings for embedded centrals',
      { HYDRAZINE_K8S_CENTRAL_REPLICAS: '3' },
      'HYDRAZINE_K8S_CENTRAL_REPLICAS',
      /only with HYDRAZINE_OVN_CENTRAL=kubernetes, not per-group/,
    ],
    [
      'with an external OVN_NB_DB',
      { ...k8s, OVN_NB_DB: 'tcp:10.0.0.6:6641', OVN_SB_DB: 'tcp:10.0.0.6:6642' },
      'HYDRAZINE_OVN_CENTRAL',
      /kubernetes centrals are created per group: not with OVN_NB_DB/,
    ],
  ]
  for (const [name, env, path, message] of cases) {
    const error = (() => {
      try {
        loadConfig(env)
      } catch (e) {
        return e
      }
    })()
    t.type(error, ConfigError, name)
    t.match((error as ConfigError).message, message, name)
    t.match((error as ConfigError).issues, [{ path }], `${name}: names ${path}`)
  }
})

t.test('the in-cluster namespace comes from the service account file', async (t) => {
  const dir = t.testdir({ ns: 'tenant-net\n', bad: 'Not A Namespace', empty: '' })
  t.equal(inClusterNamespace(join(dir, 'ns')), 'tenant-net')
  t.equal(inClusterNamespace(join(dir, 'bad')), undefined, 'not a namespace name')
  t.equal(inClusterNamespace(join(dir, 'empty')), undefined)
  t.equal(inClusterNamespace(join(dir, 'missing')), undefined, 'not in a pod')
})

t.test('REDIS_URL may name a Redis Cluster by its seed nodes', async (t) => {
  const url = 'redis+cluster://hz:pw@10.0.0.1:7000,10.0.0.2:7000,10.0.0.3:7000'
  t.equal(loadConfig({ REDIS_URL: url }).redisUrl, url)
  t.equal(
    loadConfig({ REDIS_URL: 'rediss+cluster://10.0.0.1:7000' }).redisUrl,
    'rediss+cluster://10.0.0.1:7000',
    'over TLS too',
  )
  for (const bad of ['redis+cluster://a:1,b:2/3', 'redis+cluster://a:1,,b:2']) {
    const error = (() => {
      try {
        loadConfig({ REDIS_URL: bad.replace('//', '//hz:s3cret@') })
        return undefined
      } catch (e) {
        return e
      }
    })()
    t.type(error, ConfigError, bad)
    t.match((error as ConfigError).message, /REDIS_URL: a Redis Cluster URL is/, bad)
    t.notMatch((error as ConfigError).message, /s3cret/, 'the password is not repeated')
  }
})
