/**
 * One OVN central: the NB and SB ovsdb-servers and ovn-northd, all files under one
 * directory. The embedded stack runs one (`<dataDir>/ovn`); `infra/centrals/local.ts` runs one
 * per resource group.
 *
 * A power cut leaves each database whole or absent: it is made under a temporary name,
 * flushed and renamed into place (lib/files). The central's first start writes `served`
 * beside them. A start that finds a database it cannot read makes it again when the
 * central never served (a creation an earlier version left unfinished); one that served
 * is never replaced: the start fails with `CentralDatabaseDamaged`.
 */
import { execFile } from 'node:child_process'
import { chmod, mkdir, readFile, rm, stat, utimes } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { HydrazineError } from '../../lib/errors.ts'
import {
  removeLeftovers,
  renameDurably,
  tempNameFor,
  writeFileAtomic,
} from '../../lib/files/index.ts'
import { type OvnInstall, type OvnTool, ovnVersionIn, SYSTEM_OVN } from '../../lib/ovn/install.ts'
import { type CertificateAuthority, type IssuedFiles, writePrivate } from '../../lib/pki/index.ts'
import { type Daemon, requireBinary, startDaemon } from '../../lib/process/daemon.ts'
import { DaemonStartError } from '../../lib/process/errors.ts'
import { LaunchError, Launcher } from '../../lib/process/launcher.ts'
import { canConnect, freePort } from '../../lib/process/ports.ts'
import { hostPart, pickPort, serverIps, wantsTls } from './net.ts'
import type { OvnCentral } from './types.ts'

const run = promisify(execFile)

/** The schemas of Debian's `ovn-central` package (OVN 23.03). */
export const OVN_SCHEMAS = SYSTEM_OVN.schemas

/** Runs one program of the central's OVN install; resolves its output. */
type RunTool = (
  tool: OvnTool,
  args: readonly string[],
  options?: { env?: NodeJS.ProcessEnv },
) => Promise<{ stdout: string }>

/** Where one central keeps its files and how its SB is reached. */
export interface OvnCentralOptions {
  /** Holds the databases, sockets, pid and log files; created (mode 0700) if missing. */
  readonly dir: string
  /** Signs the SB server certificate when the SB speaks TLS. */
  readonly pki: CertificateAuthority
  /** Where chassis reach the SB (default 127.0.0.1). */
  readonly listenAddress?: string
  /**
   * SB TCP/SSL port to use if it is free; absent or 0 picks a free one (plaintext: the
   * port ovsdb-server binds itself, so no other process can take it in between).
   */
  readonly sbPort?: number
  /** Serve the SB over TLS with OVN RBAC (default: `listenAddress` is not loopback). */
  readonly tls?: boolean
  /**
   * Directory for the SB server certificate and key (`sb-server.crt`, `.key`); default:
   * the CA's own directory, as `ovn-sb.crt` / `.key`.
   */
  readonly certDir?: string
  /**
   * The CA whose certificates the TLS SB admits as chassis (PEM file); default the
   * `pki` CA itself, whose every DPU identity it then admits.
   */
  readonly chassisCaFile?: string
  /**
   * The CA that signs the TLS SB's server certificate (default `pki`): a per-group
   * central's own, so that its chassis, trusting only it, take no other SB for theirs.
   */
  readonly serverCa?: CertificateAuthority
  /**
   * Whose ovsdb-server, ovsdb-tool, ovn-northd and ctl programs and schemas it runs
   * (default: the system's, Debian 12's OVN 23.03; lib/ovn/install.ts).
   */
  readonly install?: OvnInstall
  /** Where progress lines go (default: nowhere). */
  readonly log?: (line: string) => void
  /** Told of each database made again (unreadable, from a creation that never finished). */
  readonly onRemade?: (file: string) => void
  /**
   * Starts its programs (default: this process's shared launcher, so that a controller with
   * a large heap never forks for them: lib/process/launcher.ts).
   */
  readonly launcher?: Launcher
}

/**
 * A database of a central that served cannot be read (`ovsdb-tool` refuses it): it is not
 * replaced. Moving `file` aside lets the next start make it anew, empty: Hydrazine's next
 * apply writes the NB again from its store; ovn-northd rebuilds the SB from the NB (and
 * the chassis register again).
 */
