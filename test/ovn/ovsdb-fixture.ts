/**
 * A private ovsdb-server for client tests: one database from any schema, on a unix
 * socket and a TCP port under a temp dir (and an SSL port when given certificates),
 * restartable on the same addresses.
 */
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { type Daemon, startDaemon } from '../../lib/process/daemon.ts'
import { canConnect, freePort } from '../../lib/process/ports.ts'
import { type Teardown, tempDir } from '../helpers/stack.ts'

const run = promisify(execFile)

export interface OvsdbFixture {
  readonly unix: string
  readonly tcp: string
  /** `ssl:127.0.0.1:PORT`, when started with `ssl`. */
  readonly ssl?: string
  readonly dir: string
  stop(): Promise<void>
  /** Stops and starts the server again on the same socket, port and database file. */
  restart(): Promise<void>
}

/** PEM files for `--private-key`, `--certificate` and `--ca-cert` (a `pssl:` remote). */
export interface OvsdbSslFiles {
  readonly keyFile: string
  readonly certFile: string
  readonly caFile: string
}

export async function startOvsdb(
  t: Teardown,
  schema = '/usr/share/ovn/ovn-nb.ovsschema',
  options: { ssl?: OvsdbSslFiles } = {},
): Promise<OvsdbFixture> {
  const dir = await tempDir(t, 'hz-ovsdb-')
  const file = join(dir, 'db.db')
  await run('ovsdb-tool', ['create', file, schema])
  const socket = join(dir, 'db.sock')
  const port = await freePort()
  const sslPort = options.ssl ? await freePort() : 0
  const sslArgs = options.ssl
    ? [
        `--remote=pssl:${sslPort}:127.0.0.1`,
        `--private-key=${options.ssl.keyFile}`,
        `--certificate=${options.ssl.certFile}`,
        `--ca-cert=${options.ssl.caFile}`,
      ]
    : []
  let daemon: Daemon | undefined
  const start = async () => {
    daemon = await startDaemon({
      name: 'ovsdb-server(test)',
      command: 'ovsdb-server',
      args: [
        file,
        `--remote=punix:${socket}`,
        `--remote=ptcp:${port}:127.0.0.1`,
        ...sslArgs,
        `--unixctl=${join(dir, 'db.ctl')}`,
        `--pidfile=${join(dir, 'db.pid')}`,
        `--log-file=${join(dir, 'db.log')}`,
      ],
      env: { OVS_RUNDIR: dir, OVS_DBDIR: dir, OVS_LOGDIR: dir },
      logFile: join(dir, 'db.out'),
      ready: async () =>
        (await canConnect({ path: socket })) &&
        (await canConnect({ port, host: '127.0.0.1' })) &&
        (sslPort === 0 || (await canConnect({ port: sslPort, host: '127.0.0.1' }))),
    })
  }
  const stop = async () => {
    await daemon?.stop()
    daemon = undefined
  }
  await start()
  t.teardown(stop)
  return {
    unix: `unix:${socket}`,
    tcp: `tcp:127.0.0.1:${port}`,
    ...(sslPort ? { ssl: `ssl:127.0.0.1:${sslPort}` } : {}),
    dir,
    stop,
    restart: async () => {
      await stop()
      await start()
    },
  }
}
