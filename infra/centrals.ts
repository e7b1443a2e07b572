/**
 * One OVN central (NB + SB ovsdb-server and ovn-northd) per resource group, run and
 * supervised by the controller process: a group's crash or corrupt database touches no
 * other group (a fault stays inside its group), behind `OvnCentralProvider`.
 *
 * On disk: `<dataDir>/centrals/<centralDirName(group)>/` holds the databases, sockets,
 * logs, `group` (the group's name, so `groups()` survives a restart) and `sb.port` (the
 * SB port DPUs were told, reused on every start).
 *
 * Over TLS a group's SB admits only its own chassis: it checks client certificates
 * against the group's own chassis CA (`chassis-ca/` in its directory), never Hydrazine's
 * CA, so a DPU's identity alone opens no group's SB. A DPU serving the group presents its
 * identity's key certified by that CA (`chassisCertificate`, sent with its `configure`);
 * a DPU of another group, holding only its identity or another group's certificate, fails
 * the TLS handshake and reads nothing. Releasing the group removes its CA with its files.
 */
import { createHash, X509Certificate } from 'node:crypto'
import { chmod, mkdir, readdir, readFile, rm } from 'node:fs/promises'
import { join, resolve } from 'node:path'
import pLimit from 'p-limit'
import { ConfigError } from '../lib/errors.ts'
import { writeFileAtomic } from '../lib/files/index.ts'
import {
  CentralUnavailableError,
  ChassisIdentityRefused,
  type OvnCentralEndpoints,
  type OvnCentralProvider,
} from '../lib/ovn/central.ts'
import { type OvnInstall, SYSTEM_OVN } from '../lib/ovn/install.ts'
import { type CertificateAuthority, openCertificateAuthority } from '../lib/pki/index.ts'
import { type Daemon, type DaemonExit, requireBinary } from '../lib/process/daemon.ts'
import { MissingBinaryError } from '../lib/process/errors.ts'
import { canConnect } from '../lib/process/ports.ts'
import { PlaintextRefusedError, wantsTls } from './local/net.ts'
import { CentralDatabaseDamaged, ovnNorthdVersion, startOvnCentral } from './local/ovn-central.ts'

/** What `startPerGroupCentrals` needs; checked when it is called. */
export interface PerGroupCentralsOptions {
  /** Centrals live in `<dataDir>/centrals/` (created, mode 0700). */
  readonly dataDir: string
  /**
   * Where DPUs reach each group's SB (default 127.0.0.1), each central on its own port:
   * plaintext TCP on loopback; elsewhere (or with `tls`) `pssl:` with a server certificate
   * from `pki` and OVN's `ovn-controller` RBAC role, like the shared central.
   */
  readonly listenAddress?: string
  /** Serve every SB over TLS (default: `listenAddress` is not loopback); never plaintext off it. */
  readonly tls?: boolean
  readonly pki: CertificateAuthority
  /**
   * The OVN every central runs (default the system's: Debian 12's OVN 23.03); with a
   * newer one, DPUs whose `ovn-controller` is older are refused (`admitsController`).
   */
  readonly install?: OvnInstall
  /** Where progress and crash lines go (default: nowhere). */
  readonly log?: (line: string) => void
}

/** What became of the centrals' databases since the provider started (its metrics). */
export interface CentralDatabases {
  /** Databases of centrals that served and cannot be read now: not replaced (per group). */
  readonly damaged: readonly { readonly group: string; readonly file: string }[]
  /** Databases made again: unreadable, from a creation a cut stopped before it finished. */
  readonly remade: number
}

/** A provider of per-group centrals that can be shut down. */
export interface PerGroupCentrals extends OvnCentralProvider {
  chassisCertificate: NonNullable<OvnCentralProvider['chassisCertificate']>
  /** The damaged and remade databases (`hydrazine_ovn_central_*_databases` metrics). */
  databases(): CentralDatabases
  /** Stops every central (their files stay, for the next start); no restarts after it. */
  close(): Promise<void>
}

/** What `ensure` throws while a group's central cannot answer (lib/ovn/central.ts). */
export { CentralUnavailableError } from '../lib/ovn/central.ts'

