/**
 * Where a bench round's CPU went: user + system time of this process and every process it
 * started (its descendants), summed by command name (`ovn-northd`, `ovsdb-server`,
 * `redis-server`, `node` — the controller, its in-process agents and the bench itself).
 * Read from `/proc`, so other work on the machine is left out.
 */

import { readdir, readFile } from 'node:fs/promises'

interface ProcStat {
  readonly pid: number
  readonly ppid: number
  readonly comm: string
  /** utime + stime, in clock ticks. */
  readonly ticks: number
}

async function readStat(pid: number): Promise<ProcStat | undefined> {
  const text = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined)
  if (!text) return undefined
  const open = text.indexOf('(')
  const close = text.lastIndexOf(')')
  // After "pid (comm) ": state is field 3, ppid 4, utime 14, stime 15 (1-based).
  const fields = text.slice(close + 2).split(' ')
  return {
    pid,
    ppid: Number(fields[1]),
    comm: text.slice(open + 1, close),
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
  ticksPerSecond = 100,
): Promise<{ stop: () => Promise<Map<string, number>> }> {
  const before = await processTreeCpu(root)
  return {
    stop: async () => {
      const after = await processTreeCpu(root)
      const used = new Map<string, number>()
      for (const s of after.byPid.values()) {
        const was = before.byPid.get(s.pid)?.ticks ?? 0
        used.set(s.comm, (used.get(s.comm) ?? 0) + (s.ticks - was) / ticksPerSecond)
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
