/**
 * Starts programs from a small helper process (`launcher-helper.mjs`) instead of this one.
 *
 * Node starts a program by forking itself: the kernel copies the page tables of the whole
 * process, and every page this process writes afterwards takes a copy-on-write fault. A
 * controller with a few hundred MB of heap pays for each program it starts far more than
 * the program itself costs — measured on the 2-core development VM, a central's start
 * (seven programs) cost the controller ~135 ms of CPU, most of it in those faults (one
 * fork `spawn('true')` from a 444 MB process: 13.5 ms, and 15 µs per page written after).
 * The helper, ~40 MB and quiet, forks instead; this process only sends it a message.
 *
 * The helper is forked once, on first use (while this process is young is cheapest), and
 * again after it died. It does not keep this process alive. When this process exits — even
 * by SIGKILL — the helper's channel closes and it exits; every daemon's stdin pipe, which
 * the helper held, then sees end-of-file and its reaper stops it (lib/process/reaper.sh).
 *
 * @example
 * const { stdout } = await Launcher.shared().run('ovsdb-tool', ['--version'])
 */
import { type ChildProcess, fork } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { HydrazineError } from '../errors.ts'
import { isAlive } from './pids.ts'

const helperScript = fileURLToPath(new URL('./launcher-helper.mjs', import.meta.url))

/** How a program started through the launcher ended. */
export interface LaunchedExit {
  /** Its exit status, or null when a signal ended it. */
  readonly status: number | null
  readonly signal: NodeJS.Signals | null
}

/** A long-running program started through the launcher. */
export interface Launched {
  readonly pid: number
  /** Resolves once it has exited (or, should the helper die, once the pid is gone). */
  readonly exited: Promise<LaunchedExit>
}

export interface RunOptions {
  readonly env?: NodeJS.ProcessEnv
  readonly cwd?: string
  /** Stopped (SIGTERM) after this long; the run then fails. */
  readonly timeoutMs?: number
}

export interface SpawnOptions {
  readonly env?: NodeJS.ProcessEnv
  readonly cwd?: string
  /** Receives its stdout and stderr (appended); default: discarded. */
  readonly logFile?: string
}

/** A program could not be started, or the helper that starts programs is gone. */
export class LaunchError extends HydrazineError {
  constructor(
    readonly program: string,
    reason: string,
  ) {
    super('LAUNCH_FAILED', `cannot run ${program}: ${reason}`, { retryable: true })
  }
}

/**
 * A program run through the launcher ended other than with status 0, or was stopped for
 * running past its timeout (`timedOutMs`: the timeout; `signal` the one that stopped it).
 */
export class ProgramFailedError extends HydrazineError {
  constructor(
    readonly program: string,
    readonly args: readonly string[],
    readonly status: number | null,
    readonly signal: NodeJS.Signals | null,
    readonly stdout: string,
    readonly stderr: string,
    readonly timedOutMs?: number,
  ) {
    super(
      'PROGRAM_FAILED',
      `${[program, ...args].join(' ')} ${endOf(status, signal, timedOutMs)}${
        stderr.trim() ? `: ${stderr.trim()}` : ''
      }`,
    )
  }
}

/** How a failed run ended, as its error says it. */
function endOf(
  status: number | null,
  signal: NodeJS.Signals | null,
  timedOutMs: number | undefined,
): string {
  if (timedOutMs !== undefined) return `stopped after its timeout of ${timedOutMs} ms`
  return signal ? `ended by ${signal}` : `exited ${status}`
}

/** What the helper answers (launcher-helper.mjs). */
type Reply =
  | {
      readonly op: 'ran'
      readonly id: number
      readonly status: number | null
      readonly signal: NodeJS.Signals | null
      readonly stdout: string
      readonly stderr: string
      readonly error?: string
      readonly timedOutMs?: number
    }
  | { readonly op: 'spawned'; readonly id: number; readonly pid: number }
  | { readonly op: 'failed'; readonly id: number; readonly error: string }
  | {
      readonly op: 'exit'
      readonly pid: number
      readonly status: number | null
      readonly signal: NodeJS.Signals | null
    }

interface Pending {
  readonly program: string
  readonly args: readonly string[]
  readonly resolve: (reply: Reply) => void
  readonly reject: (error: Error) => void
}

/** How often a daemon the dead helper started is checked for, until its reaper stops it. */
const ORPHAN_POLL_MS = 100

let shared: Launcher | undefined

export class Launcher {
  #helper: ChildProcess | undefined
  #nextId = 1
  readonly #pending = new Map<number, Pending>()
  readonly #running = new Map<number, (exit: LaunchedExit) => void>()
  /** Exits of programs just spawned, until `spawn` hands them out. */
  readonly #exits = new Map<number, Promise<LaunchedExit>>()

  /** This process's launcher (one helper per process). */
  static shared(): Launcher {
    shared ??= new Launcher()
    return shared
  }

