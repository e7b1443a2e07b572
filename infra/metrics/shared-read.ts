/**
 * One read shared by the gauges of one scrape: Prometheus' registry collects every gauge
 * at once, and the size, used and free gauges of a pool want the same read of Redis.
 */

/**
 * Wraps `read` so that calls while it runs, and for `reuseMs` after it settled, share its
 * answer (or its failure); the next call after that reads again.
 *
 * @example
 * const pools = sharedRead(() => readPools())
 * await Promise.all([pools(), pools()]) // one read
 */
export function sharedRead<T>(read: () => Promise<T>, reuseMs = 1000): () => Promise<T> {
  let current: { promise: Promise<T>; settledAt?: number } | undefined
  return function shared() {
    const fresh =
      current &&
      (current.settledAt === undefined || performance.now() - current.settledAt < reuseMs)
    if (current && fresh) return current.promise
    const entry: { promise: Promise<T>; settledAt?: number } = { promise: read() }
    const settle = () => {
      entry.settledAt = performance.now()
    }
    entry.promise.then(settle, settle)
    current = entry
    return entry.promise
  }
}
