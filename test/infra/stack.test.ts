import { execFile, spawn } from 'node:child_process'
import { chmod, stat, writeFile } from 'node:fs/promises'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { DataDirInUseError, type LocalRedis, startLocalStack } from '../../infra/local/stack.ts'
import { startDaemon } from '../../lib/process/daemon.ts'
import { DaemonStartError, MissingBinaryError } from '../../lib/process/errors.ts'
import { eventually, processesMentioning } from '../helpers/processes.ts'
import { tempDir } from '../helpers/stack.ts'

const run = promisify(execFile)

t.test('starts Redis, an OVN central and FRR that answer, and stops all of them', async (t) => {
  const dataDir = await tempDir(t)
  const stack = await startLocalStack({ dataDir })
  t.teardown(() => stack.stop())
  if (!stack.redis || !stack.ovn || !stack.frr) throw new Error('stack is missing a service')

  const ping = await redisCli(stack.redis, ['ping'])
  t.equal(ping.stdout.trim(), 'PONG', 'redis answers')
  const policy = await redisCli(stack.redis, ['config', 'get', 'maxmemory-policy'])
  t.match(policy.stdout, /noeviction/, 'redis never evicts')
  const aof = await redisCli(stack.redis, ['config', 'get', 'appendonly'])
  t.match(aof.stdout, /yes/, 'redis keeps an append-only file')
  const fsync = await redisCli(stack.redis, ['config', 'get', 'appendfsync'])
  t.match(fsync.stdout, /always/, 'and syncs it before it answers: nothing accepted is lost')
  const memory = await redisCli(stack.redis, ['config', 'get', 'maxmemory'])
  t.match(memory.stdout, /maxmemory\s+2147483648/, 'redis memory is bounded')

  await run('ovn-nbctl', [`--db=${stack.ovn.nb.unix}`, 'ls-add', 'probe'])
  await run('ovn-nbctl', [`--db=${stack.ovn.nb.unix}`, '--wait=sb', 'sync'])
  const datapaths = await run('ovn-sbctl', [
    `--db=${stack.ovn.sb.remote}`,
    '--bare',
    '--columns=external_ids',
    'list',
    'Datapath_Binding',
  ])
  t.match(datapaths.stdout, /probe/, 'northd compiled an NB switch into the SB over TCP')

  const bgp = await run('vtysh', ['--vty_socket', stack.frr.vtyDir, '-c', 'show running-config'])
  t.match(bgp.stdout, /router bgp 65000/, 'bgpd answers through vtysh')

  t.ok((await processesMentioning(dataDir)).length >= 7, 'every daemon runs under the data dir')
  await stack.stop()
  t.same(await processesMentioning(dataDir), [], 'no daemon left after stop')
})

t.test('a data dir below a private (0700) directory works, and stays private', async (t) => {
  // As `git clone` into /root or a `mktemp -d` dir leaves it: FRR's default user (frr)
  // could not even reach its pid file here.
  const privateDir = await tempDir(t)
  await chmod(privateDir, 0o700)
  const dataDir = join(privateDir, 'hydrazine', '.hydrazine')
  const stack = await startLocalStack({ dataDir })
  t.teardown(() => stack.stop())
  if (!stack.redis || !stack.ovn || !stack.frr) throw new Error('stack is missing a service')

  const bgp = await run('vtysh', ['--vty_socket', stack.frr.vtyDir, '-c', 'show running-config'])
  t.match(bgp.stdout, /router bgp 65000/, 'bgpd answers through vtysh')
  const ping = await redisCli(stack.redis, ['ping'])
  t.equal(ping.stdout.trim(), 'PONG', 'redis answers')
  await run('ovn-nbctl', [`--db=${stack.ovn.nb.unix}`, '--wait=sb', 'sync'])
  t.pass('the OVN central answers and northd runs')

  t.equal((await stat(privateDir)).mode & 0o777, 0o700, 'the private directory was not opened up')
  t.equal((await stat(dataDir)).mode & 0o077, 0, 'the data dir is private to its owner')
})

t.test('a daemon refused its files says so in one line, with what to do', async (t) => {
  const dir = await tempDir(t)
  // What zebra prints when its user cannot reach the data dir.
  const line =
    "2026/11/23 08:22:46 ZEBRA: [XNZM2-2XF6G] Can't create pid lock file /root/hydrazine/.hydrazine/frr/zebra.pid (Permission denied), exiting"
  const error = await startDaemon({
    name: 'zebra',
    command: 'sh',
    args: ['-c', `echo "${line}"; exit 1`],
    logFile: join(dir, 'zebra.log'),
    ready: async () => false,
  }).catch((e: unknown) => e)
  t.type(error, DaemonStartError)
  const first = (error as Error).message.split('\n')[0] ?? ''
  t.match(first, /^zebra failed to start: exited with code 1; /)
  t.match(
    first,
    /cannot reach \/root\/hydrazine\/\.hydrazine\/frr\/zebra\.pid \(permission denied\)/,
  )
  t.match(first, /HYDRAZINE_DATA_DIR/, 'and says what to do')
})

