/**
 * CPU time a daemon has used, read from `/proc` at nanosecond resolution: the sum over
 * every thread of the process and of its descendants (a daemon runs under its reaper,
 * `daemon.ts`) of the first field of `/proc/<pid>/task/<tid>/schedstat` (time on a CPU,
 * ns). Clock ticks (`/proc/<pid>/stat`, 10 ms) are too coarse for the few milliseconds
 * ovn-northd spends on a commit of a small central.
 *
 * Read synchronously: `/proc` files are made by the kernel on read, never wait on a disk,
 * and take microseconds, while each asynchronous read is four trips through libuv's thread
 * pool (open, stat, read, close) that a busy event loop then waits to hear of — once per
 * thread per settled commit of every central.
 */
import { readdirSync, readFileSync } from 'node:fs'

/**
 * Milliseconds of CPU used so far by process `pid`, its threads and its descendants;
 * undefined when the process is gone or `/proc` cannot tell (no schedstat).
 *
 * @example processTreeCpuMs(daemon.pid) // 1234.567
 */
export function processTreeCpuMs(pid: number): number | undefined {
  const tasks = readOr(() => readdirSync(`/proc/${pid}/task`), undefined)
  if (!tasks) return undefined
  let ms = 0
  let read = false
  const children: number[] = []
  for (const tid of tasks) {
    const stat = readOr(() => readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8'), undefined)
    const kids = readOr(() => readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8'), '')
    // A thread that ended between the listing and the read counts nothing.
    const onCpu = Number(stat?.split(' ')[0])
    if (Number.isFinite(onCpu)) {
      ms += onCpu / 1e6
      read = true
    }
    for (const child of kids.split(' ')) if (/^\d+$/.test(child)) children.push(Number(child))
  }
  if (!read) return undefined
  for (const child of children) ms += processTreeCpuMs(child) ?? 0
  return ms
}

/** What `read` returns; `otherwise` when it throws (a process or thread that is gone). */
function readOr<T, U>(read: () => T, otherwise: U): T | U {
  try {
    return read()
  } catch {
    return otherwise
  }
}
