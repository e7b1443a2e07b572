import { createHash, randomBytes } from 'node:crypto'
import { chmod, mkdir, readFile, rm, writeFile } from 'node:fs/promises'
import { connect, type Socket } from 'node:net'
import { join, resolve } from 'node:path'
import { connect as tlsConnect } from 'node:tls'
import { HydrazineError } from '../../lib/errors.ts'
import {
  type CertificateAuthority,
  openCertificateAuthority,
  writePrivate,
} from '../../lib/pki/index.ts'
import { type Daemon, type DaemonSpec, isAlive, startDaemon } from '../../lib/process/daemon.ts'
import { DaemonStartError } from '../../lib/process/errors.ts'
import { startFrrDaemons } from './frr.ts'
import { hostPart, pickPort, serverIps, wantsTls } from './net.ts'
import { startOvnCentral } from './ovn-central.ts'
import type { DaemonExit, FrrInstance, LocalRedis, LocalStack } from './types.ts'

export { PlaintextRefusedError } from './net.ts'
export type { DaemonExit, FrrInstance, LocalRedis, LocalStack, OvnCentral } from './types.ts'

export interface LocalStackOptions {
  /** Every daemon keeps its files under this directory (created if missing). */
  readonly dataDir: string
  /**
   * Start a private Redis (default true). `port` is preferred, not required. Its `default`
   * user always has a password. `tls` (default: `listenAddress` is not loopback) serves
   * TLS only; plaintext off loopback is refused (PlaintextRefusedError).
   */
  readonly redis?:
    | boolean
    | { readonly port?: number; readonly listenAddress?: string; readonly tls?: boolean }
  /**
   * Start an OVN central (default true). NB is served on its unix socket only. SB is on
   * its unix socket and on `listenAddress` (where remote chassis connect): plaintext TCP
   * on loopback; with `tls` (default: `listenAddress` is not loopback) `pssl:` with OVN's
   * `ovn-controller` RBAC role. `sbPort` is preferred, 0 or absent picks a free one.
   */
  readonly ovn?:
    | boolean
    | { readonly listenAddress?: string; readonly sbPort?: number; readonly tls?: boolean }
  /**
   * Start FRR: zebra, bgpd and staticd (default true). `bgpdConfig` is bgpd's initial
   * configuration; `netns` runs the daemons inside that network namespace.
   */
  readonly frr?:
    | boolean
    | {
        readonly bgpdConfig?: string
        readonly netns?: string
        readonly listenAddress?: string
        readonly bgpPort?: number
        /**
         * Let bgpd install learned routes into the kernel (default false: Hydrazine's
         * speaker only announces). A router that must forward, like a lab's fabric
         * router in its own namespace, sets it.
         */
        readonly installRoutes?: boolean
        /** `hostname` in zebra's configuration (default `hydrazine`). */
        readonly hostname?: string
      }
  /** Where progress lines go (default: nowhere). */
  readonly log?: (line: string) => void
}

/** The data directory is already used by another running stack. */
export class DataDirInUseError extends HydrazineError {
  constructor(
    readonly dataDir: string,
    readonly pid: number,
  ) {
    super('DATA_DIR_IN_USE', `${dataDir} is in use by process ${pid}; stop it or pick another dir`)
  }
}

const START_ATTEMPTS = 3

/**
 * Starts private instances of Redis, an OVN central (NB and SB ovsdb-server plus
 * ovn-northd) and FRR under one data directory, on free ports, and waits until each
 * answers. The daemons are tied to this process: `stop()` ends them, and so does this
 * process exiting or dying (see lib/process/reaper.sh). A daemon that exits while the
 * stack is up resolves `crashed`.
 *
 * @example
 * const stack = await startLocalStack({ dataDir: '.hydrazine', frr: false })
 * console.log(stack.redis?.url, stack.ovn?.nb.unix)
 * await stack.stop()
 */
