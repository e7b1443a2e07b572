import { connect, createServer, isIP } from 'node:net'

/** Asks the kernel for a TCP port that is free on `host` right now. */
export function freePort(host = '127.0.0.1'): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer()
    server.unref()
    server.once('error', reject)
    server.listen(0, host, () => {
      const address = server.address()
      const port = typeof address === 'object' && address ? address.port : 0
      server.close(() => resolve(port))
    })
  })
}

/** True when something accepts connections on `tcp` host:port or on a unix socket path. */
export function canConnect(
  target: { port: number; host?: string } | { path: string },
  timeoutMs = 500,
): Promise<boolean> {
  return new Promise((resolve) => {
    const socket =
      'path' in target
        ? connect({ path: target.path })
        : connect({ port: target.port, host: target.host ?? '127.0.0.1' })
    const done = (ok: boolean) => {
      socket.destroy()
      resolve(ok)
    }
    socket.setTimeout(timeoutMs, () => done(false))
    socket.once('connect', () => done(true))
    socket.once('error', () => done(false))
  })
}

/**
 * True for a loopback address (127.0.0.0/8, ::1, ::ffff:127.x): only this machine can
 * connect there, so plaintext is acceptable; anywhere else Hydrazine speaks TLS.
 */
export function isLoopback(address: string): boolean {
  const bare = address.replace(/^\[|\]$/g, '')
  if (isIP(bare) === 4) return bare.startsWith('127.')
  if (isIP(bare) === 6) {
    const lower = bare.toLowerCase()
    return lower === '::1' || /^(0*:)*:?0*1$/.test(lower) || lower.startsWith('::ffff:127.')
  }
  return bare === 'localhost'
}
