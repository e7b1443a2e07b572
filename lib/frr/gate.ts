/**
 * Who may change Hydrazine's FRR at a given moment: job handlers together (their changes
 * are batched into shared vtysh sessions), or one resync alone. A resync plans from the
 * store and FRR's running config read at one moment; a job's change applied while it
 * runs would be undone by it, or would undo it.
 */
export interface ChangeGate {
  /** Runs a job's change; waits while a resync runs or is waiting to run. */
  change<T>(fn: () => Promise<T>): Promise<T>
  /**
   * Runs `fn` once no change is in flight, one at a time; changes that arrive while it
   * waits or runs wait for it, so a steady stream of jobs never starves a resync.
   */
  alone<T>(fn: () => Promise<T>): Promise<T>
}

/**
 * @example
 * const gate = createChangeGate()
 * worker = new Worker(FRR_QUEUE, (job) =>
 *   job.name === 'resync' ? gate.alone(() => resync(frr, source)) : gate.change(() => handler(job)))
 */
export function createChangeGate(): ChangeGate {
  let inFlight = 0
  let whenIdle: (() => void)[] = []
  /** Settles when the last resync queued so far has finished; undefined: none queued. */
  let resyncs: Promise<void> | undefined

  const idle = () =>
    inFlight === 0 ? Promise.resolve() : new Promise<void>((r) => whenIdle.push(r))

  return {
    async change(fn) {
      while (resyncs) await resyncs
      inFlight++
      try {
        return await fn()
      } finally {
        inFlight--
        if (inFlight === 0) {
          const waiting = whenIdle
          whenIdle = []
          for (const resolve of waiting) resolve()
        }
      }
    },
    alone(fn) {
      const run = (resyncs ?? Promise.resolve()).then(idle).then(fn)
      const settled = run.then(
        () => {},
        () => {},
      )
      resyncs = settled
      void settled.then(() => {
        if (resyncs === settled) resyncs = undefined
      })
      return run
    },
  }
}
