/**
 * Which OVN an embedded central runs: the system's (Debian 12's `ovn-central`, 23.03, on
 * PATH) or an install root, such as a Debian 13 root made by `mmdebstrap`
 * (infra/local/debian-ovn.ts) or any `make install` prefix. A root that holds its own C
 * library has its programs run through its own dynamic loader, so a root built against a
 * newer glibc (Debian 13: 2.41) runs on an older system (Debian 12: 2.36).
 */
import { accessSync, constants, existsSync } from 'node:fs'
import { isAbsolute, join } from 'node:path'
import { HydrazineError } from '../errors.ts'

/** The OVN and OVSDB programs a central runs or drives. */
export const OVN_TOOLS = [
  'ovsdb-server',
  'ovsdb-tool',
  'ovn-northd',
  'ovn-nbctl',
  'ovn-sbctl',
  'ovn-appctl',
] as const
export type OvnTool = (typeof OVN_TOOLS)[number]

/** How to run one program of an install: `command`, then `args`, then its own arguments. */
export interface OvnCommand {
  readonly command: string
  readonly args: readonly string[]
}

/** One OVN install: its programs and the NB and SB schemas they come with. */
export interface OvnInstall {
  /** `system`, or the install root (absolute). */
  readonly label: string
  /** The install root; absent for the system's OVN. */
  readonly root?: string
  readonly schemas: { readonly nb: string; readonly sb: string }
  command(tool: OvnTool): OvnCommand
}

/**
 * Which OVN the embedded centrals run (`HYDRAZINE_OVN_INSTALL`): the system's, Debian
 * 13's (a root made once under the data dir, from `mirror`: default apt's own), or the
 * install under `root`.
 */
export type OvnInstallChoice =
  | { readonly kind: 'system' }
  | { readonly kind: 'debian-13'; readonly mirror?: string | undefined }
  | { readonly kind: 'root'; readonly root: string }

/** The system's OVN: the programs on PATH and Debian's schemas under /usr/share/ovn. */
export const SYSTEM_OVN: OvnInstall = {
  label: 'system',
  schemas: { nb: '/usr/share/ovn/ovn-nb.ovsschema', sb: '/usr/share/ovn/ovn-sb.ovsschema' },
  command: (tool) => ({ command: tool, args: [] }),
}

/** An install root lacks what a central needs. Not retryable: the operator fixes the root. */
export class OvnInstallInvalid extends HydrazineError {
  constructor(
    readonly root: string,
    why: string,
  ) {
    super('OVN_INSTALL_INVALID', `${root} is not an OVN install: ${why}`)
  }
}

const BIN_DIRS = ['usr/bin', 'usr/sbin', 'bin', 'sbin']
const SCHEMA_DIRS = ['usr/share/ovn', 'share/ovn']
/** Where a root's own dynamic loader lives, per Node architecture (Debian's paths). */
const LOADERS: Readonly<Record<string, readonly string[]>> = {
  x64: ['usr/lib64/ld-linux-x86-64.so.2', 'lib64/ld-linux-x86-64.so.2'],
  arm64: ['usr/lib/ld-linux-aarch64.so.1', 'lib/ld-linux-aarch64.so.1'],
}
const LIBRARY_DIRS: Readonly<Record<string, readonly string[]>> = {
  x64: ['lib/x86_64-linux-gnu', 'usr/lib/x86_64-linux-gnu'],
  arm64: ['lib/aarch64-linux-gnu', 'usr/lib/aarch64-linux-gnu'],
}

/**
 * The OVN install under `root`: each of `OVN_TOOLS` under `usr/bin`, `usr/sbin`, `bin` or
 * `sbin`, and `ovn-nb.ovsschema` / `ovn-sb.ovsschema` under `usr/share/ovn` or
 * `share/ovn`. When the root has its own dynamic loader (a Debian root), programs run as
 * `<loader> --library-path <root's lib dirs> <program>`: the process is the program's
 * own (its pid, its pid file), linked against the root's libraries only. Throws
 * OvnInstallInvalid naming what is missing.
 *
 * @example
 * const ovn = ovnInstallAt('/var/lib/hydrazine/ovn-installs/debian-13')
 * const { command, args } = ovn.command('ovn-northd')
 * // command: '…/usr/lib64/ld-linux-x86-64.so.2', args: ['--library-path', '…', '…/ovn-northd']
 */
export function ovnInstallAt(root: string): OvnInstall {
  if (!isAbsolute(root)) throw new OvnInstallInvalid(root, 'not an absolute path')
  if (!existsSync(root)) throw new OvnInstallInvalid(root, 'no such directory')
  const programs = new Map<OvnTool, string>()
  const missing: string[] = []
  for (const tool of OVN_TOOLS) {
    const found = BIN_DIRS.map((dir) => join(root, dir, tool)).find(executable)
    if (found) programs.set(tool, found)
    else missing.push(tool)
  }
  if (missing.length > 0) {
    throw new OvnInstallInvalid(root, `no ${missing.join(', ')} in ${BIN_DIRS.join(', ')}`)
  }
  const schemaDir = SCHEMA_DIRS.map((dir) => join(root, dir)).find((dir) =>
    existsSync(join(dir, 'ovn-nb.ovsschema')),
  )
  if (!schemaDir) {
    throw new OvnInstallInvalid(root, `no ovn-nb.ovsschema in ${SCHEMA_DIRS.join(' or ')}`)
  }
  const loader = (LOADERS[process.arch] ?? []).map((p) => join(root, p)).find(existsSync)
  const libraries = (LIBRARY_DIRS[process.arch] ?? [])
    .map((dir) => join(root, dir))
    .filter(existsSync)
  return {
    label: root,
    root,
    schemas: { nb: join(schemaDir, 'ovn-nb.ovsschema'), sb: join(schemaDir, 'ovn-sb.ovsschema') },
    command(tool) {
      const program = programs.get(tool) ?? join(root, 'usr/bin', tool)
      return loader
        ? { command: loader, args: ['--library-path', libraries.join(':'), program] }
        : { command: program, args: [] }
    },
  }
}

/**
 * The version a program prints first (`ovn-northd 25.03.0` → `25.03.0`), from the output
 * of `--version` or `ovn-appctl version`; undefined when there is none.
 */
export function ovnVersionIn(output: string): string | undefined {
  return /^\S+(?: \([^)]*\))? (\d+\.\d+(?:\.\d+)?)/m.exec(output)?.[1]
}

/**
 * Compares two OVN release versions by year and month (`23.03.1` and `23.03.0` are the
 * same release): negative when `a` is older than `b`, 0 when the same, positive when newer.
 */
export function compareOvnReleases(a: string, b: string): number {
  const [ay = 0, am = 0] = a.split('.').map(Number)
  const [by = 0, bm = 0] = b.split('.').map(Number)
  return ay - by || am - bm
}

function executable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK)
    return true
  } catch {
    return false
  }
}