export class CentralDatabaseDamaged extends HydrazineError {
  constructor(
    readonly file: string,
    readonly why: string,
  ) {
    super(
      'CENTRAL_DATABASE_DAMAGED',
      `${file} cannot be read (${why}) and it served before: it is not replaced; move it ` +
        'aside to have it made anew, empty (the NB is written again from the store by the ' +
        'next apply, the SB by ovn-northd from the NB), or put back a copy you trust',
    )
  }
}

/** The file a central's first successful start writes: its databases have served. */
export const SERVED_MARK = 'served'

/** A central whose three daemons answer. */
export interface StartedOvnCentral {
  /** Its sockets and the SB remote for chassis. */
  readonly central: OvnCentral
  /** The SB TCP/SSL port it listens on. */
  readonly sbPort: number
  /**
   * NB ovsdb-server, SB ovsdb-server and ovn-northd, in start order: watch `exited` to
   * notice a crash; stop them (in reverse) to stop the central.
   */
  readonly daemons: readonly Daemon[]
}

/**
 * Starts NB and SB ovsdb-servers and ovn-northd under `dir`, reusing the databases there
 * (converted when the schema has changed) or creating them empty, and resolves once NB
 * and SB answer and northd has compiled NB into SB. NB is served on its unix socket
 * only; SB on its unix socket and on `listenAddress`: plaintext TCP on loopback, `pssl:`
 * with OVN's `ovn-controller` RBAC role elsewhere (or with `tls`). On failure, the
 * daemons already started are stopped before it throws (DaemonStartError).
 *
 * @example
 * const { central, daemons } = await startOvnCentral({ dir: '/var/lib/hz/ovn', pki })
 * // ovn-nbctl --db=${central.nb.unix} show
 * for (const d of [...daemons].reverse()) await d.stop()
 */
