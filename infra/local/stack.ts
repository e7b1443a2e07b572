import { chmod, mkdir, readFile, rm } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import { HydrazineError } from '../../lib/errors.ts'
import { writeFileAtomic } from '../../lib/files/index.ts'
import type { OvnInstall } from '../../lib/ovn/install.ts'
import { openCertificateAuthority } from '../../lib/pki/index.ts'
import { type Daemon, type DaemonSpec, startDaemon } from '../../lib/process/daemon.ts'
import { isAlive } from '../../lib/process/pids.ts'
import { startFrrDaemons } from './frr.ts'
import { pickPort, withPortRetry } from './net.ts'
import { startOvnCentral } from './ovn-central.ts'
import { startRedis } from './redis.ts'
import type { DaemonExit, FrrInstance, LocalStack } from './types.ts'

export { PlaintextRefusedError } from './net.ts'
export { AGENTS_REDIS_MAX_BULK, AGENTS_REDIS_MAXMEMORY, REDIS_MAXMEMORY } from './redis.ts'
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
   * Start a second private Redis for the DPU agents' queues and heartbeats (default false;
   * `npm start` always does): its own memory bound (`AGENTS_REDIS_MAXMEMORY`), values
   * bounded (`AGENTS_REDIS_MAX_BULK`), and with TLS a client certificate required (the
   * controller's is issued from the stack's CA). Options as for `redis`.
   */
  readonly agentsRedis?:
    | boolean
    | { readonly port?: number; readonly listenAddress?: string; readonly tls?: boolean }
  /**
   * Start an OVN central (default true). NB is served on its unix socket only. SB is on
   * its unix socket and on `listenAddress` (where remote chassis connect): plaintext TCP
   * on loopback; with `tls` (default: `listenAddress` is not loopback) `pssl:` with OVN's
   * `ovn-controller` RBAC role. `sbPort` is preferred, 0 or absent picks a free one.
   * `install` is the OVN it runs (default the system's; lib/ovn/install.ts).
   */
  readonly ovn?:
    | boolean
    | {
        readonly listenAddress?: string
        readonly sbPort?: number
        readonly tls?: boolean
        readonly install?: OvnInstall
      }
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
    const agentsOpt = options.agentsRedis ?? false
    const agentsRedis = agentsOpt
      ? await startRedis(
          dataDir,
          typeof agentsOpt === 'object' ? agentsOpt : {},
          pki,
          keep,
          log,
          'agents',
        )
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
      ...(agentsRedis ? { agentsRedis } : {}),
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
  await writeFileAtomic(pidFile, `${process.pid}\n`)
}

/** Tries to start a dead embedded daemon again before the stack reports it crashed. */
const MAX_RESTARTS = 8
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

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
  const listen = opts.listenAddress ?? (opts.netns ? undefined : '127.0.0.1')
  const common = {
    dir,
    configs: {
      zebra: `hostname ${opts.hostname ?? 'hydrazine'}\n`,
      bgpd:
        opts.bgpdConfig ??
        'router bgp 65000\n bgp router-id 127.0.0.1\n no bgp network import-check\nexit\n',
    },
    pathspace: `hz${process.pid}${frrInstances++}`,
    ...(opts.netns ? { netns: opts.netns } : {}),
    // A restarted bgpd starts from bgpd.conf, which Hydrazine saves after each change.
    supervise: keep,
  }
  await startFrrDaemons({ ...common, daemons: ['zebra'] })
  // bgpd's port, picked free, may be taken before bgpd binds it: then another is picked.
  const bgpPort = await withPortRetry(async (attempt) => {
    const port = opts.netns
      ? (opts.bgpPort ?? 179)
      : await pickPort(attempt === 1 ? opts.bgpPort : undefined, log, 'bgpd')
    await startFrrDaemons({
      ...common,
      daemons: ['bgpd'],
      // Up once the port is bound too: a port taken meanwhile makes bgpd exit a moment
      // after its vty answers.
      ...(listen && /^router bgp /m.test(common.configs.bgpd)
        ? { listening: { bgpd: { host: listen, port } } }
        : {}),
      extraArgs: {
        bgpd: [
          '-p',
          String(port),
          ...(listen ? ['-l', listen] : []),
          ...(opts.installRoutes ? [] : ['-n']),
        ],
      },
    })
    return port
  })
  await startFrrDaemons({ ...common, daemons: ['staticd'] })
  log(`FRR (zebra, bgpd, staticd) up; vtysh --vty_socket ${dir}`)
  return { vtyDir: dir, bgpPort, bgpdConfig: join(dir, 'bgpd.conf') }
}
