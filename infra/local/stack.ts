import { execFile } from 'node:child_process'
import { createHash, randomBytes } from 'node:crypto'
import { chmod, mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { connect, type Socket } from 'node:net'
import { networkInterfaces } from 'node:os'
import { join, resolve } from 'node:path'
import { connect as tlsConnect } from 'node:tls'
import { promisify } from 'node:util'
import { HydrazineError } from '../../lib/errors.ts'
import {
  type CertificateAuthority,
  openCertificateAuthority,
  writePrivate,
} from '../../lib/pki/index.ts'
import {
  type Daemon,
  type DaemonSpec,
  isAlive,
  requireBinary,
  startDaemon,
} from '../../lib/process/daemon.ts'
import { DaemonStartError } from '../../lib/process/errors.ts'
import { canConnect, freePort, isLoopback } from '../../lib/process/ports.ts'
import { startFrrDaemons } from './frr.ts'
import type { DaemonExit, FrrInstance, LocalRedis, LocalStack, OvnCentral } from './types.ts'

export type { DaemonExit, FrrInstance, LocalRedis, LocalStack, OvnCentral } from './types.ts'

const run = promisify(execFile)

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

/** A daemon was asked to serve plaintext on an address other machines can reach. */
export class PlaintextRefusedError extends HydrazineError {
  constructor(
    readonly service: string,
    readonly address: string,
  ) {
    super(
      'PLAINTEXT_REFUSED',
      `${service} would serve plaintext on ${address}: plaintext is only allowed on loopback`,
    )
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

  const daemons: Daemon[] = []
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
      ? await startRedis(dataDir, typeof redisOpt === 'object' ? redisOpt : {}, pki, track, log)
      : undefined
    const ovnOpt = options.ovn ?? true
    const ovn = ovnOpt
      ? await startOvnCentral(dataDir, typeof ovnOpt === 'object' ? ovnOpt : {}, pki, track, log)
      : undefined
    const frrOpt = options.frr ?? true
    const frr = frrOpt
      ? await startFrr(dataDir, typeof frrOpt === 'object' ? frrOpt : {}, track, log)
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

/** A preferred port if it is free, else one the kernel says is free. */
async function pickPort(preferred: number | undefined, log: (l: string) => void, what: string) {
  if (preferred && !(await canConnect({ port: preferred }))) return preferred
  if (preferred) log(`${what}: port ${preferred} is taken, using a free one`)
  return freePort()
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

type Track = (d: Daemon) => Daemon

/** Whether a daemon on `address` speaks TLS: asked for, or else off loopback; never plaintext off it. */
function wantsTls(service: string, address: string, tls: boolean | undefined): boolean {
  if (tls === false && !isLoopback(address)) throw new PlaintextRefusedError(service, address)
  return tls ?? !isLoopback(address)
}

/** The IP SANs of a server on `address`: that address, or every local one for a wildcard. */
function serverIps(address: string): string[] {
  if (address !== '0.0.0.0' && address !== '::') return [address]
  const all = Object.values(networkInterfaces())
    .flat()
    .map((i) => i?.address)
    .filter((a): a is string => a !== undefined && !a.startsWith('fe80'))
  return [...new Set(all)]
}

const hostPart = (host: string) => (host.includes(':') ? `[${host}]` : host)

async function startRedis(
  dataDir: string,
  opts: { port?: number; listenAddress?: string; tls?: boolean },
  pki: CertificateAuthority,
  track: Track,
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
        '--appendfsync',
        'everysec',
        '--save',
        '',
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
    track(await startDaemon(spec))
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

const OVN_SCHEMAS = { nb: '/usr/share/ovn/ovn-nb.ovsschema', sb: '/usr/share/ovn/ovn-sb.ovsschema' }

async function startOvnCentral(
  dataDir: string,
  opts: { listenAddress?: string; sbPort?: number; tls?: boolean },
  pki: CertificateAuthority,
  track: Track,
  log: (l: string) => void,
): Promise<OvnCentral> {
  const dir = join(dataDir, 'ovn')
  await mkdir(dir, { recursive: true, mode: 0o700 })
  await chmod(dir, 0o700)
  requireBinary('ovsdb-tool')
  requireBinary('ovn-nbctl')
  const address = opts.listenAddress ?? '127.0.0.1'
  const tls = wantsTls('ovsdb-server(sb)', address, opts.tls)
  const env = { OVS_RUNDIR: dir, OVS_DBDIR: dir, OVS_LOGDIR: dir, OVN_RUNDIR: dir, OVN_LOGDIR: dir }

  /** Starts one database's server on its unix socket plus `remotes`; resolves the socket. */
  const startDb = async (
    db: 'nb' | 'sb',
    remotes: readonly string[],
    ready: (logFile: string, logStart: number) => Promise<boolean> = async () => true,
  ) => {
    const file = join(dir, `${db}.db`)
    const schema = OVN_SCHEMAS[db]
    if (!(await exists(file))) await run('ovsdb-tool', ['create', file, schema])
    else if ((await run('ovsdb-tool', ['needs-conversion', file, schema])).stdout.trim() === 'yes')
      await run('ovsdb-tool', ['convert', file, schema])
    const socket = join(dir, `${db}.sock`)
    const logFile = join(dir, `${db}.log`)
    const logStart = (await readFile(logFile, 'utf8').catch(() => '')).length
    track(
      await startDaemon({
        name: `ovsdb-server(${db})`,
        command: 'ovsdb-server',
        args: [
          file,
          `--remote=punix:${socket}`,
          ...remotes,
          `--unixctl=${join(dir, `${db}.ctl`)}`,
          `--pidfile=${join(dir, `${db}.pid`)}`,
          `--log-file=${logFile}`,
        ],
        env,
        umask: 0o077,
        logFile: join(dir, `${db}.out`),
        tailFiles: [logFile],
        ready: async () => (await canConnect({ path: socket })) && (await ready(logFile, logStart)),
      }),
    )
    return { unix: `unix:${socket}`, logFile, logStart }
  }

  // NB: the controller runs on this machine; nothing else needs the NB.
  const nbDb = await startDb('nb', [])
  const nb = { unix: nbDb.unix }
  log(`ovsdb-server(nb) on ${nb.unix}`)

  let sb: OvnCentral['sb']
  if (tls) {
    // Chassis connect over TLS with a certificate from our CA and get the ovn-controller
    // role (OVN RBAC: a chassis may write only its own rows). The remote and its role
    // live in the SB's Connection table; the key and certificates in its SSL table.
    const port = opts.sbPort
      ? await pickPort(opts.sbPort, log, 'ovsdb-server(sb)')
      : await freePort(address)
    const server = await pki.writeIssued(
      'ovn-sb',
      await pki.issueServer({ ips: serverIps(address), dnsNames: ['localhost'] }),
    )
    const sbDb = await startDb('sb', [
      '--remote=db:OVN_Southbound,SB_Global,connections',
      '--private-key=db:OVN_Southbound,SSL,private_key',
      '--certificate=db:OVN_Southbound,SSL,certificate',
      '--ca-cert=db:OVN_Southbound,SSL,ca_cert',
    ])
    const target = `pssl:${port}:${hostPart(address)}`
    await run(
      'ovn-sbctl',
      [
        `--db=${sbDb.unix}`,
        '--timeout=10',
        '--',
        'set-ssl',
        server.keyFile,
        server.certFile,
        server.caFile,
        '--',
        'set-connection',
        'role=ovn-controller',
        target,
      ],
      { env: { ...process.env, ...env } },
    )
    const deadline = Date.now() + 10_000
    while (!(await canConnect({ port, host: address }))) {
      if (Date.now() > deadline) {
        throw new DaemonStartError('ovsdb-server(sb)', `${target} does not listen`, '', false)
      }
      await new Promise((r) => setTimeout(r, 50))
    }
    sb = { unix: sbDb.unix, remote: `ssl:${hostPart(address)}:${port}` }
    log(`ovsdb-server(sb) on ${sb.unix} and ${sb.remote} (role ovn-controller)`)
  } else {
    const preferred = opts.sbPort ? await pickPort(opts.sbPort, log, 'ovsdb-server(sb)') : 0
    const sbDb = await startDb(
      'sb',
      [`--remote=ptcp:${preferred}:${address}`],
      async (logFile, logStart) =>
        preferred
          ? canConnect({ port: preferred, host: address })
          : (await listeningPort(logFile, logStart)) !== undefined,
    )
    const bound = preferred || (await listeningPort(sbDb.logFile, sbDb.logStart))
    if (bound === undefined)
      throw new DaemonStartError('ovsdb-server(sb)', 'no TCP port', '', false)
    sb = { unix: sbDb.unix, remote: `tcp:${hostPart(address)}:${bound}` }
    log(`ovsdb-server(sb) on ${sb.unix} and ${sb.remote}`)
  }

  track(
    await startDaemon({
      name: 'ovn-northd',
      command: 'ovn-northd',
      args: [
        `--ovnnb-db=${nb.unix}`,
        `--ovnsb-db=${sb.unix}`,
        `--unixctl=${join(dir, 'northd.ctl')}`,
        `--pidfile=${join(dir, 'northd.pid')}`,
        `--log-file=${join(dir, 'northd.log')}`,
      ],
      env,
      umask: 0o077,
      logFile: join(dir, 'northd.out'),
      tailFiles: [join(dir, 'northd.log')],
      ready: async () => {
        await run('ovn-nbctl', [`--db=${nb.unix}`, '--timeout=5', '--wait=sb', 'sync'], {
          env: { ...process.env, ...env },
        })
        return true
      },
      readyTimeoutMs: 30_000,
    }),
  )
  log('ovn-northd is compiling NB into SB')
  return { nb, sb, runDir: dir }
}

/** The port an ovsdb-server reported binding since `from` in its log ("listening on port N"). */
async function listeningPort(logFile: string, from: number): Promise<number | undefined> {
  const text = (await readFile(logFile, 'utf8').catch(() => '')).slice(from)
  const match = /listening on port (\d+)/.exec(text)
  return match?.[1] ? Number(match[1]) : undefined
}

async function exists(path: string): Promise<boolean> {
  return stat(path).then(
    () => true,
    () => false,
  )
}

let frrInstances = 0

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
  track: Track,
  log: (l: string) => void,
): Promise<FrrInstance> {
  const dir = join(dataDir, 'frr')
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
    started: track,
  })
  log(`FRR (zebra, bgpd, staticd) up; vtysh --vty_socket ${dir}`)
  return { vtyDir: dir, bgpPort, bgpdConfig: join(dir, 'bgpd.conf') }
}