/** First delay before a crashed central restarts; it doubles up to `MAX_BACKOFF_MS`. */
/**
 * Centrals one provider starts at once (ovsdb-servers and ovn-northd starting, databases
 * created or compacted: CPU and disk). More group creates wait their turn: a burst of new
 * groups, or a tenant creating many, slows the starts, not the running centrals.
 */
export const CENTRAL_STARTS_AT_ONCE = 4

const MIN_BACKOFF_MS = 200
const MAX_BACKOFF_MS = 5000
/** A central that ran this long before a crash restarts after `MIN_BACKOFF_MS` again. */
const STABLE_MS = 10_000
/** How long a start waits for its SB port to be let go before it picks another. */
const PORT_WAIT_MS = 2000
/** Validity of a chassis certificate; one with less than `RENEW_MS` left is issued anew. */
const CHASSIS_CERT_DAYS = 365
const DAY_MS = 24 * 60 * 60 * 1000
const RENEW_MS = 30 * DAY_MS
/** Longest path of a unix socket (sun_path, including its NUL). */
const MAX_SOCKET_PATH = 107

/**
 * The directory name of a group's central: filesystem-safe, fixed length, and distinct for
 * distinct groups (the first 96 bits of the name's SHA-256).
 *
 * @example centralDirName('tenant-a') // 'g-' + 24 hex digits
 */
export function centralDirName(group: string): string {
  return `g-${createHash('sha256').update(group).digest('hex').slice(0, 24)}`
}

/** The directory of a group's central under a provider's `dataDir`. */
export function centralDir(dataDir: string, group: string): string {
  return join(centralsRoot(dataDir), centralDirName(group))
}

/** The directory holding every group's central: `<dataDir>/centrals`, absolute. */
export function centralsRoot(dataDir: string): string {
  return join(resolve(dataDir), 'centrals')
}

interface Running {
  readonly endpoints: OvnCentralEndpoints
  readonly daemons: readonly Daemon[]
  readonly since: number
}

interface Central {
  readonly group: string
  readonly dir: string
  /** Set while every daemon answers (cleared the moment one exits). */
  running?: Running | undefined
  /** The start under way (or the restart waiting for its backoff); ensure waits for it. */
  pending?: Promise<OvnCentralEndpoints> | undefined
  /** Released or closed: never (re)start again. */
  stopped: boolean
  backoffMs: number
  /** Ends a backoff wait early (release, close). */
  wake?: (() => void) | undefined
  /** The CA its TLS SB checks chassis against (opened by its first start). */
  chassisCa?: CertificateAuthority | undefined
  /** Per DPU: the certificate it was last given for this SB, and the identity it certifies. */
  readonly chassisCerts: Map<string, ChassisCert>
  /** The database its last start found damaged (cleared by a start that succeeds). */
  damaged?: string | undefined
}

interface ChassisCert {
  readonly identity: string
  readonly cert: string
  /** When `cert`, and the identity whose key it certifies, stop being valid (ms). */
  readonly ends: number
  readonly identityEnds: number
}

/**
 * A chassis certificate is kept while it is valid and a new one would not last much
 * longer: more than `RENEW_MS` left, or its identity's end (past which none is issued)
 * less than a day beyond its own.
 */
function lastsEnough(c: { readonly ends: number; readonly identityEnds: number }): boolean {
  const now = Date.now()
  return c.ends > now && (c.ends - now > RENEW_MS || c.identityEnds - c.ends < DAY_MS)
}

/** When a certificate (PEM) stops being valid (ms). */
function endOf(pem: string): number {
  return Date.parse(new X509Certificate(pem).validTo)
}

/**
 * Runs one OVN central per group, started on the first `ensure` of the group, in parallel
 * for different groups. A central whose daemon exits is stopped and restarted (after
 * 200 ms, doubling to 5 s while it keeps crashing) on the same databases and SB port;
 * `ensure` waits for the restart. Daemons die with this process (lib/process/reaper.sh).
 * Configuration mistakes (a missing OVN binary, plaintext off loopback, a data dir too
 * deep for unix sockets) throw here.
 *
 * @example
 * const centrals = await startPerGroupCentrals({ dataDir: '.hydrazine', pki, log })
 * const { nb, sb } = await centrals.ensure('tenant-a') // nb: unix socket, sb: for DPUs
 * await centrals.release('tenant-a') // stopped, files gone
 * await centrals.close()
 */
