/**
 * Runs the `ovn-trace` binary against one central's Southbound: read-only (ovn-trace
 * only reads the SB, and simulates the logical flows in its own memory), bounded in time
 * and output. Answers its detailed output, the text `parseTrace` reads.
 */
import { execFile } from 'node:child_process'
import { parseRemote } from '../remote.ts'
import { TraceUnavailable } from './errors.ts'

/** Traces `flow` entering `datapath` in the SB at `remote`; resolves ovn-trace's output. */
export type OvnTrace = (remote: string, datapath: string, flow: string) => Promise<string>

export interface OvnTraceOptions {
  /** The binary (default `ovn-trace` from PATH). */
  readonly binary?: string
  /** Longest a trace may take (default 15 s): a Southbound that does not answer. */
  readonly timeoutMs?: number
  /** Largest output kept (default 4 MiB). */
  readonly maxBytes?: number
  /** Certificates for an `ssl:` Southbound, as ovn-trace's `-p`, `-c`, `-C` (file paths). */
  readonly tls?: { readonly key: string; readonly cert: string; readonly ca: string }
  /**
   * Most ovn-trace processes at once (default 4); more wait their turn. Each reads a whole
   * Southbound, so many callers at once must not load the machine or the centrals.
   */
  readonly maxConcurrent?: number
}

/**
 * @example
 * const trace = createOvnTrace()
 * const text = await trace('unix:/run/ovn/sb.sock', 'hz/g/ls', 'inport == "hz/g/h1" && …')
 */
export function createOvnTrace(options: OvnTraceOptions = {}): OvnTrace {
  const binary = options.binary ?? 'ovn-trace'
  const timeout = options.timeoutMs ?? 15_000
  const maxBuffer = options.maxBytes ?? 4 * 1024 * 1024
  const turns = turnstile(options.maxConcurrent ?? 4)
  return function ovnTrace(remote, datapath, flow) {
    let target: ReturnType<typeof parseRemote>
    try {
      target = parseRemote(remote)
    } catch (error) {
      return Promise.reject(
        new TraceUnavailable(`${remote} is not an OVSDB remote`, { cause: error }),
      )
    }
    if (target.kind === 'ssl' && !options.tls) {
      return Promise.reject(
        new TraceUnavailable(
          `ovn-trace against ${remote}: an ssl: Southbound needs certificates, and none are configured`,
        ),
      )
    }
    const tls = target.kind === 'ssl' && options.tls ? options.tls : undefined
    const args = [
      `--db=${remote}`,
      ...(tls
        ? [`--private-key=${tls.key}`, `--certificate=${tls.cert}`, `--ca-cert=${tls.ca}`]
        : []),
      '--detailed',
      '--',
      datapath,
      flow,
    ]
    return turns(
      () =>
        new Promise<string>((resolve, reject) => {
          execFile(
            binary,
            args,
            { timeout, maxBuffer, killSignal: 'SIGKILL', env: { ...process.env, LC_ALL: 'C' } },
            (error, stdout, stderr) => {
              if (error) {
                const why = error.killed
                  ? `no answer within ${timeout} ms`
                  : stderr.trim() || error.message
                const message = `ovn-trace against ${remote}: ${why.split('\n').slice(-3).join(' ')}`
                reject(new TraceUnavailable(message, { output: stdout, cause: error }))
                return
              }
              if (!stdout.startsWith('# ')) {
                const first = (stdout || stderr).trim().split('\n')[0] ?? ''
                reject(
                  new TraceUnavailable(`ovn-trace against ${remote}: ${first}`, { output: stdout }),
                )
                return
              }
              resolve(stdout)
            },
          )
        }),
    )
  }
}

/** Runs at most `max` of the works given to it at once, the others in order after. */
function turnstile(max: number): <T>(work: () => Promise<T>) => Promise<T> {
  let running = 0
  const waiting: (() => void)[] = []
  return async (work) => {
    // A work that ends hands its turn to the next one waiting, if any.
    if (running < max) running++
    else await new Promise<void>((go) => waiting.push(go))
    try {
      return await work()
    } finally {
      const next = waiting.shift()
      if (next) next()
      else running--
    }
  }
}
