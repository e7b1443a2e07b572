/**
 * Bounded work, as reconcile runs it: each piece within a deadline (`withDeadline`), and
 * at most so many pieces at once (`eachAtMost`), so that one hung central delays a run
 * but never stops it.
 */
import { ReconcileTimeout } from './reconcile-report.ts'

/**
 * Runs `work` with a signal that aborts after `timeoutMs`, and rejects with
 * `ReconcileTimeout` then even if `work` goes on: neither the group applier nor a request
 * waiting for a lost connection to come back stops when asked, so the run does not wait
 * for them (what they still do is what the next run would do, and `work` checks `signal`
 * before each step it starts).
 */
export async function withDeadline<T>(
  what: string,
  timeoutMs: number,
  work: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const abort = new AbortController()
  let timer: NodeJS.Timeout | undefined
  const expired = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      const timeout = new ReconcileTimeout(what, timeoutMs)
      abort.abort(timeout)
      reject(timeout)
    }, timeoutMs)
  })
  const working = (async () => work(abort.signal))()
  // Settled after the deadline, its outcome is no one's.
  working.catch(() => {})
  try {
    return await Promise.race([working, expired])
  } finally {
    clearTimeout(timer)
  }
}

/** Runs `work` on each item, at most `limit` at once; `work` must not reject. */
export async function eachAtMost<T>(
  limit: number,
  items: readonly T[],
  work: (item: T) => Promise<void>,
): Promise<void> {
  let next = 0
  const lane = async () => {
    for (let i = next++; i < items.length; i = next++) await work(items[i] as T)
  }
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, lane))
}
