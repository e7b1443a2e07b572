/**
 * The launcher against real processes: programs run and daemons start from its helper,
 * never from this process; a failure says what failed; a daemon dies with its owner
 * (even one killed by SIGKILL) and with the helper; a process that used it still exits
 * on its own.
 */
import { spawn } from 'node:child_process'
import { mkdtemp, readFile, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import t from 'tap'
import { startDaemon } from './daemon.ts'
import { LaunchError, Launcher, ProgramFailedError } from './launcher.ts'
import { isAlive, parentOf } from './pids.ts'

async function gone(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs
  while (isAlive(pid)) {
    if (Date.now() > deadline) return false
    await new Promise((r) => setTimeout(r, 50))
  }
  return true
}

async function tempDir(t: { teardown(fn: () => unknown): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), 'hz-launcher-'))
  t.teardown(() => rm(dir, { recursive: true, force: true }))
  return dir
}

t.test('run: the output of a program, and what a failure says', async (t) => {
  const launcher = new Launcher()
  t.teardown(() => launcher.close())
  const ok = await launcher.run('sh', ['-c', 'echo out; echo err >&2'])
  t.same(ok, { stdout: 'out\n', stderr: 'err\n' })
  const env = await launcher.run('sh', ['-c', 'echo "$HZ_X"'], { env: { HZ_X: 'given' } })
  t.equal(env.stdout, 'given\n', 'the environment it was given')

  const failed = await launcher.run('sh', ['-c', 'echo why >&2; exit 3']).catch((e: unknown) => e)
  t.type(failed, ProgramFailedError)
  t.match(failed, { status: 3, signal: null, stderr: 'why\n', message: /exited 3: why/ })

  const missing = await launcher.run('/nonexistent/hz-program', []).catch((e: unknown) => e)
  t.type(missing, LaunchError, 'a program that cannot be started')
  t.match(missing, { message: /hz-program.*ENOENT/ })

  const slow = await launcher.run('sleep', ['5'], { timeoutMs: 200 }).catch((e: unknown) => e)
  t.type(slow, ProgramFailedError, 'stopped at its timeout')
  t.match(slow, {
    signal: 'SIGTERM',
    timedOutMs: 200,
    message: /sleep 5 stopped after its timeout of 200 ms/,
  })
})

t.test('a daemon started through it is not a child of this process', async (t) => {
  const dir = await tempDir(t)
  const launcher = new Launcher()
  t.teardown(() => launcher.close())
  const logFile = join(dir, 'out.log')
  const daemon = await startDaemon({
    name: 'sleeper',
    command: 'sh',
    args: ['-c', 'echo started; exec sleep 300'],
    logFile,
    launcher,
    ready: async () => (await readFile(logFile, 'utf8').catch(() => '')).includes('started'),
  })
  t.teardown(() => daemon.stop())
  const parent = await parentOf(daemon.pid)
  t.ok(parent !== undefined && parent !== process.pid, `its reaper's parent is ${parent}, not us`)
  t.ok(parent !== undefined && (await parentOf(parent)) === process.pid, 'but our helper')
  t.ok(daemon.running)
  await daemon.stop()
  const exit = await daemon.exited
  t.match(exit, { name: 'sleeper', signal: 'SIGTERM' }, 'stopped, and its exit reported')
  t.notOk(daemon.running)
  t.match(exit.logTail, /started/, 'its output went to its log file')
})

t.test('a daemon that exits at once is reported, not awaited forever', async (t) => {
  const launcher = new Launcher()
  t.teardown(() => launcher.close())
  const error = await startDaemon({
    name: 'quitter',
    command: 'sh',
    args: ['-c', 'exit 7'],
    launcher,
    ready: async () => false,
    readyTimeoutMs: 10_000,
  }).catch((e: unknown) => e)
  t.match(error, { code: 'DAEMON_START_FAILED', message: /quitter.*code 7/ })
})

t.test('the helper killed: its daemons go, and the next program gets a new helper', async (t) => {
  const launcher = new Launcher()
  t.teardown(() => launcher.close())
  const daemon = await startDaemon({
    name: 'sleeper',
    command: 'sleep',
    args: ['300'],
    launcher,
  })
  t.teardown(() => daemon.stop())
  const helper = await parentOf(daemon.pid)
  if (helper === undefined) throw new Error('no reaper')
  process.kill(helper, 'SIGKILL')
  t.ok(await gone(daemon.pid, 10_000), 'its reaper saw its pipe close and stopped it')
  const exit = await daemon.exited
  t.equal(exit.name, 'sleeper', 'its exit reported')
  const again = await launcher.run('echo', ['back'])
  t.equal(again.stdout, 'back\n', 'a new helper runs the next program')
})

/** A Node process that starts a daemon through the launcher and prints its pid. */
function owner(then: 'hold' | 'stop'): ReturnType<typeof spawn> {
  const daemonModule = new URL('./daemon.ts', import.meta.url).href
  const launcherModule = new URL('./launcher.ts', import.meta.url).href
  const script = `
    const { startDaemon } = await import(${JSON.stringify(daemonModule)})
    const { Launcher } = await import(${JSON.stringify(launcherModule)})
    const d = await startDaemon({ name: 'sleeper', command: 'sleep', args: ['300'], launcher: Launcher.shared() })
    process.stdout.write(d.pid + '\\n')
    ${then === 'hold' ? 'setInterval(() => {}, 1000)' : 'await d.stop()'}
  `
  return spawn(process.execPath, ['--import', 'tsx', '-e', script], {
    stdio: ['ignore', 'pipe', 'inherit'],
  })
}

function firstLine(child: ReturnType<typeof spawn>): Promise<number> {
  return new Promise((resolve, reject) => {
    let seen = ''
    child.stdout?.on('data', (chunk: Buffer) => {
      seen += chunk.toString()
      if (seen.includes('\n')) resolve(Number(seen.split('\n')[0]))
    })
    child.once('exit', () => reject(new Error(`exited before printing a pid: ${seen}`)))
  })
}

t.test('its owner killed with SIGKILL: no daemon is left behind', async (t) => {
  const child = owner('hold')
  t.teardown(() => {
    child.kill('SIGKILL')
  })
  const pid = await firstLine(child)
  t.ok(isAlive(pid), 'the daemon runs')
  child.kill('SIGKILL')
  t.ok(await gone(pid, 10_000), 'it went with its owner')
})

t.test('a process that used it exits on its own', async (t) => {
  const child = owner('stop')
  t.teardown(() => {
    child.kill('SIGKILL')
  })
  const pid = await firstLine(child)
  const exited = await new Promise<number | null | 'hung'>((resolve) => {
    const timer = setTimeout(() => resolve('hung'), 15_000)
    child.once('exit', (code) => {
      clearTimeout(timer)
      resolve(code)
    })
  })
  t.equal(exited, 0, 'nothing of the launcher held it open')
  t.notOk(isAlive(pid), 'its daemon stopped')
})
