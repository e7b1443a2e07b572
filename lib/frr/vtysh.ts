import { spawn } from 'node:child_process'
import { mkdtemp, rm, writeFile } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { VtyshError } from './errors.ts'

export interface VtyshOptions {
  /** Directory of the daemons' vty sockets (`vtysh --vty_socket`). */
  readonly vtyDir: string
  /** The vtysh binary (default `vtysh` on PATH). */
  readonly binary?: string
  /** Give up on one vtysh run after this long (default 30 s). */
  readonly timeoutMs?: number
}

export interface Vtysh {
  readonly vtyDir: string
  /** Runs one show command and returns its output. */
  show(command: string): Promise<string>
  /**
   * Applies configuration-mode lines in ONE vtysh session (`vtysh -f <file>`),
   * however many there are. Throws VtyshError if any line was refused; the lines before
   * and after it are still applied, so callers re-read state rather than assume.
   */
  configure(lines: readonly string[]): Promise<void>
}

/** A vtysh runner for one FRR instance. Unix sockets work across network namespaces. */
export function createVtysh({ vtyDir, binary = 'vtysh', timeoutMs = 30_000 }: VtyshOptions): Vtysh {
  const run = (args: readonly string[]) =>
    new Promise<string>((resolve, reject) => {
      const child = spawn(binary, ['--vty_socket', vtyDir, ...args], {
        stdio: ['ignore', 'pipe', 'pipe'],
        timeout: timeoutMs,
      })
      const out: Buffer[] = []
      const err: Buffer[] = []
      child.stdout.on('data', (b: Buffer) => out.push(b))
      child.stderr.on('data', (b: Buffer) => err.push(b))
      child.once('error', (cause) => reject(new VtyshError(vtyDir, cause.message, { cause })))
      child.once('close', (code, signal) => {
        const stdout = Buffer.concat(out).toString()
        if (code === 0) return resolve(stdout)
        const detail = `${Buffer.concat(err).toString()}${stdout}`.trim().slice(0, 2000)
        reject(new VtyshError(vtyDir, `${args.join(' ')} exited ${signal ?? code}: ${detail}`))
      })
    })

  return {
    vtyDir,
    show: (command) => run(['-c', command]),
    async configure(lines) {
      if (lines.length === 0) return
      // vtysh -f wants a file it can open (a pipe's /dev/stdin is a socket here).
      const dir = await mkdtemp(join(tmpdir(), 'hz-vtysh-'))
      try {
        const file = join(dir, 'commands.conf')
        await writeFile(file, `${lines.join('\n')}\n`)
        await run(['-f', file])
      } finally {
        await rm(dir, { recursive: true, force: true })
      }
    },
  }
}
