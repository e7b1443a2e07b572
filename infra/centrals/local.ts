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
 * the TLS handshake and reads nothing. The SB's server certificate comes from that CA too,
 * and a DPU trusts that CA alone for its group's SB (`southboundCa`): another group's SB,
 * or a DPU posing as one, fails its handshake. Releasing the group removes its CA with its
 * files. When a DPU leaves the group (`leaveChassis`) the CA is replaced and every SB
 * session dropped, so the leaver's certificate opens nothing (a central that does not
 * run has its CA replaced on disk, and starts with the new one); which DPUs the current CA
 * certified is listed (`chassisCertified`) for reconcile to find leavers a detach left
 * there; chassis certificates last `chassisCertMs` and are listed for renewal past half of
 * it (`chassisRenewalsDue`).
 *
 * This file holds the provider (ensure, release, list, close); its daemons' start, watch
 * and restart are in infra/centrals/local-supervisor.ts, the chassis certificates in
 * infra/centrals/local-chassis-certs.ts.
 */
import { createHash } from 'node:crypto'
import { chmod, mkdir, readdir, readFile, rm } from 'node:fs/promises'
import { availableParallelism } from 'node:os'
import { join, resolve } from 'node:path'
import { ConfigError } from '../../lib/errors.ts'
import { CentralUnavailableError, type OvnCentralProvider } from '../../lib/ovn/central.ts'
import { type OvnInstall, SYSTEM_OVN } from '../../lib/ovn/install.ts'
import type { CertificateAuthority } from '../../lib/pki/index.ts'
import { processTreeCpuMs } from '../../lib/process/cpu.ts'
import { requireBinary } from '../../lib/process/daemon.ts'
import { wantsTls } from '../local/net.ts'
import { ovnNorthdVersion } from '../local/ovn-central.ts'
import {
  CHASSIS_CA_DIR,
  CHASSIS_CERT_MS,
  chassisCertificates,
  chassisCertifiedIn,
  chassisRecordsOf,
  chassisRenewalsDue,
  rotateChassisCaDir,
} from './local-chassis-certs.ts'
import { type Central, centralSupervisor, newCentral } from './local-supervisor.ts'

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
  /**
   * How many CPU cores the centrals' ovn-northd processes share (default: half of this
   * machine's, at least 1): several busy centrals' commits are paced to ask for about that
   * much together (`OvnCentralProvider.northdCpus`).
   */
  readonly northdCpus?: number
  /**
   * How long a chassis certificate is valid, in ms (default a day,
   * `HYDRAZINE_CHASSIS_CERT_HOURS`); it is renewed once less than half is left.
   */
  readonly chassisCertMs?: number
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
  southboundCa: NonNullable<OvnCentralProvider['southboundCa']>
  /** Stops a group's central (no hosts), keeping its files for the next `ensure`. */
  stop: NonNullable<OvnCentralProvider['stop']>
  leaveChassis: NonNullable<OvnCentralProvider['leaveChassis']>
  chassisCertified: NonNullable<OvnCentralProvider['chassisCertified']>
  chassisRenewalsDue: NonNullable<OvnCentralProvider['chassisRenewalsDue']>
  /** The damaged and remade databases (`hydrazine_ovn_central_*_databases` metrics). */
  databases(): CentralDatabases
  /** Stops every central (their files stay, for the next start); no restarts after it. */
  close(): Promise<void>
}

