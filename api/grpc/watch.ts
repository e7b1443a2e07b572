/**
 * The gRPC `Watch` streams: each streams the current state of the objects it asks for
 * (a kind, a name, or all) that its caller may see, then every change announced on the
 * store's change channel, through the client's change feed. Streams are bounded per
 * token holder and in all, and one whose caller reads slower than its objects change is
 * ended (RESOURCE_EXHAUSTED) rather than buffered without end.
 */
import * as grpc from '@grpc/grpc-js'
import type { Page, PageRequest } from '../../lib/state/pages.ts'
import type { Kind } from '../../lib/state/store.ts'
import type { ObjectEvent } from '../../proto/gen/hydrazine/v1/ObjectEvent.ts'
import type { ObjectKind__Output } from '../../proto/gen/hydrazine/v1/ObjectKind.ts'
import type { WatchRequest__Output } from '../../proto/gen/hydrazine/v1/WatchRequest.ts'
import type { HydrazineClient } from '../../queues/producer.ts'
import { type Principal, tenantOf } from '../auth.ts'
import type { Operations } from '../operations.ts'
import { MAX_PAGE_SIZE } from '../pagination.ts'

/** Bounds on Watch streams, so that no one caller can exhaust the server. */
export interface WatchLimits {
  /** Open streams per token holder (the operator, or one tenant). */
  readonly perPrincipal: number
  /** Open streams in all. */
  readonly total: number
  /**
   * Events a stream may have waiting to be sent: a client that reads slower than its
   * objects change is cut off (RESOURCE_EXHAUSTED) rather than buffered without end.
   */
  readonly backlog: number
}

export const WATCH_LIMITS: WatchLimits = { perPrincipal: 16, total: 1024, backlog: 10_000 }

/** The kinds a Watch streams. */
type WatchedKind = Exclude<Kind, 'dpu'>

type WatchCall = grpc.ServerWritableStream<WatchRequest__Output, ObjectEvent>

const KIND_TO_PROTO: Readonly<Record<WatchedKind, ObjectKind__Output>> = {
  rg: 'RESOURCE_GROUP',
  mr: 'MANAGED_RESOURCE',
}

/** What the Watch streams work with. */
export interface WatchDeps {
  readonly client: Pick<HydrazineClient, 'watchChanges'>
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
    const who = principal.kind === 'operator' ? 'operator' : `tenant:${tenantOf(principal)}`
    const open = this.#watching.get(who) ?? 0
    if (open >= limits.perPrincipal || this.#open.size >= limits.total) {
      const which =
        open >= limits.perPrincipal
          ? `${limits.perPrincipal} for one token`
          : `${limits.total} in all`
      call.emit('error', {
        code: grpc.status.RESOURCE_EXHAUSTED,
        details: `too many Watch streams open (at most ${which}); close one first`,
      })
      return
    }
    this.#watching.set(who, open + 1)
    const stop = this.#stream(call, this.#deps.operationsFor(principal), () => {
      this.#open.delete(stop)
      const left = (this.#watching.get(who) ?? 1) - 1
      if (left > 0) this.#watching.set(who, left)
      else this.#watching.delete(who)
    })
    this.#open.add(stop)
  }

  /** Ends every open stream. */
  closeAll(): void {
    for (const stop of [...this.#open]) stop()
  }

  /** Runs one Watch stream; returns the function that ends it. */
  #stream(call: WatchCall, ops: Operations, onEnd: () => void): () => void {
    const { client, failure, limits } = this.#deps
    const { kind, name } = call.request
    const wants = (k: WatchedKind, n: string) =>
      (!kind || kind === 'OBJECT_KIND_UNSPECIFIED' || kind === KIND_TO_PROTO[k]) &&
      (!name || name === n)
    // The JSON last sent per `kind/name`: repeats are skipped, and only objects this
    // stream has shown are reported deleted (a tenant learns nothing of others' names).
    const shown = new Map<string, string>()
    let ended = false
    let unsubscribe: (() => void) | undefined
    let queue: Promise<void> = Promise.resolve()
    let backlog = 0

    const end = (status?: Partial<grpc.StatusObject>) => {
      if (ended) return
      ended = true
      onEnd()
      unsubscribe?.()
      if (status) call.emit('error', status)
      else if (!call.cancelled) call.end()
    }

    const send = async (k: WatchedKind, n: string) => {
      const object = k === 'rg' ? await ops.visibleGroup(n) : await ops.visibleHost(n)
      if (ended) return
      const key = `${k}/${n}`
      if (object) {
        const json = JSON.stringify(object)
        if (shown.get(key) === json) return
        shown.set(key, json)
        call.write({ kind: KIND_TO_PROTO[k], name: n, objectJson: json, deleted: false })
      } else if (shown.delete(key)) {
        call.write({ kind: KIND_TO_PROTO[k], name: n, objectJson: '', deleted: true })
      }
    }
    // One at a time, in the order announced, so that events follow the changes.
    const later = (k: WatchedKind, n: string) => {
      if (ended || !wants(k, n)) return
      if (++backlog > limits.backlog) {
        end({
          code: grpc.status.RESOURCE_EXHAUSTED,
          details: `the stream fell ${limits.backlog} events behind; Watch again`,
        })
        return
      }
      queue = queue
        .then(() => send(k, n))
        .then(() => {
          backlog--
        })
        .catch((error: unknown) => end(failure(error)))
    }
    call.on('cancelled', () => end())

    client
      .watchChanges((change) => {
        if (change.kind !== 'dpu') later(change.kind, change.name)
      })
      .then(async (stop) => {
        unsubscribe = stop
        if (ended) stop()
        // Subscribed before listing: nothing can change unseen in between.
        const groups = name ? [name] : await allNames((page) => ops.listGroups({}, page))
        const hosts = name ? [name] : await allNames((page) => ops.listHosts({}, page))
        for (const g of groups) later('rg', g)
        for (const h of hosts) later('mr', h)
      })
      .catch((error: unknown) => end(failure(error)))

    return () => end()
  }
}

/** The names of every item of a paged list, read a page at a time. */
async function allNames(
  list: (page: PageRequest) => Promise<Page<{ readonly name: string }>>,
): Promise<string[]> {
  const names: string[] = []
  let after: string | undefined
  do {
    const page = await list(
      after === undefined ? { limit: MAX_PAGE_SIZE } : { limit: MAX_PAGE_SIZE, after },
    )
    names.push(...page.items.map((i) => i.name))
    after = page.next
  } while (after !== undefined)
  return names
}
