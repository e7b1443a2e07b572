/**
 * The embedded Redises: private `redis-server`s, password-protected, durable (append-only
 * file synced before each answer) and bounded, on loopback in plaintext or on another
 * address with TLS from the stack's PKI. The control plane's store lives in one
 * (`<dataDir>/redis`); the DPU agents' queues and heartbeats in the other
 * (`<dataDir>/agents-redis`), with its own memory bound and a bound on any one value, so
 * that what a DPU writes there can never make the store refuse a write.
 */
import { createHash, randomBytes } from 'node:crypto'
import { chmod, mkdir, readFile } from 'node:fs/promises'
import { connect, type Socket } from 'node:net'
import { join } from 'node:path'
import { connect as tlsConnect } from 'node:tls'
import { type CertificateAuthority, writePrivate } from '../../lib/pki/index.ts'
import type { DaemonSpec } from '../../lib/process/daemon.ts'
import { hostPart, isIpAddress, pickPort, serverIps, wantsTls, withPortRetry } from './net.ts'
import type { LocalRedis } from './types.ts'

/** The embedded Redis's memory bound (`maxmemory`), far above what 10,000 hosts use. */
export const REDIS_MAXMEMORY = '2gb'

/**
 * The agents' Redis's memory bound: every DPU's queue and heartbeat (a few KB per host
 * job kept, ~1 KB per beat), far below the store's so that both fit one machine.
 */
export const AGENTS_REDIS_MAXMEMORY = '512mb'

/**
 * The longest value (bulk string) the agents' Redis takes, whole or grown by `SETRANGE` /
 * `APPEND`: a job's payload or ack and a beat are tens of KB; 1 MB is Redis's least.
 */
export const AGENTS_REDIS_MAX_BULK = '1mb'

/** The controller's client certificate's CN at the agents' Redis. */
const CONTROLLER_CLIENT = 'hydrazine-controller'

/** Which of the two embedded Redises. */
export type RedisRole = 'store' | 'agents'

export async function startRedis(
  dataDir: string,
  opts: { port?: number; listenAddress?: string; tls?: boolean },
  pki: CertificateAuthority,
  keep: (spec: DaemonSpec) => Promise<void>,
  log: (l: string) => void,
  role: RedisRole = 'store',
): Promise<LocalRedis> {
  const agents = role === 'agents'
  const dir = join(dataDir, agents ? 'agents-redis' : 'redis')
  await mkdir(dir, { recursive: true, mode: 0o700 })
  await chmod(dir, 0o700)
  const host = opts.listenAddress ?? '127.0.0.1'
  const tls = wantsTls('redis-server', host, opts.tls)
  const passwordFile = join(dir, 'password')
  const password = await ensureSecret(passwordFile)
  const aclFile = join(dir, 'users.acl')
  await writeDefaultUser(aclFile, password)
  const server = tls
    ? await pki.writeIssued(
        agents ? 'agents-redis' : 'redis',
        await pki.issueServer({ ips: serverIps(host), dnsNames: ['localhost'] }),
      )
    : undefined
  // The agents' Redis over TLS takes only clients with a certificate from the stack's CA:
  // DPUs show their identity, the controller this one.
  const client =
    server && agents
      ? await pki.writeIssued(
          'agents-redis-client',
          await pki.issueClient({ commonName: CONTROLLER_CLIENT }),
        )
      : undefined
  return withPortRetry(async (attempt) => {
    const port = await pickPort(attempt === 1 ? opts.port : undefined, log, 'redis')
    const scheme = tls ? 'rediss' : 'redis'
    const spec: DaemonSpec = {
      name: 'redis-server',
      command: 'redis-server',
      args: [
        ...(server
          ? [
              '--port',
              '0',
              '--tls-port',
              String(port),
              '--tls-cert-file',
              server.certFile,
              '--tls-key-file',
              server.keyFile,
              '--tls-ca-cert-file',
              server.caFile,
              // The store's clients prove who they are with the password (a certificate is
              // welcome); the agents' Redis, which DPUs reach, requires a certificate too.
              '--tls-auth-clients',
              agents ? 'yes' : 'optional',
            ]
          : ['--port', String(port)]),
        '--bind',
        host,
        '--dir',
        dir,
        // Users and their hashed passwords; the `default` user is written before each start.
        '--aclfile',
        aclFile,
        '--protected-mode',
        'yes',
        '--appendonly',
        'yes',
        // A request answered 202 is on disk: a machine crash loses nothing accepted.
        '--appendfsync',
        'always',
        '--save',
        '',
        // Full, Redis refuses writes (the API answers 503) instead of growing until killed.
        '--maxmemory',
        agents ? AGENTS_REDIS_MAXMEMORY : REDIS_MAXMEMORY,
        '--maxmemory-policy',
        'noeviction',
        // No one value grows past this, whoever writes it (a DPU may write its own keys).
        ...(agents ? ['--proto-max-bulk-len', AGENTS_REDIS_MAX_BULK] : []),
        '--daemonize',
        'no',
        '--logfile',
        '',
      ],
      umask: 0o077,
      logFile: join(dir, 'redis.log'),
      ready: async () =>
        redisPing({
          host,
          port,
          password,
          ...(server ? { ca: pki.caCert } : {}),
          ...(client
            ? {
                cert: await readFile(client.certFile, 'utf8'),
                key: await readFile(client.keyFile, 'utf8'),
              }
            : {}),
        }),
    }
    await keep(spec)
    log(
      `${agents ? "agents' " : ''}redis-server listening on ${scheme}://${hostPart(host)}:${port} (password in ${passwordFile})`,
    )
    return {
      url: `${scheme}://default:${password}@${hostPart(host)}:${port}`,
      host,
      port,
      tls,
      ...(server ? { caFile: server.caFile } : {}),
      ...(client ? { certFile: client.certFile, keyFile: client.keyFile } : {}),
      passwordFile,
      aclFile,
    }
  })
}

