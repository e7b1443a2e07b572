/**
 * The embedded stack's security defaults: Redis with a password and an ACL file on
 * loopback, TLS only elsewhere; NB on its unix socket; SB on `pssl:` with OVN's
 * `ovn-controller` RBAC role for chassis; private files under the data dir.
 */
import { execFile } from 'node:child_process'
import { readFile, stat } from 'node:fs/promises'
import { connect } from 'node:net'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Queue } from 'bullmq'
import { Redis } from 'ioredis'
import t from 'tap'
import { PlaintextRefusedError, startLocalStack } from '../../infra/local/stack.ts'
import type { LocalStack } from '../../infra/local/types.ts'
import { OvsdbClient } from '../../lib/ovn/client.ts'
import { Database } from '../../lib/ovn/database.ts'
import { OvsdbOperationError } from '../../lib/ovn/errors.ts'
import { type SbTables, sbSchema } from '../../lib/ovn/schema/sb.generated.ts'
import { createRedis, redisOptions } from '../../lib/redis/connection.ts'
import { dummyAddress, type Teardown, tempDir } from '../helpers/stack.ts'

const run = promisify(execFile)
const sb = new Database<SbTables>(sbSchema)
const mode = async (path: string) => (await stat(path)).mode & 0o777

async function stackIn(
  t: Teardown,
  dataDir: string,
  options: Omit<Parameters<typeof startLocalStack>[0], 'dataDir'>,
) {
  const stack = await startLocalStack({ ...options, dataDir })
  t.teardown(() => stack.stop())
  return stack
}

function redisOf(stack: LocalStack) {
  if (!stack.redis) throw new Error('stack without redis')
  return stack.redis
}

/** The first reply line to PING sent without credentials (plaintext). */
function anonymousPing(port: number, host = '127.0.0.1'): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect({ port, host }, () => socket.write('PING\r\n'))
    let reply = ''
    socket.setTimeout(2000, () => {
      socket.destroy()
      resolve(reply || '(no answer)')
    })
    socket.on('data', (c: Buffer) => {
      reply += c.toString()
      if (reply.includes('\r\n')) {
        socket.destroy()
        resolve(reply.trim())
      }
    })
    socket.on('error', (e) => resolve(`(error ${e.message})`))
    socket.on('close', () => resolve(reply.trim() || '(closed)'))
  })
}

t.test('loopback Redis: a password (0600, kept), protected mode, users that survive', async (t) => {
  const dataDir = await tempDir(t)
  const first = await startLocalStack({ dataDir, ovn: false, frr: false })
  const redis = redisOf(first)
  t.equal(redis.tls, false, 'plaintext on loopback')
  t.match(redis.url, /^redis:\/\/default:[0-9a-f]{64}@127\.0\.0\.1:\d+$/, 'the URL carries it')
  const password = (await readFile(redis.passwordFile, 'utf8')).trim()
  t.ok(redis.url.includes(password), 'the password is the one in the password file')
  t.equal(await mode(redis.passwordFile), 0o600, 'password file 0600')
  t.equal(await mode(redis.aclFile), 0o600, 'ACL file 0600')
  t.equal(await mode(join(dataDir, 'redis')), 0o700, 'redis dir 0700')
  t.equal(await mode(join(dataDir, 'pki')), 0o700, 'pki dir 0700')
  t.equal(await mode(join(dataDir, 'pki', 'ca.key')), 0o600, 'CA key 0600')
  t.notMatch(await readFile(redis.aclFile, 'utf8'), password, 'the ACL file holds a hash only')

  t.match(await anonymousPing(redis.port), /^-NOAUTH/, 'no password, no service')
  const client = createRedis(redis)
  t.equal(await client.ping(), 'PONG', 'with the URL it answers')
  t.same(await client.config('GET', 'protected-mode'), ['protected-mode', 'yes'])
  await client.call('ACL', 'SETUSER', 'dpu-a', 'on', '>dpu-a-secret', '~agent-dpu-a*', '+@all')
  await client.call('ACL', 'SAVE')
  client.disconnect()
  t.equal(await mode(redis.aclFile), 0o600, 'still 0600 after ACL SAVE')
  await first.stop()

  const second = await stackIn(t, dataDir, { ovn: false, frr: false })
  t.equal(redisOf(second).url.split('@')[0], redis.url.split('@')[0], 'same password again')
  const dpu = new Redis({
    ...redisOptions(redisOf(second)),
    username: 'dpu-a',
    password: 'dpu-a-secret',
  })
  t.teardown(() => dpu.disconnect())
  t.equal(await dpu.ping(), 'PONG', 'an ACL user saved before the restart still logs in')
  const admin = createRedis(redisOf(second))
  t.teardown(() => admin.disconnect())
  t.equal(await admin.ping(), 'PONG', 'and so does the default user')
})