export async function startLocalStack(options: LocalStackOptions): Promise<LocalStack> {
  const dataDir = resolve(options.dataDir)
  const log = options.log ?? (() => {})
  // Private by default: the AOF, OVN databases and logs are nobody else's business.
  await mkdir(dataDir, { recursive: true, mode: 0o700 })
  await chmod(dataDir, 0o700)
  await claimDataDir(dataDir)

  const daemons: { stop(): Promise<void> }[] = []
  let stopping = false
  let reportCrash: (exit: DaemonExit) => void = () => {}
  const crashed = new Promise<DaemonExit>((res) => {
    reportCrash = res
  })
  const track = (daemon: Daemon) => {
    daemons.push(daemon)
    void daemon.exited.then((exit) => {
      if (!stopping) {
        log(`${exit.name} exited unexpectedly (${exit.signal ?? `code ${exit.code}`})`)
        reportCrash(exit)
      }
    })
    return daemon
  }
  /**
   * Starts a daemon that is started again when it dies (after 0.5 s, doubling to 30 s):
   * losing the embedded Redis for a moment must not stop OVN and FRR, which carry the
   * tenants' traffic. Only one that does not come back in MAX_RESTARTS tries is reported.
   */
  const keep = async (spec: DaemonSpec): Promise<void> => {
    let current = await startDaemon(spec)
    let released = false
    daemons.push({
      stop: async () => {
        released = true
        await current.stop()
      },
    })
    const watch = (daemon: Daemon) =>
      void daemon.exited.then(async (exit) => {
        if (stopping || released) return
        log(
          `${exit.name} exited unexpectedly (${exit.signal ?? `code ${exit.code}`}); restarting it`,
        )
        for (let attempt = 0; attempt < MAX_RESTARTS; attempt++) {
          await sleep(Math.min(30_000, 500 * 2 ** attempt))
          if (stopping || released) return
          try {
            current = await startDaemon(spec)
            watch(current)
            log(`${spec.name} is back`)
            return
          } catch (error) {
            log(`${spec.name} did not come back: ${error instanceof Error ? error.message : error}`)
          }
        }
        reportCrash(exit)
      })
    watch(current)
  }
  const stop = async () => {
    stopping = true
    for (const daemon of [...daemons].reverse()) await daemon.stop()
    daemons.length = 0
    await rm(join(dataDir, 'stack.pid'), { force: true })
  }

  try {
    const pki = await openCertificateAuthority(join(dataDir, 'pki'))
    const redisOpt = options.redis ?? true
    const redis = redisOpt
      ? await startRedis(dataDir, typeof redisOpt === 'object' ? redisOpt : {}, pki, keep, log)
      : undefined
    const ovnOpt = options.ovn ?? true
    const ovn = ovnOpt
      ? await startOvnCentral({
          ...(typeof ovnOpt === 'object' ? ovnOpt : {}),
          dir: join(dataDir, 'ovn'),
          pki,
          log,
        }).then(({ central, daemons }) => {
          for (const daemon of daemons) track(daemon)
          return central
        })
      : undefined
    const frrOpt = options.frr ?? true
    const frr = frrOpt
      ? await startFrr(dataDir, typeof frrOpt === 'object' ? frrOpt : {}, keep, log)
      : undefined
    return {
      dataDir,
      pki,
      ...(redis ? { redis } : {}),
      ...(ovn ? { ovn } : {}),
      ...(frr ? { frr } : {}),
      stop,
      crashed,
    }
  } catch (error) {
    await stop()
    throw error
  }
}

async function claimDataDir(dataDir: string): Promise<void> {
  const pidFile = join(dataDir, 'stack.pid')
  const previous = Number.parseInt(await readFile(pidFile, 'utf8').catch(() => ''), 10)
  if (Number.isInteger(previous) && previous !== process.pid && isAlive(previous)) {
    throw new DataDirInUseError(dataDir, previous)
  }
  await writeFile(pidFile, `${process.pid}\n`)
}

/** Retries a start that failed because its port was taken between pick and bind. */
async function withPortRetry<T>(start: (attempt: number) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start(attempt)
    } catch (error) {
      if (!(error instanceof DaemonStartError && error.addressInUse) || attempt >= START_ATTEMPTS)
        throw error
    }
  }
}

/** Tries to start a dead embedded daemon again before the stack reports it crashed. */
const MAX_RESTARTS = 8
/** The embedded Redis's memory bound (`maxmemory`), far above what 10,000 hosts use. */
export const REDIS_MAXMEMORY = '2gb'

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

async function startRedis(
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

const isIpAddress = (host: string) => /^[0-9.]+$/.test(host) || host.includes(':')

let frrInstances = 0

/** The embedded FRR's directory under a data dir: configs, vty sockets, logs. */
export function embeddedFrrDir(dataDir: string): string {
  return join(dataDir, 'frr')
}

async function startFrr(
  dataDir: string,
  opts: {
    bgpdConfig?: string
    netns?: string
    listenAddress?: string
    bgpPort?: number
    installRoutes?: boolean
    hostname?: string
  },
  keep: (spec: DaemonSpec) => Promise<void>,
  log: (l: string) => void,
): Promise<FrrInstance> {
  const dir = embeddedFrrDir(dataDir)
  await mkdir(dir, { recursive: true, mode: 0o700 })
  await chmod(dir, 0o700)
  const bgpPort = opts.netns ? (opts.bgpPort ?? 179) : await pickPort(opts.bgpPort, log, 'bgpd')
  const listen = opts.listenAddress ?? (opts.netns ? undefined : '127.0.0.1')
  await startFrrDaemons({
    dir,
    daemons: ['zebra', 'bgpd', 'staticd'],
    configs: {
      zebra: `hostname ${opts.hostname ?? 'hydrazine'}\n`,
      bgpd:
        opts.bgpdConfig ??
        'router bgp 65000\n bgp router-id 127.0.0.1\n no bgp network import-check\nexit\n',
    },
    pathspace: `hz${process.pid}${frrInstances++}`,
    extraArgs: {
      bgpd: [
        '-p',
        String(bgpPort),
        ...(listen ? ['-l', listen] : []),
        ...(opts.installRoutes ? [] : ['-n']),
      ],
    },
    ...(opts.netns ? { netns: opts.netns } : {}),
    // A restarted bgpd starts from bgpd.conf, which Hydrazine saves after each change.
    supervise: keep,
  })
  log(`FRR (zebra, bgpd, staticd) up; vtysh --vty_socket ${dir}`)
  return { vtyDir: dir, bgpPort, bgpdConfig: join(dir, 'bgpd.conf') }
}
