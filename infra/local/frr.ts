/**
 * Starting private FRR daemons (zebra, bgpd, staticd) under a directory of ours: the
 * embedded stack's BGP speaker and the lab's fabric router both start FRR this way.
 *
 * FRR's daemons drop privileges to the `frr` user unless told otherwise, and that user
 * cannot reach a directory below a private one (`/root`, a `mktemp -d` dir). When we run
 * as root, the daemons run as root too (`-u root -g <vty group>`): their pid files, vty
 * sockets and logs then live wherever the data dir is, and no directory of the user's
 * has to be opened up for them.
 */
import { readFile } from 'node:fs/promises'
import { join } from 'node:path'
import { writeFileAtomic } from '../../lib/files/index.ts'
import { startupOrder } from '../../lib/frr/index.ts'
import type { Daemon, DaemonSpec } from '../../lib/process/daemon.ts'
import { startDaemon } from '../../lib/process/daemon.ts'
import { canConnect } from '../../lib/process/ports.ts'

export type FrrDaemonName = 'zebra' | 'bgpd' | 'staticd'

export interface FrrDaemonsOptions {
  /** Holds every daemon's config, pid file, vty socket and log; must exist. */
  readonly dir: string
  readonly daemons: readonly FrrDaemonName[]
  /** Each daemon's initial configuration (an empty file when absent). */
  readonly configs: Partial<Record<FrrDaemonName, string>>
  /** FRR pathspace (`-N`): unique per instance on the machine. */
  readonly pathspace: string
  /** Extra arguments for one daemon, e.g. bgpd's `-p PORT -l ADDRESS -n`. */
  readonly extraArgs?: Partial<Record<FrrDaemonName, readonly string[]>>
  /**
   * Where a daemon listens once it is up (bgpd's BGP port): it answers only when that
   * accepts too, so one that could not bind it (and exits for it) is not taken as up.
   */
  readonly listening?: Partial<
    Record<FrrDaemonName, { readonly host: string; readonly port: number }>
  >
  readonly netns?: string
  /**
   * zebra's VRFs are network namespaces (`-n`), and only those bound into this directory:
   * zebra and bgpd run in mount namespaces of their own whose `/run/netns` is it (FRR's
   * netns VRF backend takes every namespace there as a VRF). The directory must be a shared mount
   * (`mount --make-shared`), so that a namespace bound into it later reaches zebra.
   */
  readonly vrfNetnsDir?: string
  /** Each started daemon, as soon as it answers (a supervisor tracks it). */
  readonly started?: (daemon: Daemon) => void
  /**
   * Starts each daemon instead of starting it once: e.g. a supervisor that starts it
   * again whenever it dies. Resolves once the daemon answers.
   */
  readonly supervise?: (spec: DaemonSpec) => Promise<void>
}

/**
 * Writes each daemon's configuration and starts them in order, each answering on its vty
 * socket before the next starts. Resolves with the daemons; `started` sees each one as
 * it comes up, so a caller can stop those already running if a later one fails.
 *
 * @example
 * await startFrrDaemons({ dir, daemons: ['zebra', 'bgpd'], configs: { bgpd }, pathspace: 'hz1' })
 * // vtysh --vty_socket <dir> -c 'show bgp summary'
 */
export async function startFrrDaemons(options: FrrDaemonsOptions): Promise<Daemon[]> {
  const daemons: Daemon[] = []
  for (const spec of await frrDaemonSpecs(options)) {
    if (options.supervise) {
      await options.supervise(spec)
      continue
    }
    const daemon = await startDaemon(spec)
    daemons.push(daemon)
    options.started?.(daemon)
  }
  return daemons
}

/** Writes each daemon's configuration; returns how to start each one, in order. */
async function frrDaemonSpecs(options: FrrDaemonsOptions): Promise<DaemonSpec[]> {
  const { dir } = options
  const identity = await frrIdentityArgs()
  for (const name of options.daemons) {
    await writeFileAtomic(join(dir, `${name}.conf`), options.configs[name] ?? '')
  }
  return options.daemons.map((name) => ({
    name,
    ...inVrfView(name, options.vrfNetnsDir, [
      '-N',
      options.pathspace,
      ...identity,
      '-f',
      join(dir, `${name}.conf`),
      '-i',
      join(dir, `${name}.pid`),
      '-z',
      join(dir, 'zserv.api'),
      '--vty_socket',
      dir,
      '--log',
      `file:${join(dir, `${name}.log`)}`,
      ...(options.extraArgs?.[name] ?? []),
    ]),
    ...(options.netns ? { netns: options.netns } : {}),
    logFile: join(dir, `${name}.out`),
    tailFiles: [join(dir, `${name}.log`)],
    ready: async () => {
      if (!(await canConnect({ path: join(dir, `${name}.vty`) }))) return false
      const listening = options.listening?.[name]
      return listening === undefined || canConnect(listening)
    },
    // bgpd restarts from the file it last saved (`write file`), in an order it announces
    // from at once.
    ...(name === 'bgpd'
      ? {
          beforeStart: async () => {
            const file = join(dir, 'bgpd.conf')
            await writeFileAtomic(file, startupOrder(await readFile(file, 'utf8')))
          },
        }
      : {}),
  }))
}

/**
 * The daemon's command: seeing only `vrfNetnsDir` as `/run/netns`, zebra with `-n` (bgpd
 * too sees it: a VRF instance with a neighbour opens its socket in the VRF's namespace).
 */
function inVrfView(
  name: FrrDaemonName,
  vrfNetnsDir: string | undefined,
  args: readonly string[],
): { command: string; args: string[] } {
  const binary = `/usr/lib/frr/${name}`
  if (vrfNetnsDir === undefined) return { command: binary, args: [...args] }
  return {
    command: 'unshare',
    args: [
      '--mount',
      '--propagation',
      'slave',
      '--',
      'sh',
      '-c',
      `mount --rbind ${vrfNetnsDir} /run/netns && exec "$@"`,
      'sh',
      binary,
      ...(name === 'zebra' ? ['-n'] : []),
      ...args,
    ],
  }
}

/**
 * `-u root -g <group>` when we are root, else nothing (FRR's default user). The group
 * is FRR's vty group where it exists: FRR refuses to start as a user outside it.
 */
async function frrIdentityArgs(): Promise<string[]> {
  if (process.getuid?.() !== 0) return []
  const groups = await readFile('/etc/group', 'utf8').catch(() => '')
  const vtyGroup = groups.split('\n').some((line) => line.startsWith('frrvty:')) ? 'frrvty' : 'root'
  return ['-u', 'root', '-g', vtyGroup]
}
