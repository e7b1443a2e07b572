/**
 * A newer OVN for the embedded centrals: Debian 13's `ovn-central` (OVN 25.03) and its
 * dependencies, extracted by `mmdebstrap` into a root of their own, made once and reused.
 * Its programs need glibc ≥ 2.38, newer than Debian 12's: they run through the root's own
 * dynamic loader (lib/ovn/install.ts).
 */
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdir, readdir, readFile, rename, rm } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { HydrazineError } from '../../lib/errors.ts'
import {
  type OvnInstall,
  type OvnInstallChoice,
  ovnInstallAt,
  SYSTEM_OVN,
} from '../../lib/ovn/install.ts'
import { requireBinary } from '../../lib/process/daemon.ts'

const run = promisify(execFile)

/** The Debian release whose OVN `debian-13` is, and the packages its root holds. */
const SUITE = 'trixie'
const PACKAGES = ['ovn-central']
/** The mirror used when apt's own sources name none. */
const DEFAULT_MIRROR = 'http://deb.debian.org/debian'
/** mmdebstrap downloads ~40 MB and extracts ~110 MB: about 20 s on a good link. */
const BUILD_TIMEOUT_MS = 10 * 60_000

/** `mmdebstrap` failed to make the Debian 13 root (network, mirror, disk). Retryable. */
export class OvnRootBuildError extends HydrazineError {
  constructor(
    readonly root: string,
    why: string,
    options: { readonly cause?: unknown } = {},
  ) {
    super('OVN_ROOT_BUILD_FAILED', `could not make the OVN root ${root}: ${why}`, {
      retryable: true,
      ...options,
    })
  }
}

/**
 * The install a choice names, the Debian 13 root made first if it is not there yet
 * (`<cacheDir>/debian-13`). Throws OvnInstallInvalid for a root that lacks a program or
 * schema, MissingBinaryError when `mmdebstrap` is needed and not installed, and
 * OvnRootBuildError when it fails.
 *
 * @example
 * const ovn = await resolveOvnInstall({ kind: 'debian-13' }, { cacheDir: '.hydrazine/ovn-installs' })
 */
export async function resolveOvnInstall(
  choice: OvnInstallChoice,
  options: { readonly cacheDir: string; readonly log?: (line: string) => void },
): Promise<OvnInstall> {
  if (choice.kind === 'system') return SYSTEM_OVN
  if (choice.kind === 'root') return ovnInstallAt(choice.root)
  return ovnInstallAt(
    await ensureDebianOvnRoot({
      cacheDir: options.cacheDir,
      ...(choice.mirror ? { mirror: choice.mirror } : {}),
      ...(options.log ? { log: options.log } : {}),
    }),
  )
}

/**
 * Makes `<cacheDir>/debian-13` unless it holds an OVN install already, and returns it:
 * `mmdebstrap --variant=extract` of Debian 13's `ovn-central` with its dependencies (no
 * maintainer script runs, nothing is started) into a temporary directory beside it,
 * renamed into place when complete. A root is never seen half made; of two builds at once,
 * the first rename wins and the other's copy is dropped.
 */
export async function ensureDebianOvnRoot(options: {
  readonly cacheDir: string
  readonly mirror?: string
  readonly log?: (line: string) => void
}): Promise<string> {
  const root = join(options.cacheDir, 'debian-13')
  if (isInstall(root)) return root
  requireBinary('mmdebstrap')
  const log = options.log ?? (() => {})
  const mirror = options.mirror ?? (await aptDebianMirror())
  await mkdir(options.cacheDir, { recursive: true, mode: 0o755 })
  const tmp = join(options.cacheDir, `.debian-13.${process.pid}.${randomBytes(4).toString('hex')}`)
  const began = Date.now()
  log(`making the Debian 13 OVN root ${root} from ${mirror} (once)`)
  try {
    await run(
      'mmdebstrap',
      [
        '--quiet',
        '--variant=extract',
        `--include=${PACKAGES.join(',')}`,
        ...(process.getuid?.() === 0 ? ['--mode=root'] : []),
        SUITE,
        tmp,
        mirror,
      ],
      { timeout: BUILD_TIMEOUT_MS, maxBuffer: 16 * 1024 * 1024 },
    )
    if (!isInstall(tmp)) throw new Error('it holds no ovn-northd')
    await rename(tmp, root).catch(async (error: NodeJS.ErrnoException) => {
      // Another build finished first: keep its root.
      if ((error.code === 'ENOTEMPTY' || error.code === 'EEXIST') && isInstall(root)) return
      throw error
    })
  } catch (cause) {
    const stderr = (cause as { stderr?: string }).stderr?.trim().split('\n').slice(-3).join('; ')
    throw new OvnRootBuildError(root, stderr || (firstLine(cause) ?? 'mmdebstrap failed'), {
      cause,
    })
  } finally {
    await rm(tmp, { recursive: true, force: true })
  }
  log(`Debian 13 OVN root ready in ${Date.now() - began} ms`)
  return root
}

/**
 * The Debian archive apt on this machine uses (the first `deb` source whose path ends in
 * `/debian`), so the root comes from the same mirror as the system; else deb.debian.org.
 */
export async function aptDebianMirror(): Promise<string> {
  const files = ['/etc/apt/sources.list']
  const dir = '/etc/apt/sources.list.d'
  for (const name of (await readdir(dir).catch(() => [] as string[])).sort()) {
    files.push(join(dir, name))
  }
  for (const file of files) {
    const text = await readFile(file, 'utf8').catch(() => '')
    const uri = debianMirrorIn(text)
    if (uri) return uri
  }
  return DEFAULT_MIRROR
}

/** The first Debian archive URI in apt sources text (one-line or deb822 format). */
export function debianMirrorIn(text: string): string | undefined {
  for (const line of text.split('\n')) {
    const oneLine = /^\s*deb\s+(?:\[[^\]]*\]\s+)?(\S+)/.exec(line)?.[1]
    const deb822 = /^\s*URIs:\s*(\S+)/i.exec(line)?.[1]
    const uri = (oneLine ?? deb822)?.replace(/\/+$/, '')
    if (uri && /^https?:\/\//.test(uri) && uri.endsWith('/debian')) return uri
  }
  return undefined
}

function isInstall(root: string): boolean {
  try {
    ovnInstallAt(root)
    return true
  } catch {
    return false
  }
}

const firstLine = (error: unknown) =>
  (error instanceof Error ? error.message : String(error)).split('\n')[0]