export async function startPerGroupCentrals(
  options: PerGroupCentralsOptions,
): Promise<PerGroupCentrals> {
  const root = centralsRoot(options.dataDir)
  const log = options.log ?? (() => {})
  const listenAddress = options.listenAddress ?? '127.0.0.1'
  const tls = wantsTls('ovsdb-server(sb)', listenAddress, options.tls)
  const install = options.install ?? SYSTEM_OVN
  for (const tool of [
    'ovsdb-server',
    'ovsdb-tool',
    'ovn-northd',
    'ovn-nbctl',
    'ovn-sbctl',
  ] as const)
    requireBinary(install.command(tool).command)
  // DPUs whose ovn-controller is older are refused (`controllerKeepsUpWithNorthd`).
  const northdVersion = await ovnNorthdVersion(install)
  const longest = join(root, centralDirName(''), 'northd.ctl')
  if (longest.length > MAX_SOCKET_PATH)
    throw new ConfigError(
      `data dir ${options.dataDir} is too deep: central sockets like ${longest} would exceed ` +
        `${MAX_SOCKET_PATH} bytes; use a shorter HYDRAZINE_DATA_DIR`,
    )
  await mkdir(root, { recursive: true, mode: 0o700 })
  await chmod(root, 0o700)

  const centrals = new Map<string, Central>()
  const starting = pLimit(CENTRAL_STARTS_AT_ONCE)
  const releasing = new Map<string, Promise<void>>()
  let closed = false
  let remade = 0

  const gone = (c: Central) =>
    new CentralUnavailableError(c.group, closed ? 'the provider is closed' : 'it was released', {
      retryable: closed,
    })

  /** Starts the central's daemons once; on success it is running and watched. */
  const launch = async (c: Central): Promise<OvnCentralEndpoints> => {
    if (c.stopped) throw gone(c)
    const began = Date.now()
    await mkdir(c.dir, { recursive: true, mode: 0o700 })
    await claimDir(c)
    if (c.stopped) throw gone(c)
    const portFile = join(c.dir, 'sb.port')
    const sbPort = Number.parseInt(await readFile(portFile, 'utf8').catch(() => ''), 10)
    // The previous daemons (of a crash, of a controller that just died) may still hold it.
    for (let waited = 0; sbPort > 0 && waited < PORT_WAIT_MS; waited += 100) {
      if (!(await canConnect({ port: sbPort }))) break
      await new Promise((r) => setTimeout(r, 100))
    }
    // Opened on every start: a CA removed with the central's files is made anew (its DPUs
    // then need new certificates, which their next configure brings).
    if (tls) {
      c.chassisCa = await openCertificateAuthority(join(c.dir, 'chassis-ca'))
      c.chassisCerts.clear()
    }
    const started = await starting(() =>
      startOvnCentral({
        dir: c.dir,
        pki: options.pki,
        listenAddress,
        tls,
        ...(c.chassisCa ? { chassisCaFile: c.chassisCa.caFile } : {}),
        ...(sbPort > 0 && sbPort < 65536 ? { sbPort } : {}),
        certDir: c.dir,
        install,
        log: (line) => log(`central of group ${c.group}: ${line}`),
        onRemade: () => {
          remade++
        },
      }),
    ).catch((cause: unknown) => {
      if (cause instanceof CentralDatabaseDamaged) {
        // Retrying cannot cure it; only the operator can (the message says how).
        c.damaged = cause.file
        log(`central of group ${c.group}: ${cause.message}`)
        throw new CentralUnavailableError(c.group, cause.message, {
          retryable: false,
          reason: 'CentralDamaged',
          cause,
        })
      }
      const config = cause instanceof MissingBinaryError || cause instanceof PlaintextRefusedError
      throw new CentralUnavailableError(c.group, 'it did not start', { retryable: !config, cause })
    })
    c.damaged = undefined
    if (c.stopped) {
      await stopAll(started.daemons)
      throw gone(c)
    }
    if (started.sbPort !== sbPort) await writeFileAtomic(portFile, `${started.sbPort}\n`)
    const { nb, sb } = started.central
    const run: Running = {
      endpoints: {
        nb: nb.unix,
        sb: sb.remote,
        sbController: sb.unix,
        service: `central-${centralDirName(c.group)}`,
        group: c.group,
        northdVersion,
      },
      daemons: started.daemons,
      since: Date.now(),
    }
    c.running = run
    for (const daemon of run.daemons)
      void daemon.exited.then((exit) => {
        if (c.running === run && !c.stopped) crashed(c, run, exit)
      })
    log(`central of group ${c.group} up in ${Date.now() - began} ms (SB ${sb.remote})`)
    return run.endpoints
  }

  /** One daemon of a running central exited: stop the rest, restart until it answers. */
  const crashed = (c: Central, run: Running, exit: DaemonExit) => {
    c.running = undefined
    if (Date.now() - run.since >= STABLE_MS) c.backoffMs = MIN_BACKOFF_MS
    let delay = c.backoffMs
    c.backoffMs = Math.min(c.backoffMs * 2, MAX_BACKOFF_MS)
    log(
      `central of group ${c.group}: ${exit.name} exited unexpectedly ` +
        `(${exit.signal ?? `code ${exit.code}`}); restarting in ${delay} ms`,
    )
    const rest = stopAll(run.daemons)
    void (async () => {
      for (let first = true; !c.stopped; first = false) {
        const attempt = (async () => {
          if (first) await rest
          await pause(c, delay)
          return launch(c)
        })()
        c.pending = attempt
        try {
          await attempt
          return
        } catch (error) {
          if (c.stopped) return
          delay = c.backoffMs
          c.backoffMs = Math.min(c.backoffMs * 2, MAX_BACKOFF_MS)
          log(
            `central of group ${c.group}: restart failed (${firstLine(error)}); next in ${delay} ms`,
          )
        } finally {
          if (c.pending === attempt) c.pending = undefined
        }
      }
    })()
  }

  /** Stops a central for good (release, close); its files stay. */
  const halt = async (c: Central) => {
    c.stopped = true
    const run = c.running
    c.running = undefined
    c.wake?.()
    await c.pending?.catch(() => {})
    if (run) await stopAll(run.daemons)
  }

  const certifying = new Map<string, Promise<string | undefined>>()
  /** `chassisCertificate`: the DPU's identity key certified by the group's chassis CA. */
  const certify = async (
    group: string,
    { id, identity }: { readonly id: string; readonly identity: string | null },
  ): Promise<string | undefined> => {
    if (!tls) return undefined
    const refuse = (why: string) => new ChassisIdentityRefused(group, id, why)
    if (identity === null) throw refuse('no certificate of it is on record')
    await provider.ensure(group)
    const c = centrals.get(group)
    const ca = c?.chassisCa
    if (!c || !ca) throw new CentralUnavailableError(group, 'it was released', { retryable: false })
    // One per DPU and key, kept while a new one would not last longer: the agent then gets
    // the same certificate on every configure and has no reason to reconnect. An attach
    // for a DPU certified already costs a lookup, no file and no signature check.
    const known = c.chassisCerts.get(id)
    if (known?.identity === identity && lastsEnough(known)) return known.cert
    if (!options.pki.issued(identity)) {
      throw refuse("its certificate is not a valid one of Hydrazine's CA")
    }
    const holder = new X509Certificate(identity)
    if (holder.subject !== `CN=${id}`) throw refuse(`its certificate names ${holder.subject}`)
    const identityEnds = Date.parse(holder.validTo)
    const file = join(ca.dir, `chassis-${id}.crt`)
    const kept = await readFile(file, 'utf8').catch(() => undefined)
    const keptEnds = kept && ca.issued(kept) && sameKey(kept, holder) ? endOf(kept) : undefined
    let cert: string
    if (kept && keptEnds !== undefined && lastsEnough({ ends: keptEnds, identityEnds })) {
      cert = kept
    } else {
      cert = await ca.certifyKeyOf(identity, CHASSIS_CERT_DAYS)
      await writeFileAtomic(file, cert)
    }
    c.chassisCerts.set(id, { identity, cert, ends: endOf(cert), identityEnds })
    return cert
  }

  const provider: PerGroupCentrals = {
    async ensure(group) {
      if (closed)
        throw new CentralUnavailableError(group, 'the provider is closed', { retryable: true })
      // No await before the entry exists: a release called right after must see it.
      const released = releasing.get(group)
      if (released) {
        await released
        return provider.ensure(group)
      }
      let c = centrals.get(group)
      if (!c) {
        c = {
          group,
          dir: centralDir(options.dataDir, group),
          stopped: false,
          backoffMs: MIN_BACKOFF_MS,
          chassisCerts: new Map(),
        }
        centrals.set(group, c)
      }
      for (;;) {
        if (c.stopped) throw gone(c)
        const run = c.running
        if (run) {
          const dead = run.daemons.find((d) => !d.running)
          if (!dead) return run.endpoints
          // Its watcher, registered first, hands over to a restart before this resumes.
          await dead.exited
          continue
        }
        if (c.pending) return c.pending
        const attempt = launch(c)
        const central = c
        central.pending = attempt
        void attempt
          .finally(() => {
            if (central.pending === attempt) central.pending = undefined
          })
          .catch(() => {})
        return attempt
      }
    },

    async release(group) {
      const earlier = releasing.get(group)
      if (earlier) return earlier
      const done = (async () => {
        const c = centrals.get(group)
        if (c) await halt(c)
        await rm(centralDir(options.dataDir, group), { recursive: true, force: true })
        centrals.delete(group)
        log(`central of group ${group} released`)
      })().finally(() => releasing.delete(group))
      releasing.set(group, done)
      return done
    },

    chassisCertificate(group, dpu) {
      // One at a time per group and DPU: two attaches at once get the same certificate.
      // Keyed by the identity too: a certify for a key its credentials replaced since is
      // not this caller's.
      const key = `${group}\n${dpu.id}\n${dpu.identity ?? ''}`
      const earlier = certifying.get(key)
      if (earlier) return earlier
      const done = certify(group, dpu).finally(() => certifying.delete(key))
      certifying.set(key, done)
      return done
    },

    async list() {
      return [...centrals.values()].flatMap((c) =>
        c.running?.daemons.every((d) => d.running) ? [c.running.endpoints] : [],
      )
    },

    databases() {
      const damaged = [...centrals.values()].flatMap((c) =>
        c.damaged ? [{ group: c.group, file: c.damaged }] : [],
      )
      return { damaged, remade }
    },

    async groups() {
      const dirs = await readdir(root).catch(() => [] as string[])
      const names = await Promise.all(
        dirs.map((dir) => readFile(join(root, dir, 'group'), 'utf8').catch(() => undefined)),
      )
      return names.filter((n): n is string => n !== undefined).sort()
    },

    async close() {
      closed = true
      await Promise.all([...releasing.values()].map((p) => p.catch(() => {})))
      await Promise.all([...centrals.values()].map(halt))
      centrals.clear()
    },
  }
  return provider
}

