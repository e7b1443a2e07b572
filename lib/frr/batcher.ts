import type { FrrController, Outcome } from './controller.ts'

export interface AnnouncementBatcher {
  /**
   * Wants `prefix` announced via `nextHop` (or withdrawn: null). Resolves with what FRR's
   * BGP table shows once the batch holding this change is applied. If a later change for
   * the same prefix arrives before the batch is applied, the later one wins and both
   * callers get its outcome.
   */
  submit(prefix: string, nextHop: string | null): Promise<Outcome>
  /** Resolves once nothing is pending or being applied. */
  drain(): Promise<void>
}

interface Pending {
  nextHop: string | null
  readonly waiters: ((outcome: Outcome) => void)[]
}

/**
 * Gathers changes from concurrent job handlers and applies all that are waiting at that
 * moment with one `converge` (one vtysh session); changes that arrive meanwhile form the
 * next batch.
 */
export function createAnnouncementBatcher(frr: FrrController): AnnouncementBatcher {
  let pending = new Map<string, Pending>()
  let running: Promise<void> | undefined

  const flushAll = async () => {
    while (pending.size > 0) {
      const batch = pending
      pending = new Map()
      const wanted = new Map([...batch].map(([prefix, p]) => [prefix, p.nextHop]))
      let outcomes: Map<string, Outcome>
      try {
        outcomes = await frr.converge(wanted)
      } catch (error) {
        const cause = error instanceof Error ? error : new Error(String(error))
        outcomes = new Map(
          [...batch.keys()].map((prefix) => [prefix, { prefix, ok: false, error: cause }]),
        )
      }
      for (const [prefix, p] of batch) {
        const outcome = outcomes.get(prefix) ?? {
          prefix,
          ok: false,
          error: new Error(`no outcome for ${prefix}`),
        }
        for (const resolve of p.waiters) resolve(outcome)
      }
    }
  }

  const schedule = () => {
    running ??= new Promise<void>((r) => setImmediate(r)).then(flushAll).finally(() => {
      running = undefined
      if (pending.size > 0) schedule()
    })
  }

  return {
    submit(prefix, nextHop) {
      return new Promise<Outcome>((resolve) => {
        const entry = pending.get(prefix)
        if (entry) {
          entry.nextHop = nextHop
          entry.waiters.push(resolve)
        } else pending.set(prefix, { nextHop, waiters: [resolve] })
        schedule()
      })
    },
    async drain() {
      while (running) await running
    },
  }
}