/** A random secret kept in `file` (0600): made once, the same on every later start. */
async function ensureSecret(file: string): Promise<string> {
  const existing = (await readFile(file, 'utf8').catch(() => '')).trim()
  if (/^[0-9a-f]{64}$/.test(existing)) {
    await chmod(file, 0o600)
    return existing
  }
  const secret = randomBytes(32).toString('hex')
  await writePrivate(file, `${secret}\n`)
  return secret
}

/**
 * Makes `aclFile` (0600) hold the `default` user with `password` (as its SHA-256, never
 * in clear) and every other user it held: Redis replaces `requirepass` with what an ACL
 * file says, and `ACL SAVE` rewrites the file with every user, ours included.
 */
async function writeDefaultUser(aclFile: string, password: string): Promise<void> {
  const others = (await readFile(aclFile, 'utf8').catch(() => ''))
    .split('\n')
    .filter((line) => line.trim() !== '' && !/^\s*user\s+default\s/.test(line))
  const hash = createHash('sha256').update(password).digest('hex')
  const line = `user default on sanitize-payload #${hash} ~* &* +@all`
  await writePrivate(aclFile, `${[line, ...others].join('\n')}\n`)
}

/**
 * AUTH + PING (over TLS when `ca` is given); true on +PONG, false on anything else,
 * -LOADING while the AOF is replayed included.
 */
function redisPing(target: {
  host: string
  port: number
  password: string
  ca?: string
  cert?: string
  key?: string
}) {
  return new Promise<boolean>((res) => {
    const { host, port, password, ca, cert, key } = target
    const socket: Socket = ca
      ? tlsConnect({
          host,
          port,
          ca,
          ...(cert && key ? { cert, key } : {}),
          ...(isIpAddress(host) ? {} : { servername: host }),
        })
      : connect({ port, host })
    let reply = ''
    const done = (ok: boolean) => {
      socket.destroy()
      res(ok)
    }
    const resp = (...args: string[]) =>
      `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`
    socket.setTimeout(500, () => done(false))
    socket.once('error', () => done(false))
    socket.once(ca ? 'secureConnect' : 'connect', () =>
      socket.write(resp('AUTH', 'default', password) + resp('PING')),
    )
    socket.on('data', (chunk) => {
      reply += chunk.toString()
      const lines = reply.split('\r\n')
      if (lines.length >= 3) done(lines[0] === '+OK' && lines[1] === '+PONG')
      else if (reply.startsWith('-')) done(false)
    })
  })
}
