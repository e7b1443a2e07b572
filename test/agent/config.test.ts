import { execFile } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import t from 'tap'
import { describeConfig, parseAgentConfig, redactingLog, redactUrl } from '../../agent/config.ts'
import { ConfigError } from '../../lib/errors.ts'

const exec = promisify(execFile)
const repo = fileURLToPath(new URL('../..', import.meta.url))

const required = {
  HZ_DPU_ID: 'dpu-1',
  HZ_FABRIC_IPS: '10.0.0.2,10.0.0.102',
  HZ_OVS_DB: 'unix:/run/ovs/db.sock',
  REDIS_URL: 'redis://10.0.0.1:6379',
  HZ_HOST_PORTS: 'pf0hpf,pf1hpf',
}

t.test('flags win over the environment; defaults fill the rest', async (t) => {
  const c = parseAgentConfig(['--dpu-id', 'dpu-9', '--datapath-type', 'netdev'], required)
  t.equal(c.dpuId, 'dpu-9')
  t.equal(c.systemId, 'dpu-9')
  t.same(c.fabricIps, ['10.0.0.2', '10.0.0.102'])
  t.equal(c.datapathType, 'netdev')
  t.equal(c.ovnMonitorAll, 'true', "ovn-controller takes its group's whole SB by default")
  t.equal(
    parseAgentConfig(['--dpu-id', 'dpu-9', '--ovn-monitor-all', 'false'], required).ovnMonitorAll,
    'false',
  )
  t.equal(c.bridgeMappings, 'physnet:br-phy')
  t.equal(c.heartbeatMs, 5000)
  t.same(c.protocolVersions, ['1.0', '2.0'])
  t.same(c.hostPorts, ['pf0hpf', 'pf1hpf'])
  t.equal(c.defaultHostPort, 'pf0hpf', 'the default host port is the first allowed one')
  t.equal(c.grpcListen, '127.0.0.1:50151', 'without TLS, gRPC listens on loopback')
  t.equal(c.tlsCert, undefined)
  t.same(c.grpcClients, ['hydrazine-controller'], 'only the controller may call gRPC')
})

t.test('--grpc-clients: certificate CNs, never the DPU itself', async (t) => {
  t.same(
    parseAgentConfig(['--grpc-clients', 'hz-ops, hydrazine-controller'], required).grpcClients,
    ['hz-ops', 'hydrazine-controller'],
  )
  const cases: [string[], RegExp][] = [
    [['--grpc-clients', ''], /--grpc-clients \(or HZ_AGENT_GRPC_CLIENTS\) /],
    [['--grpc-clients', 'ops team'], /--grpc-clients .*must be certificate CNs/],
    [
      ['--grpc-clients', 'hz-ops,dpu-1'],
      /--grpc-clients .*must not list dpu-1: that is this DPU's own/,
    ],
  ]
  for (const [argv, message] of cases) {
    t.throws(() => parseAgentConfig(argv, required), ConfigError)
    t.throws(() => parseAgentConfig(argv, required), { message }, argv.join(' '))
  }
})

t.test('host ports: a required allow-list that never names a bridge or the uplink', async (t) => {
  const { HZ_HOST_PORTS: _, ...noPorts } = required
  t.throws(() => parseAgentConfig([], noPorts), {
    message: /--host-ports \(or HZ_HOST_PORTS\) is required/,
  })
  t.equal(parseAgentConfig(['--host-port', 'pf1hpf'], required).defaultHostPort, 'pf1hpf')
  const cases: [string[], RegExp][] = [
    [
      ['--host-port', 'pf2hpf'],
      /--host-port \(or HZ_HOST_PORT\) pf2hpf is not one of --host-ports/,
    ],
    [['--host-ports', 'pf0hpf,br-phy'], /must not list br-phy: the uplink bridge/],
    [['--host-ports', 'br-int'], /must not list br-int: the integration bridge/],
    [['--host-ports', 'p0', '--uplink-interface', 'p0'], /must not list p0: the uplink interface/],
    [
      ['--host-ports', 'pf0hpf,up0', '--uplink-bridge', 'up0'],
      /must not list up0: the uplink bridge/,
    ],
    [['--host-ports', 'hzr0123abcd'], /must not list hzr0123abcd: hzr… names are relay ports/],
    [['--host-ports', 'hzr0123abcdu'], /must not list hzr0123abcdu/],
    [
      ['--host-ports', 'pf0hpf,much-too-long-name'],
      /--host-ports .* must be a Linux interface name/,
    ],
  ]
  for (const [argv, message] of cases) {
    t.throws(() => parseAgentConfig(argv, required), { message }, argv.join(' '))
  }
})

