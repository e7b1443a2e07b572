/**
 * A persistent connection to one FRR daemon's vty socket (`<vtyDir>/bgpd.vty`), the way
 * `vtysh` itself talks to the daemons, without starting a `vtysh` process per call (each
 * costs ~30 ms; a command over an open socket costs well under 1 ms).
 *
 * The protocol is FRR's vtysh protocol: each command is sent NUL-terminated, and the
 * daemon answers with the command's output followed by three NUL bytes and the command's
 * status byte (`CMD_SUCCESS` = 0). Commands are executed in order, one connection's node
 * (view, config, `router bgp`, …) is shared by its commands, so whole sessions run one at
 * a time.
 *
 * The connection is opened lazily; when it drops (the daemon exited or restarted) the
 * commands waiting on it fail with a retryable `VtyshError`, and it is opened again in
 * the background: `onReconnect` listeners learn that the daemon they talk to may have
 * restarted with another configuration.
 */
import { createConnection, type Socket } from 'node:net'
import { join } from 'node:path'
import { VtyshError } from './errors.ts'

/** The status byte of a command that succeeded (FRR's `CMD_SUCCESS`). */
const CMD_SUCCESS = 0

/** One command's answer: what it printed and its status byte (0 = success). */
export interface VtyReply {
  readonly command: string
  readonly output: string
  readonly status: number
}

export interface VtyOptions {
  /** Directory of the daemons' vty sockets (`--vty_socket`). */
  readonly vtyDir: string
  /** The daemon to talk to (default `bgpd`). */
  readonly daemon?: string
  /** Give up on one session after this long and drop the connection (default 30 s). */
  readonly timeoutMs?: number
  /** How long to wait between attempts to reconnect after a drop (default 250 ms). */
  readonly reconnectMs?: number
}

export interface Vty {
  readonly vtyDir: string
  /**
   * Sends `commands` in one go and resolves with each one's reply, in order. Sessions
   * (calls) never interleave. Rejects with a retryable VtyshError when the connection is
   * down or drops meanwhile; a refused command is not an error here (see `status`).
   */
  session(commands: readonly string[]): Promise<VtyReply[]>
  /** Runs one show command; throws VtyshError if the daemon refused it. */
  show(command: string): Promise<string>
  /**
   * Applies configuration-mode lines in one session (`configure terminal` … `end`).
   * Throws VtyshError naming every refused line; the other lines are still applied, so
   * callers re-read state rather than assume.
   */
  configure(lines: readonly string[]): Promise<void>
  /** Saves the daemon's running configuration to its own config file (`write file`). */
  save(): Promise<void>
  /**
   * Calls `listener` each time a connection is opened after an earlier one dropped: the
   * daemon may have restarted, and its running configuration be its startup one.
   */
  onReconnect(listener: () => void): void
  /** Closes the connection and stops reconnecting. */
  close(): void
}

interface Pending {
  readonly command: string
  readonly resolve: (reply: VtyReply) => void
}

/**
 * @example
 * const bgpd = createVty({ vtyDir: '/var/run/frr' })
 * await bgpd.configure(['router bgp 65001', ' bgp router-id 10.0.0.1', 'exit'])
 * JSON.parse(await bgpd.show('show bgp ipv4 unicast 203.0.113.7/32 json'))
 */
