/**
 * Launching and watching the daemons of the embedded per-group centrals
 * (infra/centrals/local.ts): a central's start (its directory claimed, its SB port reused, its
 * chassis CA opened, at most `CENTRAL_STARTS_AT_ONCE` at a time), the watch that restarts
 * it with backoff when one of its daemons exits, and its stop for good.
 */
import { mkdir, readFile } from 'node:fs/promises'
import { join } from 'node:path'
import pLimit from 'p-limit'
import { removeLeftovers, writeFileAtomic } from '../../lib/files/index.ts'
import { CentralUnavailableError, type OvnCentralEndpoints } from '../../lib/ovn/central.ts'
import type { OvnInstall } from '../../lib/ovn/install.ts'
import { type CertificateAuthority, openCertificateAuthority } from '../../lib/pki/index.ts'
import type { Daemon, DaemonExit } from '../../lib/process/daemon.ts'
import { MissingBinaryError } from '../../lib/process/errors.ts'
import { canConnect } from '../../lib/process/ports.ts'
import { PlaintextRefusedError } from '../local/net.ts'
import {
  CentralDatabaseDamaged,
  renewSouthboundTls,
  startOvnCentral,
} from '../local/ovn-central.ts'
import {
  type CentralChassis,
  CHASSIS_CA_DIR,
  rotateChassisCaDir,
  settleChassisCaDir,
} from './local-chassis-certs.ts'

/**
 * Centrals one provider starts at once (ovsdb-servers and ovn-northd starting, databases
 * created or compacted: CPU and disk). More group creates wait their turn: a burst of new
 * groups, or a tenant creating many, slows the starts, not the running centrals.
 */
export const CENTRAL_STARTS_AT_ONCE = 4

/** First delay before a crashed central restarts; it doubles up to `MAX_BACKOFF_MS`. */
const MIN_BACKOFF_MS = 200
const MAX_BACKOFF_MS = 5000
/** A central that ran this long before a crash restarts after `MIN_BACKOFF_MS` again. */
const STABLE_MS = 10_000
/** How long a start waits for its SB port to be let go before it picks another. */
const PORT_WAIT_MS = 2000

interface Running {
  readonly endpoints: OvnCentralEndpoints
  readonly daemons: readonly Daemon[]
  readonly since: number
}

/** A group's central as its provider keeps it: what runs, what is under way. */
export interface Central extends CentralChassis {
  /** The CA of its SB's server certificate (TLS only): its chassis CA, or Hydrazine's. */
  serverCa?: CertificateAuthority | undefined
  readonly group: string
  readonly dir: string
  /** The name its endpoints give it (`OvnCentralEndpoints.service`). */
  readonly service: string
  /** Set while every daemon answers (cleared the moment one exits). */
  running?: Running | undefined
  /** The start under way (or the restart waiting for its backoff); ensure waits for it. */
  pending?: Promise<OvnCentralEndpoints> | undefined
  /** Released, closed or stopped (`idle`): never (re)start again. */
  stopped: boolean
  /**
   * Stopped because its group has no host (`stop`), not released: its files stay, the next
   * ensure makes it anew, and an ensure its stop cut short is told to ask again.
   */
  idle?: true
  backoffMs: number
  /** Ends a backoff wait early (release, close). */
  wake?: (() => void) | undefined
  /** The database its last start found damaged (cleared by a start that succeeds). */
  damaged?: string | undefined
}

/** A group's central not started yet, in `dir`. */
export function newCentral(where: Pick<Central, 'group' | 'dir' | 'service'>): Central {
  return { ...where, stopped: false, backoffMs: MIN_BACKOFF_MS, chassisCerts: new Map() }
}

/** What `centralSupervisor` needs: how every central runs, as the provider was told. */
export interface CentralSupervisorOptions {
  readonly pki: CertificateAuthority
  readonly listenAddress: string
  readonly tls: boolean
  readonly install: OvnInstall
  /** The version of `install`'s ovn-northd, which every central's endpoints carry. */
  readonly northdVersion: string
  readonly log: (line: string) => void
  /** Whether the provider is closed (a central then is unavailable, not released). */
  readonly closed: () => boolean
}

/** Starts, watches and stops a provider's centrals. */
export interface CentralSupervisor {
  /** Starts the central's daemons once; on success it is running and watched. */
  launch(c: Central): Promise<OvnCentralEndpoints>
  /** Stops a central for good (release, close); its files stay. */
  halt(c: Central): Promise<void>
  /**
   * Replaces the central's chassis CA (TLS only) and drops every session of its SB: no
   * chassis certificate issued before opens it again; a DPU still serving the group needs
   * a new one (`chassisCertificate`). When the SB's server certificate came from the old
   * CA, it gets one from the new. One rotation at a time per central. False when there
   * was nothing to replace (plaintext, stopped).
   */
  rotate(c: Central): Promise<boolean>
  /**
   * Why a stopped central answers nothing: released (not retried), closed or stopped for
   * want of hosts (retried).
   */
  gone(c: Central): CentralUnavailableError
  /** Databases made again since the provider started (a cut stopped their creation). */
  remade(): number
}