t.test('a taken preferred port falls back to a free one', async (t) => {
  const blocker = createServer()
  await new Promise<void>((r) => blocker.listen(0, '127.0.0.1', () => r()))
  t.teardown(() => new Promise<void>((r) => blocker.close(() => r())))
  const address = blocker.address()
  const taken = typeof address === 'object' && address ? address.port : 0

  const stack = await startLocalStack({
    dataDir: await tempDir(t),
    redis: { port: taken },
    ovn: false,
    frr: false,
  })
  t.teardown(() => stack.stop())
  t.not(stack.redis?.port, taken, 'redis is not on the taken port')
  const ping = await redisCli(stack.redis, ['ping'])
  t.equal(ping.stdout.trim(), 'PONG')
})

t.test("a port taken between bgpd's pick and its bind: bgpd starts on another", async (t) => {
  // Bound and not listening: free to the pick (nothing answers), refused to bgpd's bind,
  // as a port another program took in between would be.
  const holder = spawn('python3', [
    '-c',
    'import socket,sys,time\ns=socket.socket()\ns.bind(("127.0.0.1",0))\nprint(s.getsockname()[1],flush=True)\ntime.sleep(300)',
  ])
  t.teardown(() => {
    holder.kill()
  })
  const taken = await new Promise<number>((resolve, reject) => {
    holder.stdout.once('data', (data: Buffer) => resolve(Number(String(data).trim())))
    holder.once('error', reject)
  })
  const lines: string[] = []
  const stack = await startLocalStack({
    dataDir: await tempDir(t),
    redis: false,
    ovn: false,
    frr: { bgpPort: taken },
    log: (line) => lines.push(line),
  })
  t.teardown(() => stack.stop())
  t.ok(stack.frr, 'FRR started')
  t.not(stack.frr?.bgpPort, taken, 'bgpd is not on the taken port')
  const bgp = await run('vtysh', [
    '--vty_socket',
    stack.frr?.vtyDir ?? '',
    '-c',
    'show bgp summary',
  ])
  t.match(bgp.stdout + bgp.stderr, /BGP|No BGP neighbors/, 'bgpd answers')
})

t.test('a missing binary is an error naming the Debian package', async (t) => {
  const path = process.env.PATH
  t.teardown(() => {
    process.env.PATH = path
  })
  process.env.PATH = '/nonexistent'
  const error = await startLocalStack({ dataDir: await tempDir(t), ovn: false, frr: false }).catch(
    (e: unknown) => e,
  )
  t.type(error, MissingBinaryError)
  t.match((error as Error).message, /redis-server is not installed: apt-get install redis-server/)
})

t.test(
  'a process that stopped its daemons exits at once, not after the stop timeout',
  async (t) => {
    const dir = await tempDir(t)
    const script = join(dir, 'stop.mts')
    const daemonModule = new URL('../../lib/process/daemon.ts', import.meta.url).pathname
    await writeFile(
      script,
      `import { startDaemon } from '${daemonModule}'
const d = await startDaemon({ name: 'sleeper', command: 'sleep', args: ['60'], stopTimeoutMs: 30000 })
await d.stop()
process.stdout.write(String(Date.now()))
`,
    )
    const started = Date.now()
    const { stdout } = await run(process.execPath, ['--import', 'tsx', script], { timeout: 60_000 })
    const stopped = Number(stdout)
    const lingered = Date.now() - stopped
    t.ok(stopped > started, 'the daemon was started and stopped')
    t.ok(
      lingered < 10_000,
      `Node exited ${lingered} ms after the stop, not the 30 s stop timeout later`,
    )
  },
)

t.test('a daemon that dies while starting is reported with its log', async (t) => {
  const dir = await tempDir(t)
  const error = await startDaemon({
    name: 'doomed',
    command: 'sh',
    args: ['-c', 'echo "cannot open database"; exit 3'],
    logFile: join(dir, 'doomed.log'),
    ready: async () => false,
  }).catch((e: unknown) => e)
  t.type(error, DaemonStartError)
  t.match((error as Error).message, /doomed failed to start: exited with code 3/)
  t.match((error as Error).message, /cannot open database/)
})

