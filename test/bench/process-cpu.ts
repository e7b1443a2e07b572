/**
 * Where a bench round's CPU went: user + system time of this process and every process it
 * started (its descendants), summed by command name (`ovn-northd`, `ovsdb-server`,
 * `redis-server`, `node` — the controller, its in-process agents and the bench itself; a
 * program run through the dynamic loader under its own name; `launcher`, the helper that
 * starts the centrals' programs).
 * Read from `/proc`, so other work on the machine is left out.
 */

import { execFile } from 'node:child_process'
import { readdir, readFile } from 'node:fs/promises'
import { promisify } from 'node:util'

interface ProcStat {
  readonly pid: number
  readonly ppid: number
  readonly comm: string
  /** utime + stime, in clock ticks. */
  readonly ticks: number
}

let clockTicks: Promise<number> | undefined
/** CPU ticks per second (`getconf CLK_TCK`). */
export function ticksPerSecond(): Promise<number> {
  clockTicks ??= promisify(execFile)('getconf', ['CLK_TCK']).then(
    ({ stdout }) => Number(stdout.trim()) || 100,
  )
  return clockTicks
}

/** User + system CPU ticks of process `pid` so far (throws when it is gone). */
export async function processTicks(pid: number): Promise<number> {
  const stat = await readStat(pid)
  if (!stat) throw new Error(`no process ${pid}`)
  return stat.ticks
}

/**
 * The program a process runs through the dynamic loader (a newer OVN's root runs as
 * `ld-linux… --library-path <dirs> <program> …`, `lib/ovn/install.ts`): its file name.
 */
async function loadedProgram(pid: number): Promise<string | undefined> {
  const args = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0')
  const at = args[1] === '--library-path' ? 3 : 1
  return args[at]?.split('/').at(-1) || undefined
}

/** A node process running the launcher's helper (lib/process/launcher.ts), not the bench. */
async function isLauncher(pid: number): Promise<boolean> {
  const args = await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')
  return args.split('\0').some((arg) => arg.endsWith('launcher-helper.mjs'))
}

async function readStat(pid: number): Promise<ProcStat | undefined> {
  const text = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined)
  if (!text) return undefined
  const open = text.indexOf('(')
  const close = text.lastIndexOf(')')
  const comm = text.slice(open + 1, close)
  // After "pid (comm) ": state is field 3, ppid 4, utime 14, stime 15 (1-based).
  const fields = text.slice(close + 2).split(' ')
  return {
    pid,
    ppid: Number(fields[1]),
    comm: comm.startsWith('ld-linux')
      ? ((await loadedProgram(pid)) ?? comm)
      : comm === 'node' && (await isLauncher(pid))
        ? 'launcher'
        : comm,
    ticks: Number(fields[11]) + Number(fields[12]),
  }
}

/** CPU ticks so far of `root` and its descendants, by command name, and by pid. */
export async function processTreeCpu(
  root: number = process.pid,
): Promise<{ byCommand: Map<string, number>; byPid: Map<number, ProcStat> }> {
  const pids = (await readdir('/proc')).filter((d) => /^\d+$/.test(d)).map(Number)
  const stats = (await Promise.all(pids.map(readStat))).filter(
    (s): s is ProcStat => s !== undefined,
  )
  const children = new Map<number, ProcStat[]>()
  for (const s of stats) children.set(s.ppid, [...(children.get(s.ppid) ?? []), s])
  const byPid = new Map<number, ProcStat>()
  const self = stats.find((s) => s.pid === root)
  const queue = self ? [self] : []
  while (queue.length > 0) {
    const s = queue.pop() as ProcStat
    byPid.set(s.pid, s)
    queue.push(...(children.get(s.pid) ?? []))
  }
  const byCommand = new Map<string, number>()
  for (const s of byPid.values()) byCommand.set(s.comm, (byCommand.get(s.comm) ?? 0) + s.ticks)
  return { byCommand, byPid }
}

/**
 * Starts measuring; `stop()` gives the CPU seconds each command used since, counting
 * processes that started meanwhile from zero (those that ended meanwhile are lost: read
 * before stopping them).
 */
export async function measureProcessCpu(
  root: number = process.pid,
): Promise<{ stop: () => Promise<Map<string, number>> }> {
  const perSecond = await ticksPerSecond()
  const before = await processTreeCpu(root)
  return {
    stop: async () => {
      const after = await processTreeCpu(root)
      const used = new Map<string, number>()
      for (const s of after.byPid.values()) {
        const was = before.byPid.get(s.pid)?.ticks ?? 0
        used.set(s.comm, (used.get(s.comm) ?? 0) + (s.ticks - was) / perSecond)
      }
      return used
    },
  }
}

/** `ovn-northd 41.2 s, ovsdb-server 12.0 s, …`, largest first, over `seconds` of wall time. */
export function describeCpu(used: Map<string, number>, seconds: number): string {
  return [...used]
    .filter(([, s]) => s >= 0.05)
    .sort(([, a], [, b]) => b - a)
    .map(([comm, s]) => `${comm} ${s.toFixed(1)} s (${Math.round((100 * s) / seconds)} %)`)
    .join(', ')
}
