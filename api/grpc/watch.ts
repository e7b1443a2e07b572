/**
 * The gRPC `Watch` streams of one server: each runs as `watch-stream.ts` describes
 * (a snapshot or a resumed catch-up, then live changes, with flow control); here they are
 * bounded per token holder and in all, so that no one caller can exhaust the server.
 */
import * as grpc from '@grpc/grpc-js'
import type { HydrazineClient, Operations } from '../../app/index.ts'
import { type Principal, tenantOf } from '../auth.ts'
import { richStatus } from './status.ts'
import { runWatchStream, type WatchCall } from './watch-stream.ts'

/** Bounds on Watch streams, so that no one caller can exhaust the server. */
export interface WatchLimits {
  /** Open streams per token holder (the operator, or one tenant). */
  readonly perPrincipal: number
  /** Open streams in all; the operator's are bounded by `perPrincipal` only. */
  readonly total: number
  /**
   * Events a stream may have waiting to be sent: a client that reads slower than its
   * objects change is cut off (RESOURCE_EXHAUSTED) rather than buffered without end.
   */
  readonly backlog: number
}

export const WATCH_LIMITS: WatchLimits = { perPrincipal: 16, total: 1024, backlog: 10_000 }

/** What the Watch streams work with. */
export interface WatchDeps {
  readonly client: Pick<HydrazineClient, 'watchChanges' | 'changesSince'>
  /** The operations as a caller may run them. */
  readonly operationsFor: (principal: Principal) => Operations
  /** The status a stream ends with when something fails. */
  readonly failure: (error: unknown) => Partial<grpc.StatusObject>
  readonly limits: WatchLimits
}

/** The open Watch streams of one server. */
export class WatchStreams {
  readonly #deps: WatchDeps
  /** The function that ends each open stream. */
  readonly #open = new Set<() => void>()
  /** Open streams per principal (`operator`, `tenant:<id>`). */
  readonly #watching = new Map<string, number>()

  constructor(deps: WatchDeps) {
    this.#deps = deps
  }

  /** Starts a stream for an authenticated call, unless its caller has too many open. */
  open(call: WatchCall, principal: Principal): void {
    const { limits } = this.#deps
    const tenant = tenantOf(principal)
    const who = tenant === undefined ? 'operator' : `tenant:${tenant}`
    const open = this.#watching.get(who) ?? 0
    // Tenants' streams cannot keep the operator's out.
    const full = who !== 'operator' && this.#open.size >= limits.total
    if (open >= limits.perPrincipal || full) {
      const which =
        open >= limits.perPrincipal
          ? `${limits.perPrincipal} for one token`
          : `${limits.total} in all`
      call.emit(
        'error',
        richStatus(
          grpc.status.RESOURCE_EXHAUSTED,
          `too many Watch streams open (at most ${which}); close one first`,
          'TOO_MANY_WATCHES',
        ),
      )
      return
    }
    this.#watching.set(who, open + 1)
    let stop: () => void = () => {}
    let done = false
    const onEnd = () => {
      done = true
      this.#open.delete(stop)
      const left = (this.#watching.get(who) ?? 1) - 1
      if (left > 0) this.#watching.set(who, left)
      else this.#watching.delete(who)
    }
    stop = runWatchStream(
      call,
      {
        client: this.#deps.client,
        ops: this.#deps.operationsFor(principal),
        tenant,
        failure: this.#deps.failure,
        backlog: limits.backlog,
      },
      onEnd,
    )
    // A request refused at once has already ended.
    if (!done) this.#open.add(stop)
  }

  /** Ends every open stream. */
  closeAll(): void {
    for (const stop of [...this.#open]) stop()
  }
}
