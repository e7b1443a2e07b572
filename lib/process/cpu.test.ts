import { spawn } from 'node:child_process'
import { setTimeout as sleep } from 'node:timers/promises'
import t from 'tap'
import { processTreeCpuMs } from './cpu.ts'

t.test("a process's CPU counts its descendants' and grows while they run", async (t) => {
  // A shell (its own CPU: nothing) whose child burns CPU for a while, as a daemon under its reaper.
  const shell = spawn('sh', ['-c', 'timeout 2 sh -c "while :; do :; done"; sleep 2'], {
    stdio: 'ignore',
    detached: true,
  })
  const pid = shell.pid ?? 0
  // The whole group: the busy child too.
  t.teardown(() => process.kill(-pid, 'SIGKILL'))
  await sleep(300)
  const first = processTreeCpuMs(pid)
  await sleep(400)
  const second = processTreeCpuMs(pid)
  t.ok(first !== undefined && second !== undefined, 'read')
  t.ok((second ?? 0) - (first ?? 0) > 100, `the busy child counted (${first} → ${second} ms)`)
})

t.test('a process that is gone has none', async (t) => {
  const done = spawn('true')
  await new Promise((resolve) => done.once('exit', resolve))
  await sleep(50)
  t.equal(processTreeCpuMs(done.pid ?? 0), undefined, 'undefined, not 0')
})