t.test('TLS: all three files or none; without them gRPC stays on loopback', async (t) => {
  const tls = ['--tls-cert', '/c.pem', '--tls-key', '/k.pem', '--tls-ca', '/ca.pem']
  const withTls = parseAgentConfig([...tls, '--grpc-listen', '0.0.0.0:50151'], required)
  t.equal(withTls.grpcListen, '0.0.0.0:50151', 'with TLS any address')
  t.equal(withTls.tlsCa, '/ca.pem')
  for (const local of ['127.0.0.1:1', '127.0.1.1:50151', 'localhost:50151', '[::1]:50151']) {
    t.equal(parseAgentConfig(['--grpc-listen', local], required).grpcListen, local, local)
  }
  const cases: [string[], Record<string, string>, RegExp][] = [
    [
      ['--grpc-listen', '0.0.0.0:50151'],
      required,
      /--grpc-listen \(or HZ_AGENT_GRPC_LISTEN\) 0\.0\.0\.0:50151 is not a loopback address: without --tls-cert/,
    ],
    [[], { ...required, HZ_AGENT_GRPC_LISTEN: '10.0.0.2:50151' }, /is not a loopback address/],
    [['--tls-cert', '/c.pem'], required, /--tls-key \(or HZ_TLS_KEY\) is required with the other/],
    [
      ['--tls-cert', '/c.pem', '--tls-key', '/k.pem'],
      required,
      /--tls-ca \(or HZ_TLS_CA\) is required/,
    ],
    [['--redis-ca', '/ca.pem'], required, /--redis-ca \(or HZ_REDIS_CA\) needs a rediss:\/\//],
  ]
  for (const [argv, env, message] of cases) {
    t.throws(() => parseAgentConfig(argv, env), ConfigError)
    t.throws(() => parseAgentConfig(argv, env), { message }, String(message))
  }
  const redis = parseAgentConfig(['--redis-ca', '/ca.pem'], {
    ...required,
    REDIS_URL: 'rediss://agent:pw@10.0.0.1:6380',
  })
  t.equal(redis.redisCa, '/ca.pem')
})

t.test('the Redis password is never in what the agent prints', async (t) => {
  const secret = 'S3cr3t/pa ss'
  const url = `rediss://hz-agent:${encodeURIComponent(secret)}@10.0.0.1:6380/0`
  t.equal(redactUrl(url), 'rediss://hz-agent:***@10.0.0.1:6380/0')
  t.equal(redactUrl('redis://10.0.0.1:6379'), 'redis://10.0.0.1:6379')
  const c = parseAgentConfig([], { ...required, REDIS_URL: url })
  const dump = describeConfig(c)
  t.match(dump, /redis-url=rediss:\/\/hz-agent:\*\*\*@10\.0\.0\.1:6380/)
  t.match(dump, /host-ports=pf0hpf,pf1hpf/)
  t.notMatch(dump, 'S3cr3t')
  const lines: string[] = []
  const log = redactingLog(c, (l) => lines.push(l))
  log(`failed: ${url}`)
  log(`AUTH hz-agent ${secret} refused`)
  t.notMatch(lines.join('\n'), 'S3cr3t', 'neither encoded nor decoded')
  t.equal(lines.length, 2)
})

t.test('--metrics-listen: off by default, a token and TLS off loopback', async (t) => {
  const token = 'metrics-token-0123456789'
  const tls = ['--tls-cert', '/c.pem', '--tls-key', '/k.pem', '--tls-ca', '/ca.pem']
  t.equal(parseAgentConfig([], required).metricsListen, undefined, 'no listener by default')
  const good: [string[], Record<string, string>][] = [
    [['--metrics-listen', '127.0.0.1:9465'], required],
    [['--metrics-listen', '[::1]:0'], required],
    [['--metrics-listen', 'off'], required],
    [['--metrics-listen', '0.0.0.0:9465', ...tls], { ...required, HZ_AGENT_METRICS_TOKEN: token }],
  ]
  for (const [argv, env] of good) {
    t.equal(parseAgentConfig(argv, env).metricsListen, argv[1], argv.join(' '))
  }
  const bad: [string[], Record<string, string>, RegExp][] = [
    [
      ['--metrics-listen', '9465'],
      required,
      /--metrics-listen \(or HZ_AGENT_METRICS_LISTEN\) must be host:port or off/,
    ],
    [
      ['--metrics-token', 'short'],
      required,
      /--metrics-token \(or HZ_AGENT_METRICS_TOKEN\) must be at least 16/,
    ],
    [
      ['--metrics-listen', '0.0.0.0:9465', ...tls],
      required,
      /--metrics-token \(or HZ_AGENT_METRICS_TOKEN\) is required: --metrics-listen 0\.0\.0\.0:9465 is not loopback/,
    ],
    [
      ['--metrics-listen', '10.0.0.2:9465'],
      { ...required, HZ_AGENT_METRICS_TOKEN: token },
      /--metrics-listen \(or HZ_AGENT_METRICS_LISTEN\) 10\.0\.0\.2:9465 is not a loopback address: metrics there are served over HTTPS/,
    ],
  ]
  for (const [argv, env, message] of bad) {
    t.throws(() => parseAgentConfig(argv, env), { message }, argv.join(' '))
  }

  const c = parseAgentConfig([], { ...required, HZ_AGENT_METRICS_TOKEN: token })
  t.match(describeConfig(c), /metrics-token=\*\*\*/)
  t.notMatch(describeConfig(c), token, 'the start-up line hides the token')
  const lines: string[] = []
  redactingLog(c, (l) => lines.push(l))(`scrape with ${token}`)
  t.same(lines, ['scrape with ***'], 'and so does every log line')
})

t.test('a bad setting is an error naming the flag and the variable', async (t) => {
  const cases: [string[], Record<string, string>, RegExp][] = [
    [[], { ...required, HZ_DPU_ID: '' }, /--dpu-id \(or HZ_DPU_ID\)/],
    [[], { ...required, HZ_OVS_DB: 'db.sock' }, /--ovs-db \(or HZ_OVS_DB\) must be unix/],
    [['--fabric-ips', '10.0.0.2,nope'], required, /--fabric-ips \(or HZ_FABRIC_IPS\)/],
    [['--datapath-type', 'dpdk'], required, /--datapath-type .* must be system or netdev/],
    [['--ovn-monitor-all', 'yes'], required, /--ovn-monitor-all .* must be true or false/],
    [['--heartbeat-ms', 'soon'], required, /--heartbeat-ms \(or HZ_HEARTBEAT_MS\)/],
    [['--no-such-flag', 'x'], required, /no-such-flag/],
  ]
  for (const [argv, env, message] of cases) {
    t.throws(() => parseAgentConfig(argv, env), ConfigError)
    t.throws(() => parseAgentConfig(argv, env), { message }, String(message))
  }
  const { REDIS_URL: _, ...noRedis } = required
  t.throws(() => parseAgentConfig([], noRedis), {
    message: /--redis-url \(or REDIS_URL\) is required/,
  })
})

t.test('agent/main.ts exits 2 with the error when configuration is missing', async (t) => {
  const err = await exec(process.execPath, ['--import', 'tsx', 'agent/main.ts', '--dpu-id', 'd1'], {
    cwd: repo,
    env: { PATH: process.env.PATH ?? '' },
  }).catch((e: { code: number; stderr: string }) => e)
  t.match(err, { code: 2, stderr: /hydrazine agent: .*--ovs-db \(or HZ_OVS_DB\) is required/ })
})