t.test('a daemon that crashes while the stack is up is reported', async (t) => {
  const dataDir = await tempDir(t)
  const stack = await startLocalStack({ dataDir, redis: false, frr: false })
  t.teardown(() => stack.stop())
  // Until northd answers on its control socket (on a busy machine it may not have made it
  // yet when the stack is up): a missed `exit` would leave nothing to wait for.
  const told = await eventually(
    () =>
      run('ovs-appctl', ['-t', join(dataDir, 'ovn', 'northd.ctl'), 'exit']).then(
        () => true,
        () => false,
      ),
    15_000,
  )
  t.ok(told, 'northd was told to exit')
  // The daemons' processes do not hold this one open: a timer does, while it waits.
  let timer: NodeJS.Timeout | undefined
  const exit = await Promise.race([
    stack.crashed,
    new Promise<undefined>((resolve) => {
      timer = setTimeout(() => resolve(undefined), 15_000)
    }),
  ]).finally(() => clearTimeout(timer))
  t.match(exit?.name, /northd/, 'the stack reported northd')
})

t.test('two stacks cannot share one data dir', async (t) => {
  const dataDir = await tempDir(t)
  const child = spawn(process.execPath, ['--import', 'tsx', '-e', holdStack(dataDir)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  t.teardown(() => {
    child.kill('SIGKILL')
  })
  await waitForLine(child.stdout, 'up')
  const error = await startLocalStack({ dataDir, ovn: false, frr: false }).catch((e: unknown) => e)
  t.type(error, DataDirInUseError)
})

t.test('killing the owning process with SIGKILL leaves no daemon behind', async (t) => {
  const dataDir = await tempDir(t)
  const child = spawn(process.execPath, ['--import', 'tsx', '-e', holdStack(dataDir, true)], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
  await waitForLine(child.stdout, 'up')
  t.ok((await processesMentioning(dataDir)).length >= 4, 'daemons are running')
  child.kill('SIGKILL')
  const gone = await eventually(
    async () => (await processesMentioning(dataDir)).length === 0,
    10_000,
  )
  t.ok(gone, 'every daemon exited after its owner was killed')
})

/** redis-cli against the stack's Redis, with its password (and CA when it is TLS). */
function redisCli(redis: LocalRedis | undefined, args: string[]) {
  if (!redis) throw new Error('stack without redis')
  const tls = redis.caFile ? ['--tls', '--cacert', redis.caFile] : []
  return run('redis-cli', ['-u', redis.url, '--no-auth-warning', ...tls, ...args])
}

function holdStack(dataDir: string, withOvn = false): string {
  const stackModule = new URL('../../infra/local/stack.ts', import.meta.url).href
  return `
    const { startLocalStack } = await import(${JSON.stringify(stackModule)})
    await startLocalStack({ dataDir: ${JSON.stringify(dataDir)}, ovn: ${withOvn}, frr: false })
    process.stdout.write('up\\n')
    setInterval(() => {}, 1000)
  `
}

function waitForLine(stream: NodeJS.ReadableStream | null, line: string): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = ''
    stream?.on('data', (chunk: Buffer) => {
      seen += chunk.toString()
      if (seen.split('\n').includes(line)) resolve()
    })
    stream?.on('end', () => reject(new Error(`stream ended before "${line}": ${seen}`)))
  })
}

t.test('a killed embedded Redis comes back, and OVN and FRR keep running', async (t) => {
  const dataDir = await tempDir(t)
  const stack = await startLocalStack({ dataDir })
  t.teardown(() => stack.stop())
  if (!stack.redis || !stack.ovn || !stack.frr) throw new Error('stack is missing a service')
  let crashed = false
  void stack.crashed.then(() => {
    crashed = true
  })
  await redisCli(stack.redis, ['set', 'kept', 'yes'])
  const info = await redisCli(stack.redis, ['info', 'server'])
  const pid = Number(/process_id:(\d+)/.exec(info.stdout)?.[1])
  t.ok(pid > 0, 'redis reports its pid')
  process.kill(pid, 'SIGKILL')

  const redis = stack.redis
  await eventually(async () => {
    const pong = await redisCli(redis, ['ping']).catch(() => ({ stdout: '' }))
    return pong.stdout.trim() === 'PONG'
  }, 20_000)
  t.equal((await redisCli(redis, ['get', 'kept'])).stdout.trim(), 'yes', 'with its data')
  t.notOk(crashed, 'the stack did not give up')
  await run('ovn-nbctl', [`--db=${stack.ovn.nb.unix}`, 'ls-add', 'still-here'])
  t.pass('the OVN central kept running')
  const bgp = await run('vtysh', ['--vty_socket', stack.frr.vtyDir, '-c', 'show bgp summary'])
  t.ok(bgp.stdout.length > 0, 'FRR kept running')
})