/**
 * Writes the group's name into its directory (whole or not at all), or checks that the
 * name already there is this group's.
 */
async function claimDir(c: Central): Promise<void> {
  const file = join(c.dir, 'group')
  const owner = await readFile(file, 'utf8').catch(() => undefined)
  if (owner === c.group) return
  if (owner !== undefined)
    throw new CentralUnavailableError(c.group, `${c.dir} belongs to group ${owner}`, {
      retryable: false,
    })
  await writeFileAtomic(file, c.group)
}

/** True when the certificate `pem` certifies the same public key as `holder`. */
function sameKey(pem: string, holder: X509Certificate): boolean {
  try {
    return new X509Certificate(pem).publicKey.equals(holder.publicKey)
  } catch {
    return false
  }
}

/** Stops daemons in reverse start order (northd first, NB last). */
async function stopAll(daemons: readonly Daemon[]): Promise<void> {
  for (const daemon of [...daemons].reverse()) await daemon.stop()
}

/** Waits `ms`, or less if the central is stopped meanwhile. */
function pause(c: Central, ms: number): Promise<void> {
  if (c.stopped) return Promise.resolve()
  return new Promise((done) => {
    const timer = setTimeout(finish, ms)
    function finish() {
      clearTimeout(timer)
      c.wake = undefined
      done()
    }
    c.wake = finish
  })
}

const firstLine = (error: unknown) =>
  (error instanceof Error ? error.message : String(error)).split('\n')[0]