t.test('TLS Redis: no plaintext port, clients trust the stack CA, BullMQ works', async (t) => {
  const stack = await stackIn(t, await tempDir(t), { redis: { tls: true }, ovn: false, frr: false })
  const redis = redisOf(stack)
  t.equal(redis.tls, true)
  t.match(redis.url, /^rediss:\/\/default:[0-9a-f]{64}@127\.0\.0\.1:\d+$/)
  t.equal(redis.caFile, stack.pki.caFile, 'the CA to trust is the stack PKI’s')
  t.match(await anonymousPing(redis.port), /^\(|^$/, 'plaintext gets no answer on the TLS port')
  const { stdout } = await run('redis-cli', [
    '-u',
    redis.url,
    '--no-auth-warning',
    '--tls',
    '--cacert',
    stack.pki.caFile,
    'config',
    'get',
    'port',
  ])
  t.match(stdout, /^port\n0$/m, 'the plaintext port is off')

  const client = createRedis(redis)
  t.teardown(() => client.disconnect())
  t.equal(await client.ping(), 'PONG', 'ioredis over TLS with the stack CA')
  const queue = new Queue('tls-probe', {
    connection: createRedis(redis, { maxRetriesPerRequest: null }),
  })
  t.teardown(async () => {
    await queue.close()
    await queue.disconnect()
  })
  await queue.add('probe', { n: 1 })
  t.equal(await queue.count(), 1, 'a BullMQ queue over the same options')

  const untrusting = new Redis({
    ...redisOptions(redis),
    tls: {},
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    lazyConnect: true,
  })
  const errors: string[] = []
  untrusting.on('error', (e: Error) => errors.push(e.message))
  await t.rejects(untrusting.connect(), 'a client that does not trust the CA is refused')
  t.match(errors.join('\n'), /self-signed|unable to (get|verify)/i, 'for the certificate')
  untrusting.disconnect()
})

t.test(
  "the agents' Redis: its own, bounded, and over TLS a client certificate required",
  async (t) => {
    const stack = await stackIn(t, await tempDir(t), {
      redis: true,
      agentsRedis: { tls: true },
      ovn: false,
      frr: false,
    })
    const agents = stack.agentsRedis
    if (!agents?.certFile || !agents.keyFile) throw new Error("no agents' Redis client certificate")
    t.not(agents.port, redisOf(stack).port, "the agents' Redis is a server of its own")
    t.equal(agents.tls, true)
    const client = createRedis(agents)
    t.teardown(() => client.disconnect())
    t.equal(await client.ping(), 'PONG', "the controller's certificate from the stack CA is taken")
    const config = async (name: string) =>
      ((await client.call('CONFIG', 'GET', name)) as string[])[1]
    t.equal(await config('maxmemory'), String(512 * 1024 * 1024), 'its own memory bound')
    t.equal(await config('maxmemory-policy'), 'noeviction')
    t.equal(await config('proto-max-bulk-len'), String(1024 * 1024), 'one value at most 1 MB')
    t.equal(await config('tls-auth-clients'), 'yes', 'a client certificate required')
    const { certFile: _c, keyFile: _k, ...withoutCert } = agents
    const anonymous = new Redis({
      ...redisOptions(withoutCert),
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
      lazyConnect: true,
    })
    anonymous.on('error', () => {})
    await t.rejects(
      anonymous.connect().then(() => anonymous.ping()),
      'a client with the password but no certificate is refused',
    )
    anonymous.disconnect()
  },
)

t.test('off loopback: TLS Redis and pssl SB by default; plaintext is refused', async (t) => {
  const address = await dummyAddress(t)
  const dataDir = await tempDir(t)
  for (const [service, options] of [
    ['redis-server', { redis: { listenAddress: address, tls: false }, ovn: false }],
    ['ovsdb-server(sb)', { redis: false, ovn: { listenAddress: address, tls: false } }],
  ] as const) {
    const error = await startLocalStack({ dataDir, frr: false, ...options }).catch(
      (e: unknown) => e,
    )
    t.type(error, PlaintextRefusedError, `${service}: plaintext on ${address} is refused`)
    t.match((error as Error).message, `${service} would serve plaintext on ${address}`)
  }

  const stack = await stackIn(t, dataDir, {
    redis: { listenAddress: address },
    ovn: { listenAddress: address },
    frr: false,
  })
  const redis = redisOf(stack)
  t.match(
    redis.url,
    new RegExp(`^rediss://default:[0-9a-f]{64}@${address.replace(/\./g, '\\.')}:\\d+$`),
  )
  const client = createRedis(redis)
  t.teardown(() => client.disconnect())
  t.equal(await client.ping(), 'PONG', `TLS Redis on ${address}, the server cert names it`)
  t.match(stack.ovn?.sb.remote, `ssl:${address}:`, 'SB is an ssl: remote')
  t.same(Object.keys(stack.ovn?.nb ?? {}), ['unix'], 'NB has no network remote')
  const { stdout } = await run('ovn-sbctl', [
    `--db=${stack.ovn?.sb.unix}`,
    '--bare',
    '--columns=role,target',
    'list',
    'Connection',
  ])
  t.match(stdout, /ovn-controller/, 'the SB Connection carries the ovn-controller role')
})

t.test('SB RBAC: a chassis (client cert CN) writes only its own rows', async (t) => {
  const stack = await stackIn(t, await tempDir(t), { redis: false, ovn: { tls: true }, frr: false })
  const ovn = stack.ovn
  if (!ovn) throw new Error('stack without ovn')
  t.match(ovn.sb.remote, /^ssl:127\.0\.0\.1:\d+$/)

  // dpu-b registers over the unix socket (no role, as an operator tool would).
  const local = await OvsdbClient.connect(ovn.sb.unix)
  t.teardown(() => local.close())
  await local.transact(sb.name, [
    sb.insert(
      'Encap',
      { type: 'geneve', ip: '10.0.0.2', chassis_name: 'dpu-b', options: { csum: 'true' } },
      'eb',
    ),
    sb.insert('Chassis', { name: 'dpu-b', hostname: 'dpu-b', encaps: ['eb'] }),
  ])

  const issued = await stack.pki.writeIssued(
    'dpu-a',
    await stack.pki.issueClient({ commonName: 'dpu-a' }),
  )
  const tls = { ca: issued.caFile, cert: issued.certFile, key: issued.keyFile }
  const chassis = await OvsdbClient.connect(ovn.sb.remote, { tls })
  t.teardown(() => chassis.close())

  await chassis.transact(sb.name, [
    sb.insert(
      'Encap',
      { type: 'geneve', ip: '10.0.0.1', chassis_name: 'dpu-a', options: { csum: 'true' } },
      'ea',
    ),
    sb.insert('Chassis', { name: 'dpu-a', hostname: 'dpu-a', encaps: ['ea'] }),
  ])
  t.pass('dpu-a inserts its own Chassis and Encap')
  await chassis.transact(sb.name, [
    sb.update('Chassis', [['name', '==', 'dpu-a']], {
      other_config: { 'ovn-bridge-mappings': 'physnet:br-phy' },
    }),
  ])
  t.pass('and updates its own Chassis row (columns RBAC lets a chassis write)')

  const refused = async (what: string, ops: Parameters<OvsdbClient['transact']>[1]) => {
    const error = await chassis.transact(sb.name, ops).catch((e: unknown) => e)
    t.type(error, OvsdbOperationError, what)
    t.match(
      error,
      { error: 'permission error', details: /RBAC rules for client "dpu-a"/ },
      `${what}: RBAC says why`,
    )
  }
  await refused(
    'it cannot change dpu-b’s Chassis',
    // other_config is a column RBAC lets a chassis write, in its own row only.
    [sb.update('Chassis', [['name', '==', 'dpu-b']], { other_config: { stolen: 'yes' } })],
  )
  await refused('nor insert a Chassis named for another', [
    sb.insert('Encap', { type: 'geneve', ip: '10.0.0.3', chassis_name: 'dpu-a' }, 'ec'),
    sb.insert('Chassis', { name: 'dpu-c', hostname: 'x', encaps: ['ec'] }),
  ])
  await refused('nor write a table RBAC keeps from chassis', [
    sb.update('SB_Global', [], { options: { hacked: 'yes' } }),
  ])
  const [rows] = await local.transact(sb.name, [sb.select('Chassis', [['name', '==', 'dpu-b']])])
  t.same(sb.decodeRows('Chassis', rows?.rows)[0]?.other_config, {}, 'dpu-b is untouched')
})
