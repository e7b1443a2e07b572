import { Cluster, Redis } from 'ioredis'
import t from 'tap'
import { ConfigError } from '../errors.ts'
import {
  clusterNodes,
  clusterOptions,
  createRedis,
  isClusterUrl,
  redactRedisUrl,
  redisOptions,
} from './connection.ts'
import { displayQueueName, hashTagOf } from './slots.ts'

t.test('a Redis Cluster URL names its seed nodes', async (t) => {
  t.same(clusterNodes('redis+cluster://:pw@10.0.0.1:7000,10.0.0.2:7001,[fd00::3]:7002'), [
    { host: '10.0.0.1', port: 7000 },
    { host: '10.0.0.2', port: 7001 },
    { host: 'fd00::3', port: 7002 },
  ])
  t.same(clusterNodes('rediss+cluster://redis.example'), [{ host: 'redis.example', port: 6379 }])
  t.equal(clusterNodes('redis://127.0.0.1:6379'), undefined, 'one Redis is not a cluster')
  t.ok(isClusterUrl('rediss+cluster://a:1'))
  t.notOk(isClusterUrl('rediss://a:1'))
  for (const bad of [
    'redis+cluster://a:1,b:2/1',
    'redis+cluster://',
    'redis+cluster://a:1,,b:2',
    'redis+cluster://a:notaport',
  ]) {
    t.throws(() => clusterNodes(bad), ConfigError, `refused: ${bad}`)
  }
  const refusal = (() => {
    try {
      clusterNodes('redis+cluster://user:s3cret@a:1/2')
      return ''
    } catch (error) {
      return (error as Error).message
    }
  })()
  t.match(refusal, /no database/, 'a database is refused')
  t.notMatch(refusal, /s3cret/, 'the error hides the password')
})

t.test("every node gets the URL's credentials and TLS", async (t) => {
  const options = clusterOptions(
    { url: 'rediss+cluster://hz:p%40ss@10.0.0.1:7000,10.0.0.2:7000' },
    { maxRetriesPerRequest: null },
  )
  t.match(options.redisOptions, {
    username: 'hz',
    password: 'p@ss',
    tls: {},
    maxRetriesPerRequest: null,
  })
  t.notOk('host' in (options.redisOptions ?? {}), 'no host of its own: each node has its own')
  t.type(options.dnsLookup, 'function', 'TLS: names checked as given, not re-resolved')
  t.same(redisOptions({ url: 'redis://:pw@127.0.0.1:6380/2' }), {
    host: '127.0.0.1',
    port: 6380,
    password: 'pw',
    db: 2,
  })
})

t.test('createRedis makes a Cluster for a cluster URL, a Redis otherwise', async (t) => {
  const cluster = createRedis({ url: 'redis+cluster://127.0.0.1:1' }, { lazyConnect: true })
  const single = createRedis({ url: 'redis://127.0.0.1:1' }, { lazyConnect: true })
  t.ok(cluster instanceof Cluster)
  t.ok(single instanceof Redis)
  cluster.disconnect()
  single.disconnect()
})

t.test('passwords are redacted, cluster URLs too', async (t) => {
  t.equal(redactRedisUrl('redis://:pw@h:1'), 'redis://:***@h:1')
  t.equal(redactRedisUrl('rediss+cluster://u:pw@a:1,b:2'), 'rediss+cluster://u:***@a:1,b:2')
})

t.test('hash tags and display names', async (t) => {
  t.equal(hashTagOf('bull:{hz-agents-3}agent-dpu-1:wait'), 'hz-agents-3')
  t.equal(hashTagOf('hz:{store}:mr:a'), 'store')
  t.equal(hashTagOf('plain:key'), 'plain:key', 'no tag: the whole key')
  t.equal(hashTagOf('a:{}:b'), 'a:{}:b', 'an empty tag is no tag')
  t.equal(displayQueueName('{hz-agents-3}agent-dpu-1'), 'agent-dpu-1')
  t.equal(displayQueueName('plain'), 'plain')
})

t.test(
  'a client certificate for a Redis that requires one: rediss:// only, with its key',
  async (t) => {
    const dir = t.testdir({ 'c.pem': 'CERT', 'k.pem': 'KEY' })
    const files = { certFile: `${dir}/c.pem`, keyFile: `${dir}/k.pem` }
    const options = redisOptions({ url: 'rediss://h:1', ...files })
    t.match(options.tls, { cert: 'CERT', key: 'KEY' }, 'read into the TLS options')
    t.throws(() => redisOptions({ url: 'redis://h:1', ...files }), /not rediss/)
    t.throws(
      () => redisOptions({ url: 'rediss://h:1', certFile: files.certFile }),
      /both its certificate and its key/,
    )
    t.throws(
      () => redisOptions({ url: 'rediss://h:1', certFile: `${dir}/no`, keyFile: files.keyFile }),
      /cannot read the Redis client certificate/,
    )
  },
)
