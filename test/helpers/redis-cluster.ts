/**
 * A private Redis Cluster for tests and benchmarks: three masters from Debian's
 * `redis-server` (`cluster-enabled yes`) on free loopback ports under a temp directory,
 * joined with `redis-cli --cluster create`, password-protected like the embedded Redis.
 * Stopped when the test ends, whether it passed or not.
 */
import { execFile } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { mkdir } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { Redis } from 'ioredis'
import { type Daemon, startDaemon } from '../../lib/process/daemon.ts'
import { freePort } from '../../lib/process/ports.ts'
import { eventually } from './processes.ts'
import { type Teardown, tempDir } from './stack.ts'

const run = promisify(execFile)

export interface LocalRedisCluster {
  /** `redis+cluster://default:PASSWORD@127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3` */
  readonly url: string
  readonly password: string
  readonly ports: readonly number[]
  /** A plain client of one master (its own slots only). */
  node(index: number): Redis
  stop(): Promise<void>
}

/**
 * Starts a `masters`-node Redis Cluster (default 3) and waits until every node says
 * `cluster_state:ok`.
 *
 * @example
 * const cluster = await withRedisCluster(t)
 * const controller = await startController({ redisUrl: cluster.url, … })
 */
export async function withRedisCluster(t: Teardown, masters = 3): Promise<LocalRedisCluster> {
  const dir = await tempDir(t, 'hz-cluster-')
  const password = randomBytes(16).toString('hex')
  const daemons: Daemon[] = []
  const clients: Redis[] = []
  const stop = async () => {
    for (const client of clients.splice(0)) client.disconnect()
    await Promise.all(daemons.splice(0).map((d) => d.stop()))
  }
  t.teardown(stop)
  const ports: number[] = []
  for (let i = 0; i < masters; i++) {
    const port = await freePort()
    const nodeDir = join(dir, `node-${i}`)
    await mkdir(nodeDir, { recursive: true })
    daemons.push(
      await startDaemon({
        name: `redis-server(cluster ${i})`,
        command: 'redis-server',
        args: [
          '--port',
          String(port),
          '--bind',
          '127.0.0.1',
          '--dir',
          nodeDir,
          '--cluster-enabled',
          'yes',
          '--cluster-config-file',
          join(nodeDir, 'nodes.conf'),
          '--cluster-node-timeout',
          '5000',
          '--requirepass',
          password,
          '--masterauth',
          password,
          '--appendonly',
          'yes',
          '--appendfsync',
          'always',
          '--save',
          '',
          '--maxmemory-policy',
          'noeviction',
          '--daemonize',
          'no',
          '--logfile',
          '',
        ],
        logFile: join(nodeDir, 'redis.log'),
        ready: async () => {
          const probe = new Redis({ port, password, lazyConnect: true, maxRetriesPerRequest: 0 })
          probe.on('error', () => {})
          try {
            await probe.connect()
            return (await probe.ping()) === 'PONG'
          } catch {
            return false
          } finally {
            probe.disconnect()
          }
        },
      }),
    )
    ports.push(port)
  }
  await run('redis-cli', [
    '-a',
    password,
    '--no-auth-warning',
    '--cluster',
    'create',
    ...ports.map((p) => `127.0.0.1:${p}`),
    '--cluster-replicas',
    '0',
    '--cluster-yes',
  ])
  const node = (index: number) => {
    const client = new Redis({ port: ports[index] ?? 0, password })
    client.on('error', () => {})
    clients.push(client)
    return client
  }
  const probes = ports.map((_, i) => node(i))
  await eventually(async () => {
    const states = await Promise.all(probes.map((p) => p.cluster('INFO') as Promise<string>))
    return states.every((s) => s.includes('cluster_state:ok'))
  }, 20_000)
  return {
    url: `redis+cluster://default:${password}@${ports.map((p) => `127.0.0.1:${p}`).join(',')}`,
    password,
    ports,
    node,
    stop,
  }
}