export async function startOvnCentral(options: OvnCentralOptions): Promise<StartedOvnCentral> {
  const { dir, pki } = options
  const log = options.log ?? (() => {})
  await mkdir(dir, { recursive: true, mode: 0o700 })
  await chmod(dir, 0o700)
  const install = options.install ?? SYSTEM_OVN
  const program = (name: OvnTool) => install.command(name)
  const launcher = options.launcher ?? Launcher.shared()
  const tool: RunTool = (name, args, opts = {}) => {
    const { command, args: before } = program(name)
    return launcher.run(command, [...before, ...args], opts.env ? { env: opts.env } : {})
  }
  for (const name of ['ovsdb-tool', 'ovn-nbctl'] as const) requireBinary(program(name).command)
  const address = options.listenAddress ?? '127.0.0.1'
  const tls = wantsTls('ovsdb-server(sb)', address, options.tls)
  const env = { OVS_RUNDIR: dir, OVS_DBDIR: dir, OVS_LOGDIR: dir, OVN_RUNDIR: dir, OVN_LOGDIR: dir }
  const daemons: Daemon[] = []
  const servedMark = join(dir, SERVED_MARK)
  // A mark a cut stopped half-written is no mark: its temporary file goes.
  await removeLeftovers(servedMark)
  const served = await exists(servedMark)

  /** Starts one database's server on its unix socket plus `remotes`; resolves the socket. */
  const startDb = async (
    db: 'nb' | 'sb',
    remotes: readonly string[],
    ready: (logFile: string, logStart: number) => Promise<boolean> = async () => true,
  ) => {
    const file = join(dir, `${db}.db`)
    await openDatabase(tool, file, install.schemas[db], served, (why) => {
      log(`${file} cannot be read (${why}) and never served: made again`)
      options.onRemade?.(file)
    })
    const socket = join(dir, `${db}.sock`)
    const logFile = join(dir, `${db}.log`)
    const logStart = (await readFile(logFile, 'utf8').catch(() => '')).length
    daemons.push(
      await startDaemon({
        name: `ovsdb-server(${db})`,
        command: program('ovsdb-server').command,
        args: [
          ...program('ovsdb-server').args,
          file,
          `--remote=punix:${socket}`,
          ...remotes,
          `--unixctl=${join(dir, `${db}.ctl`)}`,
          `--pidfile=${join(dir, `${db}.pid`)}`,
          `--log-file=${logFile}`,
        ],
        env,
        umask: 0o077,
        launcher,
        logFile: join(dir, `${db}.out`),
        tailFiles: [logFile],
        ready: async () => (await canConnect({ path: socket })) && (await ready(logFile, logStart)),
      }),
    )
    return { unix: `unix:${socket}`, logFile, logStart }
  }

  try {
    // NB: the controller runs on this machine; nothing else needs the NB.
    const nbDb = await startDb('nb', [])
    const nb = { unix: nbDb.unix }
    log(`ovsdb-server(nb) on ${nb.unix}`)

    let sb: OvnCentral['sb']
    let sbPort: number
    if (tls) {
      // Chassis connect over TLS with a certificate from the chassis CA (default: our CA)
      // and get the ovn-controller role (OVN 23.03 RBAC: a chassis writes only its own
      // Chassis and Encap rows, but may claim any Port_Binding: who is admitted matters).
      // The remote and its role live in the SB's Connection table; the key, certificate
      // and the CA it checks chassis against in its SSL table.
      const port = options.sbPort
        ? await pickPort(options.sbPort, log, 'ovsdb-server(sb)')
        : await freePort(address)
      const serverCa = options.serverCa ?? pki
      const issued = await serverCa.issueServer({
        ips: serverIps(address),
        dnsNames: ['localhost'],
      })
      const server: IssuedFiles = options.certDir
        ? await writeServerCert(options.certDir, issued, serverCa.caFile)
        : await serverCa.writeIssued('ovn-sb', issued)
      const sbDb = await startDb('sb', [
        '--remote=db:OVN_Southbound,SB_Global,connections',
        '--private-key=db:OVN_Southbound,SSL,private_key',
        '--certificate=db:OVN_Southbound,SSL,certificate',
        // A chassis CA given is on the command line: the SSL row a previous start left
        // (maybe naming another CA) never admits anyone before set-ssl below rewrites it.
        options.chassisCaFile
          ? `--ca-cert=${options.chassisCaFile}`
          : '--ca-cert=db:OVN_Southbound,SSL,ca_cert',
      ])
      const target = `pssl:${port}:${hostPart(address)}`
      await tool(
        'ovn-sbctl',
        [
          `--db=${sbDb.unix}`,
          '--timeout=10',
          '--',
          'set-ssl',
          server.keyFile,
          server.certFile,
          options.chassisCaFile ?? server.caFile,
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
      sbPort = port
      log(`ovsdb-server(sb) on ${sb.unix} and ${sb.remote} (role ovn-controller)`)
    } else {
      const preferred = options.sbPort ? await pickPort(options.sbPort, log, 'ovsdb-server(sb)') : 0
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
      sbPort = bound
      log(`ovsdb-server(sb) on ${sb.unix} and ${sb.remote}`)
    }

    daemons.push(
      await startDaemon({
        name: 'ovn-northd',
        command: program('ovn-northd').command,
        args: [
          ...program('ovn-northd').args,
          `--ovnnb-db=${nb.unix}`,
          `--ovnsb-db=${sb.unix}`,
          `--unixctl=${join(dir, 'northd.ctl')}`,
          `--pidfile=${join(dir, 'northd.pid')}`,
          `--log-file=${join(dir, 'northd.log')}`,
        ],
        env,
        umask: 0o077,
        launcher,
        logFile: join(dir, 'northd.out'),
        tailFiles: [join(dir, 'northd.log')],
        ready: async () => {
          await tool('ovn-nbctl', [`--db=${nb.unix}`, '--timeout=5', '--wait=sb', 'sync'], {
            env: { ...process.env, ...env },
          })
          return true
        },
        readyTimeoutMs: 30_000,
      }),
    )
    log('ovn-northd is compiling NB into SB')
    if (!served) await writeFileAtomic(servedMark, `${new Date().toISOString()}\n`)
    return { central: { nb, sb, runDir: dir }, sbPort, daemons }
  } catch (error) {
    for (const daemon of [...daemons].reverse()) await daemon.stop()
    throw error
  }
}

/**
 * Makes `file` a database of `schema` that ovsdb-server can open: created whole (under a
 * temporary name, then renamed) when absent; converted when the schema changed. One that
 * cannot be read is made again when the central never `served` (`remade` is told why),
 * else `CentralDatabaseDamaged`. A missing file is made whatever `served` says: moving a
 * damaged one aside is how an operator asks for a new one.
 */
async function openDatabase(
  tool: RunTool,
  file: string,
  schema: string,
  served: boolean,
  remade: (why: string) => void,
): Promise<void> {
  // Temporary databases (and their lock files) of a creation a cut stopped.
  await removeLeftovers(file)
  if (await exists(file)) {
    const found = await inspect(tool, file, schema)
    if (found.readable) {
      if (found.needsConversion) await tool('ovsdb-tool', ['convert', file, schema])
      return
    }
    if (served) throw new CentralDatabaseDamaged(file, found.why)
    remade(found.why)
    await rm(file, { force: true })
  }
  const temp = tempNameFor(file)
  await tool('ovsdb-tool', ['create', temp, schema])
  await renameDurably(temp, file)
  // The lock file ovsdb-tool kept beside the temporary name.
  await removeLeftovers(file)
}

/**
 * What ovsdb-tool makes of a database file: readable (and whether its schema is older
 * than `schema`), or why not (its first line of complaint).
 */
async function inspect(
  tool: RunTool,
  file: string,
  schema: string,
): Promise<{ readable: true; needsConversion: boolean } | { readable: false; why: string }> {
  if ((await stat(file)).size === 0) return { readable: false, why: 'it is empty' }
  try {
    const { stdout } = await tool('ovsdb-tool', ['needs-conversion', file, schema])
    return { readable: true, needsConversion: stdout.trim() === 'yes' }
  } catch (error) {
    // Not the database's fault: the program could not be run at all.
    if (error instanceof LaunchError) throw error
    const stderr = (error as { stderr?: string }).stderr ?? ''
    const line = stderr.trim().split('\n')[0] ?? ''
    return { readable: false, why: line.replace(/^ovsdb-tool: /, '') || 'ovsdb-tool refuses it' }
  }
}

/** The version of an install's ovn-northd (`ovn-northd --version`: `25.03.0`). */
export async function ovnNorthdVersion(install: OvnInstall = SYSTEM_OVN): Promise<string> {
  const { command, args } = install.command('ovn-northd')
  const { stdout } = await run(command, [...args, '--version'])
  const version = ovnVersionIn(stdout)
  if (version === undefined) throw new Error(`ovn-northd of ${install.label} printed no version`)
  return version
}

/** What `renewSouthboundTls` needs: a running central's directory and how it runs. */
export interface SouthboundTlsRenewal {
  /** The central's directory (`startOvnCentral`'s `dir`, with `certDir` the same). */
  readonly dir: string
  /** Issue the SB's server certificate anew from this CA (unset: keep the one it has). */
  readonly serverCa?: CertificateAuthority | undefined
  readonly listenAddress?: string
  readonly install?: OvnInstall
  /** Runs `ovn-appctl` (default: this process's shared launcher). */
  readonly launcher?: Launcher
}

/**
 * Makes a running TLS SB take what changed on disk, and drops every client session:
 * writes a new server certificate (from `serverCa`, when given) where its SSL row points,
 * then `ovsdb-server/reconnect`. The SB reads its key, certificate and CA files again on
 * the next turn of its main loop (OVS re-reads a file whose mtime changed, and replaces
 * its trust store with the CA file's certificates), which runs before any client can
 * reconnect: a client that reconnects is checked against the files as they are now. Its
 * ovn-controllers keep their flows while they reconnect.
 */
export async function renewSouthboundTls(options: SouthboundTlsRenewal): Promise<void> {
  const { dir } = options
  const install = options.install ?? SYSTEM_OVN
  if (options.serverCa) {
    const issued = await options.serverCa.issueServer({
      ips: serverIps(options.listenAddress ?? '127.0.0.1'),
      dnsNames: ['localhost'],
    })
    const files = await writeServerCert(dir, issued, options.serverCa.caFile)
    // OVS re-reads its key and certificate together, when their mtimes change: touched
    // again once both are whole, so that a turn of its loop between the two writes
    // (reading a new key beside the old certificate) is followed by one reading both.
    await new Promise((r) => setTimeout(r, 20))
    const now = new Date()
    await utimes(files.keyFile, now, now)
    await utimes(files.certFile, now, now)
  }
  const { command, args } = install.command('ovn-appctl')
  await (options.launcher ?? Launcher.shared()).run(
    command,
    [...args, '-t', join(dir, 'sb.ctl'), 'ovsdb-server/reconnect'],
    { timeoutMs: 10_000 },
  )
}

/** Writes the SB server's certificate and key (0600) into `dir`. */
async function writeServerCert(
  dir: string,
  issued: { readonly cert: string; readonly key: string },
  caFile: string,
): Promise<IssuedFiles> {
  const certFile = join(dir, 'sb-server.crt')
  const keyFile = join(dir, 'sb-server.key')
  await writePrivate(keyFile, issued.key)
  await writeFileAtomic(certFile, issued.cert)
  return { certFile, keyFile, caFile }
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