  /** Runs `program` to its end; resolves its output, rejects ProgramFailedError or LaunchError. */
  async run(
    program: string,
    args: readonly string[],
    options: RunOptions = {},
  ): Promise<{ stdout: string; stderr: string }> {
    const reply = await this.#request(program, args, {
      op: 'run',
      env: options.env ?? process.env,
      ...(options.cwd ? { cwd: options.cwd } : {}),
      ...(options.timeoutMs ? { timeoutMs: options.timeoutMs } : {}),
    })
    if (reply.op !== 'ran') throw new LaunchError(program, 'unexpected answer from the helper')
    if (reply.error !== undefined && reply.status === null && reply.signal === null) {
      throw new LaunchError(program, reply.error)
    }
    if (reply.status !== 0 || reply.timedOutMs !== undefined) {
      throw new ProgramFailedError(
        program,
        args,
        reply.status,
        reply.signal,
        reply.stdout,
        reply.stderr,
        reply.timedOutMs,
      )
    }
    return { stdout: reply.stdout, stderr: reply.stderr }
  }

  /**
   * Starts `program` in a process group of its own (its pid is the group's), its stdin a
   * pipe the helper holds for as long as this process lives.
   */
  async spawn(
    program: string,
    args: readonly string[],
    options: SpawnOptions = {},
  ): Promise<Launched> {
    const reply = await this.#request(program, args, {
      op: 'spawn',
      env: options.env ?? process.env,
      ...(options.cwd ? { cwd: options.cwd } : {}),
      ...(options.logFile ? { logFile: options.logFile } : {}),
    })
    if (reply.op === 'failed') throw new LaunchError(program, reply.error)
    if (reply.op !== 'spawned') throw new LaunchError(program, 'unexpected answer from the helper')
    const { pid } = reply
    const exited = this.#exits.get(pid)
    this.#exits.delete(pid)
    if (!exited) throw new LaunchError(program, 'the helper lost it')
    return { pid, exited }
  }

  /** Stops the helper (the daemons it started are then stopped by their reapers). */
  close(): void {
    this.#helper?.kill('SIGKILL')
  }

  #request(
    program: string,
    args: readonly string[],
    fields: Record<string, unknown>,
  ): Promise<Reply> {
    const helper = this.#ensureHelper()
    const id = this.#nextId++
    return new Promise<Reply>((resolve, reject) => {
      this.#pending.set(id, { program, args, resolve, reject })
      // Awaited answers keep this process alive; an idle helper does not.
      helper.channel?.ref()
      helper.send({ ...fields, id, file: program, args: [...args] }, (error) => {
        if (!error) return
        this.#pending.delete(id)
        this.#idle(helper)
        reject(new LaunchError(program, `the helper cannot be reached: ${error.message}`))
      })
    })
  }

  #ensureHelper(): ChildProcess {
    const current = this.#helper
    if (current?.connected) return current
    const helper = fork(helperScript, [], {
      // Plain JavaScript: none of this process's loaders or flags.
      execArgv: [],
      stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
      // Out of the terminal's process group: it leaves when this process does, not on ^C.
      detached: true,
      serialization: 'json',
    })
    helper.unref()
    helper.channel?.unref()
    helper.on('message', (reply: Reply) => this.#answer(helper, reply))
    helper.on('error', () => {})
    helper.once('exit', () => this.#lost(helper))
    this.#helper = helper
    return helper
  }

  #answer(helper: ChildProcess, reply: Reply): void {
    if (reply.op === 'exit') {
      const done = this.#running.get(reply.pid)
      this.#running.delete(reply.pid)
      done?.({ status: reply.status, signal: reply.signal })
      return
    }
    // Watched at once: its exit may be the very next message, before `spawn` resumes.
    if (reply.op === 'spawned') {
      const { pid } = reply
      this.#exits.set(pid, new Promise((resolve) => this.#running.set(pid, resolve)))
    }
    const pending = this.#pending.get(reply.id)
    this.#pending.delete(reply.id)
    this.#idle(helper)
    pending?.resolve(reply)
  }

  #idle(helper: ChildProcess): void {
    if (this.#pending.size === 0) helper.channel?.unref()
  }

  /**
   * The helper died: fail what waits on it; report its daemons gone once they are (their
   * reapers, whose pipes closed with it, stop them within seconds).
   */
  #lost(helper: ChildProcess): void {
    if (this.#helper === helper) this.#helper = undefined
    for (const [id, pending] of this.#pending) {
      this.#pending.delete(id)
      pending.reject(new LaunchError(pending.program, 'the helper that starts programs exited'))
    }
    for (const [pid, done] of this.#running) {
      this.#running.delete(pid)
      const poll = setInterval(() => {
        if (isAlive(pid)) return
        clearInterval(poll)
        done({ status: null, signal: 'SIGKILL' })
      }, ORPHAN_POLL_MS)
    }
  }
}