export function createVty({
  vtyDir,
  daemon = 'bgpd',
  timeoutMs = 30_000,
  reconnectMs = 250,
}: VtyOptions): Vty {
  const path = join(vtyDir, `${daemon}.vty`)
  const listeners: (() => void)[] = []
  let socket: Socket | undefined
  let connecting: Promise<Socket> | undefined
  let everConnected = false
  let dropped = false
  let closed = false
  let reconnectTimer: NodeJS.Timeout | undefined
  /** Replies still to come on the current connection, in order. */
  let waiting: Pending[] = []
  /** Output of the reply being read, and how many of its terminating NULs were seen. */
  let output: Buffer[] = []
  let nuls = 0
  /** Sessions run one after another. */
  let tail: Promise<unknown> = Promise.resolve()

  const fail = (detail: string, cause?: unknown) =>
    new VtyshError(vtyDir, `${daemon}: ${detail}`, cause === undefined ? {} : { cause })

  const finish = (status: number) => {
    const text = Buffer.concat(output).toString('utf8')
    output = []
    const next = waiting.shift()
    next?.resolve({ command: next.command, output: text, status })
    // An idle connection does not keep the process alive; one awaiting replies does.
    if (waiting.length === 0) socket?.unref()
  }

  const read = (data: Buffer) => {
    let at = 0
    while (at < data.length) {
      if (nuls === 3) {
        finish(data[at] ?? 0)
        nuls = 0
        at++
      } else if (nuls > 0) {
        if (data[at] === 0) {
          nuls++
          at++
        } else {
          // NULs inside the output, not its end (FRR does not send these).
          output.push(Buffer.alloc(nuls))
          nuls = 0
        }
      } else {
        const nul = data.indexOf(0, at)
        if (nul < 0) {
          output.push(data.subarray(at))
          return
        }
        output.push(data.subarray(at, nul))
        nuls = 1
        at = nul + 1
      }
    }
  }

  const drop = (s: Socket, reason: string) => {
    if (socket !== s) return
    socket = undefined
    s.destroy()
    dropped = true
    const lost = waiting
    waiting = []
    output = []
    nuls = 0
    for (const p of lost) p.resolve({ command: p.command, output: reason, status: -1 })
    scheduleReconnect()
  }

  const scheduleReconnect = () => {
    if (closed || reconnectTimer) return
    reconnectTimer = setTimeout(() => {
      reconnectTimer = undefined
      connect().catch(() => scheduleReconnect())
    }, reconnectMs)
    reconnectTimer.unref()
  }

  const open = () =>
    new Promise<Socket>((resolve, reject) => {
      const s = createConnection({ path })
      const refused = (error: Error) => reject(fail(`cannot connect to ${path}`, error))
      s.once('error', refused)
      s.once('connect', () => {
        s.off('error', refused)
        s.on('data', read)
        s.on('error', (error) => drop(s, `connection failed: ${error.message}`))
        s.on('close', () => drop(s, 'connection closed'))
        resolve(s)
      })
    })

  const connect = async (): Promise<Socket> => {
    if (closed) throw fail('closed')
    if (socket) return socket
    connecting ??= (async () => {
      try {
        const s = await open()
        socket = s
        // A vtysh connection starts in view mode; configuration needs enable mode.
        const [enabled] = await send(s, ['enable'])
        if (enabled?.status !== CMD_SUCCESS) {
          drop(s, 'enable refused')
          throw fail(`'enable' refused: ${enabled?.output ?? 'connection lost'}`)
        }
        if (everConnected && dropped) {
          dropped = false
          for (const listener of listeners) listener()
        }
        everConnected = true
        return s
      } finally {
        connecting = undefined
      }
    })()
    return connecting
  }

  const send = (s: Socket, commands: readonly string[]) => {
    for (const command of commands) {
      if (/[\0\n]/.test(command)) throw fail(`a command may not contain NUL or newline: ${command}`)
    }
    const replies = commands.map(
      (command) => new Promise<VtyReply>((resolve) => waiting.push({ command, resolve })),
    )
    s.ref()
    s.write(commands.map((c) => `${c}\0`).join(''))
    return Promise.all(replies)
  }

  const session = (commands: readonly string[]): Promise<VtyReply[]> => {
    const run = tail.then(async () => {
      const s = await connect()
      let timer: NodeJS.Timeout | undefined
      const timedOut = new Promise<never>((_, reject) => {
        timer = setTimeout(() => {
          drop(s, 'timed out')
          reject(fail(`no answer within ${timeoutMs} ms`))
        }, timeoutMs)
      })
      try {
        const replies = await Promise.race([send(s, commands), timedOut])
        const lost = replies.find((r) => r.status === -1)
        if (lost) throw fail(lost.output)
        return replies
      } finally {
        clearTimeout(timer)
      }
    })
    tail = run.catch(() => {})
    return run
  }

  const refusedLines = (replies: readonly VtyReply[]) =>
    replies
      .filter((r) => r.status !== CMD_SUCCESS)
      .map((r) => `'${r.command.trim()}': ${r.output.trim() || `status ${r.status}`}`)

  return {
    vtyDir,
    session,
    async show(command) {
      const [reply] = await session([command])
      if (!reply || reply.status !== CMD_SUCCESS)
        throw fail(refusedLines(reply ? [reply] : [])[0] ?? command)
      return reply.output
    },
    async configure(lines) {
      if (lines.length === 0) return
      const replies = await session(['configure terminal', ...lines, 'end'])
      const refused = refusedLines(replies)
      if (refused.length > 0) throw fail(`refused ${refused.join('; ')}`)
    },
    async save() {
      const [reply] = await session(['write file'])
      if (!reply || reply.status !== CMD_SUCCESS)
        throw fail(`write file: ${reply?.output.trim() ?? 'no answer'}`)
    },
    onReconnect(listener) {
      listeners.push(listener)
    },
    close() {
      closed = true
      clearTimeout(reconnectTimer)
      if (socket) drop(socket, 'closed')
    },
  }
}