/**
 * A central whose daemon exits is stopped and restarted (after 200 ms, doubling to 5 s
 * while it keeps crashing) on the same databases and SB port; `ensure` waits for the
 * restart through `Central.pending`.
 *
 * @example
 * const supervisor = centralSupervisor({ pki, listenAddress, tls, install, northdVersion, log, closed })
 * const endpoints = await supervisor.launch(newCentral({ group: 'tenant-a', dir, service }))
 */
export function centralSupervisor(options: CentralSupervisorOptions): CentralSupervisor {
  const { pki, listenAddress, tls, install, northdVersion, log, closed } = options
  const starting = pLimit(CENTRAL_STARTS_AT_ONCE)
  let remade = 0

  const gone = (c: Central) => {
    if (c.idle && !closed()) {
      return new CentralUnavailableError(c.group, 'it was stopped (its group has no host)', {
        retryable: true,
      })
    }
    return new CentralUnavailableError(
      c.group,
      closed() ? 'the provider is closed' : 'it was released',
      { retryable: closed() },
    )
  }

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
      await settleChassisCaDir(c.dir)
      c.chassisCa = await openCertificateAuthority(join(c.dir, CHASSIS_CA_DIR))
      c.chassisCerts.clear()
      c.serverCa = await serverCaOf(c.dir, pki, c.chassisCa)
    }
    const started = await starting(() =>
      startOvnCentral({
        dir: c.dir,
        pki,
        listenAddress,
        tls,
        ...(c.chassisCa ? { chassisCaFile: c.chassisCa.caFile } : {}),
        ...(c.serverCa ? { serverCa: c.serverCa } : {}),
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
        service: c.service,
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

  const halt = async (c: Central) => {
    c.stopped = true
    const run = c.running
    c.running = undefined
    c.wake?.()
    await c.pending?.catch(() => {})
    if (run) await stopAll(run.daemons)
  }

  const rotations = new Map<Central, Promise<boolean>>()
  const rotateNow = async (c: Central): Promise<boolean> => {
    // A start under way opens the CA as the disk holds it: let it finish first.
    await c.pending?.catch(() => {})
    const old = c.chassisCa
    if (!tls || !old || c.stopped) return false
    const ca = await rotateChassisCaDir(c.dir)
    const ownServer = c.serverCa === old
    c.chassisCa = ca
    c.chassisCerts.clear()
    if (ownServer) c.serverCa = ca
    // Not running: its next start reads the new CA and issues its server certificate.
    if (c.running) {
      await renewSouthboundTls({
        dir: c.dir,
        serverCa: ownServer ? ca : undefined,
        listenAddress,
        install,
      })
    }
    log(`central of group ${c.group}: chassis CA replaced, SB sessions dropped`)
    return true
  }
  const rotate = (c: Central) => {
    const done = (rotations.get(c) ?? Promise.resolve()).catch(() => {}).then(() => rotateNow(c))
    rotations.set(c, done)
    void done
      .finally(() => {
        if (rotations.get(c) === done) rotations.delete(c)
      })
      .catch(() => {})
    return done
  }

  return { launch, halt, rotate, gone, remade: () => remade }
}

/**
 * The CA of a central's SB server certificate: its own chassis CA, whose certificate its
 * chassis take as the only one an SB of their group may present (`configure`'s
 * `group.sbCa`). A central an earlier version ran over TLS, whose SB server certificate
 * Hydrazine's CA signed, keeps Hydrazine's: its DPUs' ovn-controllers trust that CA and no
 * other until they are configured again, and must not lose their SB on an upgrade.
 */
async function serverCaOf(
  dir: string,
  pki: CertificateAuthority,
  chassisCa: CertificateAuthority,
): Promise<CertificateAuthority> {
  const earlier = await readFile(join(dir, SB_SERVER_CERT), 'utf8').catch(() => undefined)
  return earlier !== undefined && pki.issued(earlier) ? pki : chassisCa
}

/** The SB server certificate `startOvnCentral` keeps in a central's directory. */
const SB_SERVER_CERT = 'sb-server.crt'

/**
 * Writes the group's name into its directory (whole or not at all), or checks that the
 * name already there is this group's.
 */
async function claimDir(c: Central): Promise<void> {
  const file = join(c.dir, 'group')
  // What a cut left half-written beside the central's own small files goes first.
  await removeLeftovers(file)
  await removeLeftovers(join(c.dir, 'sb.port'))
  const owner = await readFile(file, 'utf8').catch(() => undefined)
  if (owner === c.group) return
  if (owner !== undefined)
    throw new CentralUnavailableError(c.group, `${c.dir} belongs to group ${owner}`, {
      retryable: false,
    })
  await writeFileAtomic(file, c.group)
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
