/**
 * The embedded Redis: a private `redis-server` under `<dataDir>/redis`, password-protected,
 * durable (append-only file synced before each answer) and bounded, on loopback in
 * plaintext or on another address with TLS from the stack's PKI.
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

export async function startRedis(
  dataDir: string,
  opts: { port?: number; listenAddress?: string; tls?: boolean },
  pki: CertificateAuthority,
  keep: (spec: DaemonSpec) => Promise<void>,
  log: (l: string) => void,
): Promise<LocalRedis> {
  const dir = join(dataDir, 'redis')
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
        'redis',
        await pki.issueServer({ ips: serverIps(host), dnsNames: ['localhost'] }),
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
              // Clients prove who they are with the password; a certificate is welcome.
              '--tls-auth-clients',
              'optional',
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
        REDIS_MAXMEMORY,
        '--maxmemory-policy',
        'noeviction',
        '--daemonize',
        'no',
        '--logfile',
        '',
      ],
      umask: 0o077,
      logFile: join(dir, 'redis.log'),
      ready: () => redisPing({ host, port, password, ...(server ? { ca: pki.caCert } : {}) }),
    }
    await keep(spec)
    log(
      `redis-server listening on ${scheme}://${hostPart(host)}:${port} (password in ${passwordFile})`,
    )
    return {
      url: `${scheme}://default:${password}@${hostPart(host)}:${port}`,
      host,
      port,
      tls,
      ...(server ? { caFile: server.caFile } : {}),
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
function redisPing(target: { host: string; port: number; password: string; ca?: string }) {
  return new Promise<boolean>((res) => {
    const { host, port, password, ca } = target
    const socket: Socket = ca
      ? tlsConnect({ host, port, ca, ...(isIpAddress(host) ? {} : { servername: host }) })
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
