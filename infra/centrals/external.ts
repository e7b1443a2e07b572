/**
 * OVN centrals the operator runs (`HYDRAZINE_OVN_CENTRAL=external`): each resource group's
 * NB and SB remotes are named in `HYDRAZINE_OVN_CENTRALS_FILE` (lib/config/centrals.ts),
 * behind `OvnCentralProvider`. Hydrazine never starts, stops or deletes these centrals;
 * whoever runs them (a person, a later Kubernetes operator) adds a group's entry, and the
 * group's pending jobs find it on their next try — no restart.
 */
import { readFile, stat } from 'node:fs/promises'
import { resolve } from 'node:path'
import {
  type CentralRemotes,
  centralsFileError,
  parseCentralsFile,
} from '../../lib/config/centrals.ts'
import {
  CentralUnavailableError,
  type OvnCentralEndpoints,
  type OvnCentralProvider,
} from '../../lib/ovn/central.ts'

export interface ExternalCentralsOptions {
  /** `HYDRAZINE_OVN_CENTRALS_FILE`: JSON, group name → `{ nb, sb, sbController? }`. */
  readonly file: string
  /** Where a changed (or refused) file is reported (default: nowhere). */
  readonly log?: (line: string) => void
}

/** The provider of operator-run centrals, and the file it reads them from. */
export interface ExternalCentrals extends OvnCentralProvider {
  /** The centrals file, absolute. */
  readonly file: string
}

/**
 * Reads the centrals file and returns a provider that serves it, reading it again (one
 * `stat` per call, a read only when it changed) whenever it is asked. A change that does
 * not parse is logged and refused: the last good mapping stays. A bad file now is a
 * configuration mistake and throws ConfigError naming the group and field.
 *
 * - `ensure(group)`: the group's remotes; a group the file does not name yet throws a
 *   retryable CentralUnavailableError (`CentralNotConfigured`), so its jobs retry until the
 *   operator adds it.
 * - `release(group)`: nothing: the operator owns the central (and removes the entry).
 * - `list()` / `groups()`: every central / group the file names, so reconcile cleans
 *   deleted groups' rows out of them and reports entries whose group is gone, and a DPU
 *   that moves to another group leaves no chassis behind in the previous group's SB.
 *
 * @example
 * const centrals = await openExternalCentrals({ file: '/etc/hydrazine/centrals.json', log })
 * const { nb, sb } = await centrals.ensure('tenant-a') // as the file names them
 */
export async function openExternalCentrals(
  options: ExternalCentralsOptions,
): Promise<ExternalCentrals> {
  const file = resolve(options.file)
  const log = options.log ?? (() => {})
  const first = await versionOf(file)
  /** The file's last version read; undefined: read it on the next call whatever it says. */
  let version = first.settled ? first.id : undefined
  /** What the last read returned (or why it failed): a rewrite with the same text is no change. */
  let lastText = await readCentrals(file)
  let mapping = parseCentralsFile(lastText, file)
  /** Why the file's current content was refused (undefined: it is the mapping in use). */
  let refused: string | undefined
  let checking: Promise<void> | undefined

  /** Reads the file again when it changed since the last read, good or bad. */
  const refresh = async () => {
    const seen = await versionOf(file)
    if (seen.id === version) return
    version = seen.settled ? seen.id : undefined
    const read = await readCentrals(file).then(
      (text) => ({ text, error: undefined }),
      (error: Error) => ({ text: `\0${error.message}`, error }),
    )
    if (read.text === lastText) return
    lastText = read.text
    try {
      if (read.error) throw read.error
      mapping = parseCentralsFile(read.text, file)
      refused = undefined
      log(`OVN centrals file ${file} read: ${mapping.size} group(s)`)
    } catch (error) {
      refused = (error as Error).message
      log(
        `OVN centrals file refused, the last good one (${mapping.size} group(s)) stays: ${refused}`,
      )
    }
  }
  /** One check at a time: callers that arrive meanwhile share it. */
  const current = async () => {
    checking ??= refresh().finally(() => {
      checking = undefined
    })
    await checking
    return mapping
  }

  return {
    file,
    async ensure(group) {
      const remotes = (await current()).get(group)
      if (remotes) return endpointsOf(group, remotes)
      const why = refused ? `; the file's last change was refused: ${refused}` : ''
      throw new CentralUnavailableError(group, `not named in ${file} yet${why}`, {
        retryable: true,
        reason: 'CentralNotConfigured',
      })
    },
    async release() {},
    async list() {
      return [...(await current())].map(([group, remotes]) => endpointsOf(group, remotes))
    },
    async groups() {
      return [...(await current()).keys()].sort()
    },
  }
}

function endpointsOf(group: string, remotes: CentralRemotes): OvnCentralEndpoints {
  return { ...remotes, service: `external-${group}`, group }
}

/**
 * A file's inode, size and times: a change to any means the file changed. Filesystem clocks
 * are coarse (a few ms): two writes that close together may leave the same times, so a
 * version younger than `SETTLE_MS` is not `settled` and does not stand for the content.
 */
async function versionOf(file: string): Promise<{ id: string; settled: boolean }> {
  try {
    const s = await stat(file, { bigint: true })
    // ctime: the clock's time of the last change of any kind (mtime can be set back).
    const changedMs = Number(s.ctimeNs / 1_000_000n)
    return {
      id: `${s.dev}:${s.ino}:${s.size}:${s.mtimeNs}:${s.ctimeNs}`,
      settled: Date.now() - changedMs > SETTLE_MS,
    }
  } catch (error) {
    return { id: `unreadable:${(error as NodeJS.ErrnoException).code}`, settled: true }
  }
}

/** How old a file's last change must be for its times to tell a later change apart. */
const SETTLE_MS = 1000

async function readCentrals(file: string): Promise<string> {
  try {
    return await readFile(file, 'utf8')
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? 'error'
    throw centralsFileError(file, [{ path: '', message: `cannot read: ${code}` }])
  }
}
