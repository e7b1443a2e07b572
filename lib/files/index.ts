/**
 * lib/files: files a restart reads, written so that a power cut leaves the old content or
 * the new, never a part of it (the PKI, tokens, ports, ACL files, a central's databases).
 *
 * The data goes to a temporary file in the same directory, is flushed to disk (fsync),
 * renamed over the target, and the directory is flushed too: the rename itself survives
 * the cut. A temporary file a cut left behind is named `<target>.<pid>.<random>.tmp`;
 * `removeLeftovers` clears those of one target.
 *
 * @example
 * await writeFileAtomic('.hydrazine/operator-token', `${token}\n`, { mode: 0o600 })
 * await renameDurably('nb.db.tmp', 'nb.db') // a database ovsdb-tool made under a temp name
 */
import { randomBytes } from 'node:crypto'
import { open, readdir, rename, rm } from 'node:fs/promises'
import { basename, dirname, join } from 'node:path'

export interface WriteOptions {
  /** Mode of the file from its first byte (default 0o644 less the umask). */
  readonly mode?: number
}

/** A temporary name beside `path`, unique to this process and call. */
export function tempNameFor(path: string): string {
  return `${path}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`
}

/**
 * Writes `data` to `path` whole or not at all: temp file in the same directory, fsync,
 * rename, fsync of the directory. With `mode`, the file has it from its first byte.
 */
export async function writeFileAtomic(
  path: string,
  data: string | Uint8Array,
  options: WriteOptions = {},
): Promise<void> {
  const temp = tempNameFor(path)
  try {
    const handle = await open(temp, 'wx', options.mode ?? 0o644)
    try {
      await handle.writeFile(data)
      // The umask may have taken bits the caller asked for, or left more than it wants.
      if (options.mode !== undefined) await handle.chmod(options.mode)
      await handle.sync()
    } finally {
      await handle.close()
    }
    await renameDurably(temp, path)
  } catch (error) {
    await rm(temp, { force: true })
    throw error
  }
}

/**
 * Renames `from` (a file already written) to `to` so that the rename survives a power
 * cut: `from`'s data is flushed first, then the directory after the rename. Both are in
 * one directory.
 */
export async function renameDurably(from: string, to: string): Promise<void> {
  await syncFile(from)
  await rename(from, to)
  await syncDir(dirname(to))
}

/** Flushes a file's data to disk (fsync). */
export async function syncFile(path: string): Promise<void> {
  const handle = await open(path, 'r')
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

/** Flushes a directory's entries (files made, renamed, removed in it) to disk. */
export async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r')
  try {
    await handle.sync()
  } finally {
    await handle.close()
  }
}

/**
 * Removes the temporary files `writeFileAtomic` (or a caller using `tempNameFor`) left
 * beside `path` when a cut stopped it: `<name>.<pid>.<hex>.tmp`, and files whose name
 * starts with such a name (a lock file a tool kept beside it, e.g. `.<name>…tmp.~lock~`).
 * Returns the names removed.
 */
export async function removeLeftovers(path: string): Promise<string[]> {
  const dir = dirname(path)
  const name = basename(path)
  const ours = new RegExp(`^\\.?${escapeRegExp(name)}\\.\\d+\\.[0-9a-f]+\\.tmp`)
  const entries = await readdir(dir).catch(() => [] as string[])
  const left = entries.filter((entry) => ours.test(entry))
  for (const entry of left) await rm(join(dir, entry), { force: true })
  if (left.length > 0) await syncDir(dir)
  return left
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')
}
