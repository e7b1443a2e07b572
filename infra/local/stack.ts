import { execFile } from 'node:child_process'
import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises'
import { connect } from 'node:net'
import { join, resolve } from 'node:path'
import { promisify } from 'node:util'
import { HydrazineError } from '../../lib/errors.ts'
import {
  type Daemon,
  type DaemonSpec,
  isAlive,
  requireBinary,
  startDaemon,
} from '../../lib/process/daemon.ts'
import { DaemonStartError } from '../../lib/process/errors.ts'
import { canConnect, freePort } from '../../lib/process/ports.ts'
import { startFrrDaemons } from './frr.ts'
import type { DaemonExit, FrrInstance, LocalStack, OvnCentral } from './types.ts'

export type { DaemonExit, FrrInstance, LocalStack, OvnCentral } from './types.ts'

const run = promisify(execFile)

export interface LocalStackOptions {
  /** Every daemon keeps its files under this directory (created if missing). */
  readonly dataDir: string
  /** Start a private Redis (default true). `port` is preferred, not required. */
  readonly redis?: boolean | { readonly port?: number; readonly listenAddress?: string }
  /**
   * Start an OVN central (default true). `listenAddress` is where the TCP remotes bind
   * (remote chassis connect there); ports are preferred, 0 or absent lets the kernel pick.
   */
  readonly ovn?:
    | boolean
    | { readonly listenAddress?: string; readonly nbPort?: number; readonly sbPort?: number }
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
    const redisOpt = options.redis ?? true
    const redis = redisOpt
      ? await startRedis(dataDir, typeof redisOpt === 'object' ? redisOpt : {}, track, log)
      : undefined
    const ovnOpt = options.ovn ?? true
    const ovn = ovnOpt
      ? await startOvnCentral(dataDir, typeof ovnOpt === 'object' ? ovnOpt : {}, track, log)
      : undefined
    const frrOpt = options.frr ?? true
    const frr = frrOpt
      ? await startFrr(dataDir, typeof frrOpt === 'object' ? frrOpt : {}, track, log)
      : undefined
    return {
      dataDir,
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

async function startRedis(
  dataDir: string,
  opts: { port?: number; listenAddress?: string },
  track: Track,
  log: (l: string) => void,
) {
  const dir = join(dataDir, 'redis')
  await mkdir(dir, { recursive: true })
  return withPortRetry(async (attempt) => {
    const host = opts.listenAddress ?? '127.0.0.1'
    const port = await pickPort(attempt === 1 ? opts.port : undefined, log, 'redis')
    const spec: DaemonSpec = {
      name: 'redis-server',
      command: 'redis-server',
      args: [
        '--port',
        String(port),
        '--bind',
        host,
        '--dir',
        dir,
        '--appendonly',
        'yes',
        '--appendfsync',
        'everysec',
        '--save',
        '',
        '--maxmemory-policy',
        'noeviction',
        // Protected mode refuses every client not on loopback (DPU agents on the fabric).
        ...(host === '127.0.0.1' || host === '::1' ? [] : ['--protected-mode', 'no']),
        '--daemonize',
        'no',
        '--logfile',
        '',
      ],
      logFile: join(dir, 'redis.log'),
      ready: () => redisPing(port, host),
    }
    track(await startDaemon(spec))
    const hostPart = host.includes(':') ? `[${host}]` : host
    log(`redis-server listening on ${hostPart}:${port}`)
    return { url: `redis://${hostPart}:${port}`, port }
  })
}

/** Sends PING and expects +PONG (not -LOADING while the AOF is replayed). */
function redisPing(port: number, host: string): Promise<boolean> {
  return new Promise((res) => {
    const socket = connect({ port, host })
    let reply = ''
    const done = (ok: boolean) => {
      socket.destroy()
      res(ok)
    }
    socket.setTimeout(500, () => done(false))
    socket.once('error', () => done(false))
    socket.once('connect', () => socket.write('PING\r\n'))
    socket.on('data', (chunk) => {
      reply += chunk.toString()
      if (reply.includes('\r\n')) done(reply.startsWith('+PONG'))
    })
  })
}

const OVN_SCHEMAS = { nb: '/usr/share/ovn/ovn-nb.ovsschema', sb: '/usr/share/ovn/ovn-sb.ovsschema' }

async function startOvnCentral(
  dataDir: string,
  opts: { listenAddress?: string; nbPort?: number; sbPort?: number },
  track: Track,
  log: (l: string) => void,
): Promise<OvnCentral> {
  const dir = join(dataDir, 'ovn')
  await mkdir(dir, { recursive: true })
  requireBinary('ovsdb-tool')
  requireBinary('ovn-nbctl')
  const address = opts.listenAddress ?? '127.0.0.1'
  const env = { OVS_RUNDIR: dir, OVS_DBDIR: dir, OVS_LOGDIR: dir, OVN_RUNDIR: dir, OVN_LOGDIR: dir }

  const startDb = async (db: 'nb' | 'sb', preferred: number | undefined) => {
    const file = join(dir, `${db}.db`)
    const schema = OVN_SCHEMAS[db]
    if (!(await exists(file))) await run('ovsdb-tool', ['create', file, schema])
    else if ((await run('ovsdb-tool', ['needs-conversion', file, schema])).stdout.trim() === 'yes')
      await run('ovsdb-tool', ['convert', file, schema])
    const socket = join(dir, `${db}.sock`)
    const logFile = join(dir, `${db}.log`)
    const port = preferred ? await pickPort(preferred, log, `ovsdb-server(${db})`) : 0
    const logStart = (await readFile(logFile, 'utf8').catch(() => '')).length
    track(
      await startDaemon({
        name: `ovsdb-server(${db})`,
        command: 'ovsdb-server',
        args: [
          file,
          `--remote=punix:${socket}`,
          `--remote=ptcp:${port}:${address}`,
          `--unixctl=${join(dir, `${db}.ctl`)}`,
          `--pidfile=${join(dir, `${db}.pid`)}`,
          `--log-file=${logFile}`,
        ],
        env,
        logFile: join(dir, `${db}.out`),
        tailFiles: [logFile],
        ready: async () =>
          (await canConnect({ path: socket })) &&
          (port
            ? await canConnect({ port, host: address })
            : (await listeningPort(logFile, logStart)) !== undefined),
      }),
    )
    const bound = port || (await listeningPort(logFile, logStart))
    if (bound === undefined)
      throw new DaemonStartError(`ovsdb-server(${db})`, 'no TCP port', '', false)
    log(`ovsdb-server(${db}) on unix:${socket} and tcp:${address}:${bound}`)
    return { unix: `unix:${socket}`, tcp: `tcp:${address}:${bound}` }
  }

  const nb = await startDb('nb', opts.nbPort)
  const sb = await startDb('sb', opts.sbPort)
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
