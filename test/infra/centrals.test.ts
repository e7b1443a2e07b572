/**
 * Per-group OVN centrals against real ovsdb-server and ovn-northd: one central per group,
 * isolated; a crashed daemon brings its central back on the same files and SB port; a
 * release removes it; a new controller process finds every group's central again.
 */
import { execFile } from 'node:child_process'
import { mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises'
import { join } from 'node:path'
import { promisify } from 'node:util'
import t from 'tap'
import {
  CentralUnavailableError,
  centralDir,
  centralDirName,
  startPerGroupCentrals,
} from '../../infra/centrals/local.ts'
import type { OvnCentralEndpoints } from '../../lib/ovn/central.ts'
import { openCertificateAuthority } from '../../lib/pki/index.ts'
import { parentOf } from '../../lib/process/pids.ts'
import { eventually, processesMentioning } from '../helpers/processes.ts'
import { type Teardown, tempDir } from '../helpers/stack.ts'

const run = promisify(execFile)

/** A provider on `dataDir` (a fresh temp dir by default), closed when the test ends. */
async function centralsIn(t: Teardown, dataDir?: string, extra: { tls?: boolean } = {}) {
  const dir = dataDir ?? (await tempDir(t))
  const pki = await openCertificateAuthority(join(dir, 'pki'))
  const lines: string[] = []
  const centrals = await startPerGroupCentrals({
    dataDir: dir,
    pki,
    log: (line) => lines.push(line),
    ...extra,
  })
  t.teardown(() => centrals.close())
  return { centrals, lines, dataDir: dir, pki }
}

const nbctl = (nb: string, ...args: string[]) =>
  run('ovn-nbctl', [`--db=${nb}`, '--timeout=5', ...args])

/** Names of the NB's logical switches, sorted; throws when the NB does not answer. */
async function switches(nb: string): Promise<string[]> {
  const { stdout } = await nbctl(nb, '--bare', '--columns=name', 'list', 'Logical_Switch')
  return stdout.split('\n').filter(Boolean).sort()
}

const pidOf = async (dir: string, daemon: 'nb' | 'sb' | 'northd') =>
  Number((await readFile(join(dir, `${daemon}.pid`), 'utf8')).trim())

/** The OVN daemons (not their reapers) running with files under `dir`. */
const daemonsUnder = async (dir: string) =>
  (await processesMentioning(dir)).filter((line) => !/^\d+\s+sh\s/.test(line))

const exists = (path: string) =>
  stat(path).then(
    () => true,
    () => false,
  )

/** Waits for the provider to log the crash of `daemon`, then for `ensure` to answer. */
async function restarted(
  ensure: () => Promise<OvnCentralEndpoints>,
  lines: string[],
  daemon: string,
) {
  const logged = () => lines.some((l) => l.includes(`${daemon} exited unexpectedly`))
  if (!(await eventually(async () => logged(), 5000))) throw new Error(`no crash of ${daemon}`)
  return ensure()
}

t.test('centralDirName: safe, fixed-length and distinct names', async (t) => {
  const groups = ['a', 'A', 'tenant-a', '../../etc', 'a/b', 'ünïcode', ' ', 'x'.repeat(500)]
  const names = groups.map(centralDirName)
  for (const [i, name] of names.entries())
    t.match(name, /^g-[0-9a-f]{24}$/, `${JSON.stringify(groups[i]).slice(0, 20)} → ${name}`)
  t.equal(new Set(names).size, groups.length, 'no two groups share a directory')
  t.equal(centralDirName('tenant-a'), centralDirName('tenant-a'), 'stable')
})

t.test('two groups get two centrals, each with its own NB, SB and files', async (t) => {
  const { centrals, dataDir } = await centralsIn(t)
  const [a, a2, b] = await Promise.all([
    centrals.ensure('group-a'),
    centrals.ensure('group-a'),
    centrals.ensure('group-b'),
  ])
  t.same(a2, a, 'concurrent ensures of one group share one start')
  t.equal((await daemonsUnder(centralDir(dataDir, 'group-a'))).length, 3, 'one central for it')
  t.equal(a.nb, `unix:${join(centralDir(dataDir, 'group-a'), 'nb.sock')}`, "NB: the group's socket")
  t.equal(a.sbController, `unix:${join(centralDir(dataDir, 'group-a'), 'sb.sock')}`)
  t.match(a.sb, /^tcp:127\.0\.0\.1:\d+$/, 'SB for DPUs: TCP on loopback')
  t.not(a.sb, b.sb, 'different SB ports')
  t.not(a.nb, b.nb, 'different NB sockets')
  t.not(a.service, b.service, 'different services')
  t.equal(a.group, 'group-a')

  await nbctl(a.nb, 'ls-add', 'x')
  await nbctl(b.nb, 'ls-add', 'y')
  t.same(await switches(a.nb), ['x'], "A's NB holds only its own switch")
  t.same(await switches(b.nb), ['y'], "B's NB holds only its own switch")
  await nbctl(a.nb, '--wait=sb', 'sync')
  const sbA = await run('ovn-sbctl', [
    `--db=${a.sb}`,
    '--timeout=5',
    '--bare',
    '--columns=external_ids',
    'list',
    'Datapath_Binding',
  ])
  t.match(sbA.stdout, /x/, "northd compiled A's NB into A's SB, reachable on its TCP remote")
  // What its northd spent compiling it: the commits of A are paced by it.
  const spent = await centrals.northdCpuMs?.('group-a')
  t.ok(spent !== undefined && spent > 0, `A's ovn-northd has used CPU (${spent} ms)`)
  t.equal(await centrals.northdCpuMs?.('group-z'), undefined, 'a group without a central: unknown')

  t.same((await centrals.list()).map((e) => e.group).sort(), ['group-a', 'group-b'])
  t.same(await centrals.groups(), ['group-a', 'group-b'])

  // Started by the launcher's helper: this process, whose heap a controller's is, never
  // forks for a central (each fork costs it a copy-on-write fault per page it writes after).
  const dirA = centralDir(dataDir, 'group-a')
  for (const daemon of ['nb', 'sb', 'northd'] as const) {
    const reaper = await parentOf(await pidOf(dirA, daemon))
    const starter = reaper === undefined ? undefined : await parentOf(reaper)
    t.ok(
      starter !== undefined && starter !== process.pid,
      `${daemon}: started by ${starter}, not by this process (${process.pid})`,
    )
  }

  // One more central, alone, for the figures in docs/operations.md.
  const began = performance.now()
  await centrals.ensure('group-c')
  const startMs = Math.round(performance.now() - began)
  const dirC = centralDir(dataDir, 'group-c')
  const rss: string[] = []
  let total = 0
  for (const daemon of ['nb', 'sb', 'northd'] as const) {
    const status = await readFile(`/proc/${await pidOf(dirC, daemon)}/status`, 'utf8')
    const kb = Number(/VmRSS:\s+(\d+) kB/.exec(status)?.[1] ?? Number.NaN)
    total += kb
    rss.push(`${daemon} ${(kb / 1024).toFixed(1)} MiB`)
  }
  t.comment(`one central (fresh DBs): started in ${startMs} ms`)
  t.comment(`RSS: ${rss.join(', ')}; total ${(total / 1024).toFixed(1)} MiB`)
  t.ok(startMs < 10_000, 'a central starts in well under 10 s')
})

t.test('a crashed daemon: the central comes back on the same files and SB port', async (t) => {
  const { centrals, lines, dataDir } = await centralsIn(t)
  const dir = centralDir(dataDir, 'group-a')
  const first = await centrals.ensure('group-a')
  const other = await centrals.ensure('group-b')
  await nbctl(first.nb, 'ls-add', 'x')
  const nbPid = await pidOf(dir, 'nb')

  const killedAt = performance.now()
  process.kill(nbPid, 'SIGKILL')
  const again = await restarted(() => centrals.ensure('group-a'), lines, 'ovsdb-server(nb)')
  t.comment(`restart after SIGKILL of NB: ${Math.round(performance.now() - killedAt)} ms`)
  t.same(again, first, 'the same endpoints (SB port included)')
  t.same(await switches(again.nb), ['x'], 'the NB kept its rows')
  t.not(await pidOf(dir, 'nb'), nbPid, 'a new NB process')
  t.equal((await daemonsUnder(dir)).length, 3, 'no daemon of the old central left')
  const crashLines = lines.filter((l) => l.includes('exited unexpectedly'))
  t.equal(crashLines.length, 1, 'one line for the crash')
  t.match(crashLines[0], /group-a.*ovsdb-server\(nb\)/, 'naming the group and the daemon')
  t.same(await centrals.ensure('group-b'), other, 'the other group never noticed')

  lines.length = 0
  process.kill(await pidOf(dir, 'sb'), 'SIGKILL')
  const afterSb = await restarted(() => centrals.ensure('group-a'), lines, 'ovsdb-server(sb)')
  t.equal(afterSb.sb, first.sb, 'SB remote unchanged after an SB crash')
  await run('ovn-sbctl', [`--db=${afterSb.sb}`, '--timeout=5', 'show'])
  t.pass('and the SB answers there')
  t.equal(
    (await readFile(join(dir, 'sb.port'), 'utf8')).trim(),
    first.sb.split(':').at(-1),
    'the port is kept in sb.port',
  )

  lines.length = 0
  process.kill(await pidOf(dir, 'northd'), 'SIGKILL')
  const afterNorthd = await restarted(() => centrals.ensure('group-a'), lines, 'ovn-northd')
  await nbctl(afterNorthd.nb, 'ls-add', 'y')
  await nbctl(afterNorthd.nb, '--wait=sb', 'sync')
  t.pass('northd compiles again after its crash')
})

t.test('a lost NB database: the restarted NB is empty but answers', async (t) => {
  const { centrals, lines, dataDir } = await centralsIn(t)
  const dir = centralDir(dataDir, 'group-a')
  const first = await centrals.ensure('group-a')
  await nbctl(first.nb, 'ls-add', 'x')
  await rm(join(dir, 'nb.db'))
  process.kill(await pidOf(dir, 'nb'), 'SIGKILL')
  const again = await restarted(() => centrals.ensure('group-a'), lines, 'ovsdb-server(nb)')
  t.same(again, first, 'the same endpoints')
  t.same(await switches(again.nb), [], 'a fresh, empty NB')
  await nbctl(again.nb, 'ls-add', 'rebuilt')
  t.same(await switches(again.nb), ['rebuilt'], 'that takes writes')
})

t.test('release stops a central and removes its files; idempotent', async (t) => {
  const { centrals, dataDir } = await centralsIn(t)
  const a = await centrals.ensure('group-a')
  const b = await centrals.ensure('group-b')
  await nbctl(a.nb, 'ls-add', 'x')
  const dirA = centralDir(dataDir, 'group-a')

  await centrals.release('group-a')
  t.notOk(await exists(dirA), 'its directory is gone')
  t.same(await daemonsUnder(dirA), [], 'its daemons are gone')
  t.same(await centrals.groups(), ['group-b'])
  t.same(await centrals.list(), [b], 'only the other central runs')
  await centrals.release('group-a')
  await centrals.release('never-ensured')
  t.pass('releasing again, or a group without a central, is fine')
  t.same(await switches(b.nb), [], 'the other central still answers')

  const fresh = await centrals.ensure('group-a')
  t.same(await switches(fresh.nb), [], 'ensured again: a new, empty central')

  // Released while it starts: the start is undone, nothing is left behind.
  const starting = centrals.ensure('group-c').catch((error: unknown) => error)
  await centrals.release('group-c')
  t.type(await starting, CentralUnavailableError, 'the ensure under way fails')
  t.notOk(await exists(centralDir(dataDir, 'group-c')), 'and leaves no directory')
  t.same(await daemonsUnder(centralDir(dataDir, 'group-c')), [], 'nor a daemon')
})

t.test('a new provider on the same data dir finds every central again', async (t) => {
  const first = await centralsIn(t)
  const a = await first.centrals.ensure('group-a')
  const b = await first.centrals.ensure('group-b')
  await nbctl(a.nb, 'ls-add', 'x')
  await nbctl(b.nb, 'ls-add', 'y')
  await first.centrals.close()
  t.same(await daemonsUnder(first.dataDir), [], 'close stops every daemon')
  t.ok(await exists(centralDir(first.dataDir, 'group-a')), 'and keeps the files')
  await t.rejects(
    first.centrals.ensure('group-a'),
    CentralUnavailableError,
    'no ensure after close',
  )

  const { centrals } = await centralsIn(t, first.dataDir)
  t.same(await centrals.groups(), ['group-a', 'group-b'], 'groups() lists both')
  t.same(await centrals.list(), [], 'none runs before an ensure')
  const a2 = await centrals.ensure('group-a')
  t.same(a2, a, 'the same endpoints, SB port included')
  t.same(await switches(a2.nb), ['x'], 'and the same data')
})

t.test('a database a cut left unfinished is made again; none is left half-made', async (t) => {
  const dataDir = await tempDir(t)
  const dir = centralDir(dataDir, 'group-a')
  // What a cut during an earlier version's creation left: the file made, nothing written;
  // and what one during this version's leaves: a temporary database and its lock.
  await mkdir(dir, { recursive: true })
  await writeFile(join(dir, 'group'), 'group-a')
  await writeFile(join(dir, 'nb.db'), '')
  await writeFile(join(dir, 'sb.db.4242.0badf00d.tmp'), '')
  await writeFile(join(dir, '.sb.db.4242.0badf00d.tmp.~lock~'), '')
  // …and its small files' temporary copies, cut before their rename.
  await writeFile(join(dir, 'sb.port.4242.0badf00d.tmp'), '66')
  await writeFile(join(dir, 'group.4242.0badf00d.tmp'), 'grou')
  // …and the mark of a first start, cut before its rename: the central never served.
  await writeFile(join(dir, 'served.4242.0badf00d.tmp'), '2026-')
  const { centrals, lines } = await centralsIn(t, dataDir)
  const a = await centrals.ensure('group-a')
  await nbctl(a.nb, 'ls-add', 'x')
  t.same(await switches(a.nb), ['x'], 'the central serves')
  t.same(centrals.databases(), { damaged: [], remade: 1 }, 'the empty NB was made again')
  t.ok(
    lines.some((l) => l.includes(`${join(dir, 'nb.db')} cannot be read (it is empty)`)),
    'and the log says so',
  )
  const files = await readdir(dir)
  t.same(
    files.filter((f) => f.includes('.tmp')),
    [],
    'no temporary file is left',
  )
  t.ok(files.includes('served'), 'the central is marked as having served')
})

t.test('a damaged database of a central that served is never replaced', async (t) => {
  const first = await centralsIn(t)
  const a = await first.centrals.ensure('group-a')
  await nbctl(a.nb, 'ls-add', 'x')
  await first.centrals.close()
  const nbFile = join(centralDir(first.dataDir, 'group-a'), 'nb.db')
  await writeFile(nbFile, 'OVSDB JSON 12 0\n{"damaged')

  const { centrals } = await centralsIn(t, first.dataDir)
  const error = await centrals.ensure('group-a').catch((e: unknown) => e)
  t.type(error, CentralUnavailableError)
  t.match(error, {
    reason: 'CentralDamaged',
    retryable: false,
    message: new RegExp(
      `${nbFile} cannot be read .* served before: it is not replaced; move it aside`,
    ),
  })
  t.equal(await readFile(nbFile, 'utf8'), 'OVSDB JSON 12 0\n{"damaged', 'the file is untouched')
  t.same(centrals.databases(), { damaged: [{ group: 'group-a', file: nbFile }], remade: 0 })
  t.match(
    await centrals.ensure('group-a').catch((e: unknown) => e),
    { reason: 'CentralDamaged' },
    'and stays so',
  )

  // The operator's way out: the file moved aside, the next start makes an empty NB.
  await rename(nbFile, `${nbFile}.damaged`)
  const again = await centrals.ensure('group-a')
  t.same(await switches(again.nb), [], 'a new, empty NB, for the next apply to fill')
  t.same(centrals.databases(), { damaged: [], remade: 0 }, 'nothing damaged any more')
})

t.test('stop: the daemons go, the files stay; the next ensure starts it as it was', async (t) => {
  const { centrals, dataDir } = await centralsIn(t)
  const dir = centralDir(dataDir, 'tenant-a')
  const before = await centrals.ensure('tenant-a')
  await nbctl(before.nb, 'ls-add', 'kept')
  t.equal((await daemonsUnder(dir)).length, 3, 'NB, SB and northd run')

  // An ensure arriving while the stop runs waits for it, then starts the central again.
  const stopping = centrals.stop('tenant-a')
  const during = centrals.ensure('tenant-a')
  await stopping
  const again = await during
  t.same(again, before, 'the same NB and SB (its SB port kept: DPUs stay pointed at it)')
  t.same(await switches(again.nb), ['kept'], 'on the same databases')

  await centrals.stop('tenant-a')
  await centrals.stop('tenant-a')
  t.same(await daemonsUnder(dir), [], 'stopped (twice is no error): no daemon runs')
  t.same(await centrals.list(), [], 'and none is listed')
  t.same(await centrals.groups(), ['tenant-a'], 'the group still has its central')
  t.ok(await exists(join(dir, 'nb.db')), 'its databases stay')
  t.same(await centrals.ensure('tenant-a'), before, 'started again as it was')
  t.same(await switches(before.nb), ['kept'])

  await centrals.stop('tenant-a')
  await centrals.release('tenant-a')
  t.notOk(await exists(dir), 'a stopped central released: its files are gone')
})

t.test('an ensure whose start a stop cut short is told to ask again', async (t) => {
  const { centrals, dataDir } = await centralsIn(t)
  const dir = centralDir(dataDir, 'tenant-a')
  // The start is under way when the stop comes (its group lost its slot meanwhile).
  const starting = centrals.ensure('tenant-a')
  await centrals.stop('tenant-a')
  await t.rejects(
    starting,
    { code: 'OVN_CENTRAL_UNAVAILABLE', retryable: true, message: /stopped/ },
    'retryable: the central was stopped, not released',
  )
  t.same(await daemonsUnder(dir), [], 'no daemon runs')
  t.equal((await centrals.ensure('tenant-a')).group, 'tenant-a', 'asked again: it starts')
})