/** What `ensure` throws while a group's central cannot answer (lib/ovn/central.ts). */
export { CentralUnavailableError } from '../../lib/ovn/central.ts'

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
 * await centrals.stop('tenant-a') // no hosts: stopped, files kept for the next ensure
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
  const chassisCertMs = options.chassisCertMs ?? CHASSIS_CERT_MS
  if (!(Number.isFinite(chassisCertMs) && chassisCertMs >= 10_000))
    throw new ConfigError(
      `chassis certificates must be valid for at least 10 s (10000 ms), not ${chassisCertMs}`,
    )
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
  const releasing = new Map<string, Promise<void>>()
  /** Stops under way (`stop`): an ensure meanwhile waits, then starts the central again. */
  const stopping = new Map<string, Promise<void>>()
  /**
   * Chassis CAs replaced on disk for centrals that do not run (`leaveChassis`): an ensure
   * or release meanwhile waits, so that no start reads a CA half renamed.
   */
  const rotatingIdle = new Map<string, Promise<boolean>>()
  let closed = false
  const supervisor = centralSupervisor({
    pki: options.pki,
    listenAddress,
    tls,
    install,
    northdVersion,
    log,
    closed: () => closed,
  })
  const { launch, halt, rotate, gone } = supervisor

  const provider: PerGroupCentrals = {
    northdCpus: options.northdCpus ?? Math.max(1, availableParallelism() / 2),

    async northdCpuMs(group) {
      const northd = centrals.get(group)?.running?.daemons.find((d) => d.name === 'ovn-northd')
      return northd?.running ? processTreeCpuMs(northd.pid) : undefined
    },

    async ensure(group) {
      if (closed)
        throw new CentralUnavailableError(group, 'the provider is closed', { retryable: true })
      // No await before the entry exists: a release called right after must see it.
      const released = releasing.get(group) ?? stopping.get(group)
      const rotating = rotatingIdle.get(group)
      if (released || rotating) {
        await released
        await rotating?.catch(() => {})
        return provider.ensure(group)
      }
      let c = centrals.get(group)
      if (!c) {
        c = newCentral({
          group,
          dir: centralDir(options.dataDir, group),
          service: `central-${centralDirName(group)}`,
        })
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

    async stop(group) {
      const earlier = stopping.get(group) ?? releasing.get(group)
      if (earlier) return earlier
      const c = centrals.get(group)
      if (!c) return
      // Out of the map at once: the next ensure makes a new one (after this stop ends).
      centrals.delete(group)
      c.idle = true
      const done = halt(c)
        .then(() => log(`central of group ${group} stopped (no hosts)`))
        .finally(() => stopping.delete(group))
      stopping.set(group, done)
      return done
    },

    async release(group) {
      const earlier = releasing.get(group)
      if (earlier) return earlier
      const done = (async () => {
        await stopping.get(group)
        await rotatingIdle.get(group)?.catch(() => {})
        const c = centrals.get(group)
        if (c) await halt(c)
        await rm(centralDir(options.dataDir, group), { recursive: true, force: true })
        centrals.delete(group)
        log(`central of group ${group} released`)
      })().finally(() => releasing.delete(group))
      releasing.set(group, done)
      return done
    },

    chassisCertificate: chassisCertificates({
      tls,
      pki: options.pki,
      validityMs: chassisCertMs,
      records: chassisRecordsOf,
      central: async (group) => {
        await provider.ensure(group)
        return centrals.get(group)
      },
    }),

    async leaveChassis(group, dpuIds) {
      if (!tls || !(await provider.groups()).includes(group)) return false
      const who = typeof dpuIds === 'string' ? `DPU ${dpuIds}` : `DPUs ${dpuIds.join(', ')}`
      // No await from here until the rotation is registered: an ensure meanwhile either
      // made its entry already (then it is rotated as it runs) or waits for this one.
      const c = centrals.get(group)
      if (c) {
        log(`central of group ${group}: ${who} left`)
        return rotate(c)
      }
      // It does not run (stopped for want of hosts, or not started since this process
      // began): its CA is replaced on disk, and its next start serves the new one. Nothing
      // is started for it.
      const earlier: Promise<unknown> | undefined =
        rotatingIdle.get(group) ?? releasing.get(group) ?? stopping.get(group)
      if (earlier) {
        await earlier.catch(() => {})
        return provider.leaveChassis(group, dpuIds)
      }
      const done = (async () => {
        await rotateChassisCaDir(centralDir(options.dataDir, group))
        log(`central of group ${group}: ${who} left; chassis CA replaced (not running)`)
        return true
      })().finally(() => rotatingIdle.delete(group))
      rotatingIdle.set(group, done)
      return done
    },

    async chassisCertified(only) {
      if (!tls) return []
      const groups = only === undefined ? await provider.groups() : [only]
      const certified = await Promise.all(
        groups.map(async (group) => {
          const caDir = join(centralDir(options.dataDir, group), CHASSIS_CA_DIR)
          const dpuIds = await chassisCertifiedIn(caDir)
          return dpuIds === undefined ? [] : [{ group, dpuIds }]
        }),
      )
      return certified.flat()
    },

    async chassisRenewalsDue() {
      if (!tls) return []
      const due = await Promise.all(
        [...centrals.values()]
          .filter((c) => c.running && !c.stopped)
          .map(async (c) =>
            (await chassisRenewalsDue(c, chassisCertMs, chassisRecordsOf)).map((dpuId) => ({
              group: c.group,
              dpuId,
            })),
          ),
      )
      return due.flat()
    },

    async southboundCa(group) {
      if (!tls) return undefined
      await provider.ensure(group)
      const c = centrals.get(group)
      const ca = c?.serverCa
      return ca && ca === c.chassisCa ? ca.caCert : undefined
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
      return { damaged, remade: supervisor.remade() }
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
      await Promise.all([...releasing.values(), ...stopping.values()].map((p) => p.catch(() => {})))
      await Promise.all([...centrals.values()].map(halt))
      centrals.clear()
    },
  }
  return provider
}
