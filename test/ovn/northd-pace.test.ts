/**
 * `SbPool.settled`, which paces a group's NB commits: it answers when ovn-northd has
 * processed a commit (the SB has the Port_Bindings of the ports it added, none of those it
 * removed), not when NB has it. A real central; northd is paused to show the difference.
 */
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import { startOvnCentral } from '../../infra/local/ovn-central.ts'
import { SbPool } from '../../lib/ovn/index.ts'
import { openCertificateAuthority } from '../../lib/pki/index.ts'
import { within } from '../../lib/process/within.ts'
import { northdAppctl } from '../helpers/northd.ts'
import { tempDir } from '../helpers/stack.ts'

const run = promisify(execFile)

t.test('settled answers once ovn-northd has processed a commit, not once NB has it', async (t) => {
  const dir = await tempDir(t)
  const pki = await openCertificateAuthority(join(dir, 'pki'))
  const { central, daemons } = await startOvnCentral({ dir: join(dir, 'ovn'), pki })
  t.teardown(async () => {
    for (const daemon of [...daemons].reverse()) await daemon.stop()
  })
  const nbctl = (...args: string[]) =>
    run('ovn-nbctl', [`--db=${central.nb.unix}`, '--timeout=10', ...args])
  const northd = (command: 'pause' | 'resume') =>
    northdAppctl(join(dir, 'ovn', 'northd.ctl'), command)
  const sb = new SbPool()
  t.teardown(() => sb.close())
  const remote = central.sb.unix

  await nbctl('ls-add', 'ls')
  const started = Date.now()
  const [answer] = await Promise.all([
    sb.settled(remote, { added: ['p1', 'p2'], removed: [] }, 10_000),
    nbctl('lsp-add', 'ls', 'p1', '--', 'lsp-add', 'ls', 'p2'),
  ])
  t.equal(answer, true, 'two ports added: settled once northd made both Port_Bindings')
  t.ok(Date.now() - started < 10_000, 'before the ceiling')
  const bindings = await run('ovn-sbctl', [
    `--db=${central.sb.unix}`,
    '--bare',
    '--columns=logical_port',
    'list',
    'Port_Binding',
  ])
  t.match(bindings.stdout, /p1/, 'the SB has them')

  t.equal(
    await sb.settled(remote, { added: ['p1'], removed: [] }, 10_000),
    true,
    'what is already processed is settled at once',
  )
  t.equal(
    await sb.settled(remote, { added: ['never-added'], removed: [] }, 300),
    false,
    'a port northd never made: not settled when the ceiling passes',
  )

  // Northd paused: NB has the change, the SB does not, so the commit is not processed.
  await northd('pause')
  await nbctl('lsp-add', 'ls', 'p3', '--', 'lsp-del', 'p1')
  t.equal(
    await sb.settled(remote, { added: ['p3'], removed: ['p1'] }, 500),
    false,
    'northd paused: NB has p3 and lacks p1, and that is not enough',
  )
  const waiting = sb.settled(remote, { added: ['p3'], removed: ['p1'] }, 10_000)
  await northd('resume')
  t.equal(await waiting, true, 'northd resumed: p3 bound, p1 gone, settled')
})

t.test('dropping the SB of a central that is gone answers its waiters at once', async (t) => {
  const dir = await tempDir(t)
  const pki = await openCertificateAuthority(join(dir, 'pki'))
  const { central, daemons } = await startOvnCentral({ dir: join(dir, 'ovn'), pki })
  const stopCentral = async () => {
    for (const daemon of [...daemons].reverse()) await daemon.stop()
  }
  t.teardown(stopCentral)
  // A request to a lost server waits up to this long for it to come back.
  const sb = new SbPool({ requestTimeoutMs: 60_000 })
  t.teardown(() => sb.close())
  const remote = central.sb.unix
  const waiting = sb.settled(remote, { added: ['never-added'], removed: [] }, 60_000)
  // Its central released (as group.delete does), then the connection dropped.
  await stopCentral()
  const dropped = await within(
    sb.drop(remote).then(() => 'dropped'),
    10_000,
    'still waiting after 10 s',
  )
  t.equal(dropped, 'dropped', 'the pool does not wait for the gone server')
  t.equal(await waiting, false, 'the waiter is told: not settled')
})
