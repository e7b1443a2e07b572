/**
 * One gRPC `Watch` stream. It follows the change log (`lib/state/changes.ts`) from its
 * subscription's position P on; before that it either sends the current state of every
 * object it asks for (a kind, a name, or all) that its caller may see, as of P, or — when
 * the request names a `resource_version` R — the objects changed after R up to P, read
 * from the log (OUT_OF_RANGE when the log no longer reaches back to R). A BOOKMARK at P
 * closes that part; then each change follows as it happens. Every event carries a
 * resource version: resuming after it misses nothing, because events are sent in version
 * order and each carries the object as it is when sent.
 *
 * Flow control: one event is written at a time, and when the call's buffer is full
 * (`write` returns false) the next waits for 'drain'; the snapshot and the catching up
 * are read a page at a time as the client takes them. Changes that arrive meanwhile
 * wait, counted: a stream more than `backlog` events behind is ended (RESOURCE_EXHAUSTED).
 */
import * as grpc from '@grpc/grpc-js'
import * as v from 'valibot'
import type { Operations } from '../../app/index.ts'
import {
  compareVersions,
  type HydrazineClient,
  isResourceVersion,
  ValidationError,
} from '../../app/index.ts'
import type { Change } from '../../lib/state/changes.ts'
import type { Kind } from '../../lib/state/store.ts'
import { ObjectKind, type ObjectKind__Output } from '../../proto/gen/hydrazine/v1/ObjectKind.ts'
import type { WatchRequest__Output } from '../../proto/gen/hydrazine/v1/WatchRequest.ts'
import type { WatchResponse } from '../../proto/gen/hydrazine/v1/WatchResponse.ts'
import { readVisible, removalVisibleTo } from '../change-visibility.ts'
import { MAX_PAGE_SIZE } from '../pagination.ts'
import { protoEnum } from './fields.ts'
import { managedResourceMessage, resourceGroupMessage } from './objects.ts'
import { richStatus } from './status.ts'

/** The kinds a Watch streams. */
export type WatchedKind = Exclude<Kind, 'dpu'>

export type WatchCall = grpc.ServerWritableStream<WatchRequest__Output, WatchResponse>

const OBJECT_KIND = protoEnum(ObjectKind, 'OBJECT_KIND', [
  'ResourceGroup',
  'ManagedResource',
] as const)
const KIND_OF = { ResourceGroup: 'rg', ManagedResource: 'mr' } as const
const PROTO_KIND: Readonly<Record<WatchedKind, ObjectKind__Output>> = {
  rg: OBJECT_KIND.toProto('ResourceGroup'),
  mr: OBJECT_KIND.toProto('ManagedResource'),
}

/** What a Watch request may ask for; each refusal names its field. */
const WatchRequestSchema = v.object({
  kind: v.picklist(['any', 'rg', 'mr'], 'must be an ObjectKind'),
  resourceVersion: v.union(
    [v.literal(''), v.pipe(v.string(), v.check(isResourceVersion))],
    'must be the resource_version of an event, or empty',
  ),
})

/** One thing to send: an object's change (as of `version`) or a bookmark. */
type Item =
  | {
      readonly kind: WatchedKind
      readonly name: string
      readonly version: string
      readonly removed?: Change['removed'] | undefined
    }
  | { readonly bookmark: string }

/** The kind a request asks for: `any`, `rg`, `mr`, or the unknown value it sent. */
function kindAsked(kind: string | number): string {
  if (kind === 0 || kind === OBJECT_KIND.toProto(undefined)) return 'any'
  const known = OBJECT_KIND.fromProto(kind)
  return known ? KIND_OF[known] : String(kind)
}

export interface WatchStreamDeps {
  readonly client: Pick<HydrazineClient, 'watchChanges' | 'changesSince'>
  /** The operations as this stream's caller may run them. */
  readonly ops: Operations
  /** The caller's tenant; undefined for an operator. */
  readonly tenant: string | undefined
  readonly failure: (error: unknown) => Partial<grpc.StatusObject>
  /** Events a stream may have waiting before it is ended. */
  readonly backlog: number
}

/** Runs one Watch stream; `onEnd` is called once when it ends. Returns what ends it. */
export function runWatchStream(
  call: WatchCall,
  deps: WatchStreamDeps,
  onEnd: () => void,
): () => void {
  const { client, ops, failure } = deps
  const { name } = call.request
  let ended = false
  let stopFeed: (() => void) | undefined
  /** Wakes a write waiting for 'drain' (the call drained, or the stream ended). */
  let wake: (() => void) | undefined
  /** Each object's JSON last sent, by `kind/name`: repeats are skipped. */
  const shown = new Map<string, string>()
  let queue: Promise<void> = Promise.resolve()
  let waiting = 0
  /** Live changes held back until the snapshot or catching up is sent. */
  let held: Item[] | undefined = []
  let resumed = false

  const end = (status?: Partial<grpc.StatusObject>) => {
    if (ended) return
    ended = true
    onEnd()
    stopFeed?.()
    wake?.()
    if (status) call.emit('error', status)
    else if (!call.cancelled) call.end()
  }
  call.on('cancelled', () => end())

  const write = async (message: WatchResponse) => {
    if (ended || call.write(message)) return
    await new Promise<void>((resolve) => {
      const done = () => {
        call.off('drain', done)
        wake = undefined
        resolve()
      }
      wake = done
      call.once('drain', done)
    })
  }

  /** The object as this caller may see it now: its JSON (to skip repeats) and message. */
  const read = async (kind: WatchedKind, n: string) => {
    const found = await readVisible(ops, kind, n)
    if (!found) return undefined
    const json = JSON.stringify(found.object)
    return found.kind === 'rg'
      ? { json, resourceGroup: resourceGroupMessage(found.object) }
      : { json, managedResource: managedResourceMessage(found.object) }
  }

  const send = async (item: Item) => {
    if ('bookmark' in item) {
      await write({ type: 'WATCH_EVENT_TYPE_BOOKMARK', resourceVersion: item.bookmark })
      return
    }
    const { kind, name: n, version } = item
    const found = await read(kind, n)
    if (ended) return
    const key = `${kind}/${n}`
    const event = { resourceVersion: version, kind: PROTO_KIND[kind], name: n }
    if (found) {
      const { json, ...object } = found
      const before = shown.get(key)
      if (before === json) return
      shown.set(key, json)
      const type = before === undefined ? 'WATCH_EVENT_TYPE_ADDED' : 'WATCH_EVENT_TYPE_MODIFIED'
      await write({ ...event, type, ...object })
    } else if (shown.delete(key) || (resumed && removalVisibleTo(item.removed, deps.tenant))) {
      // Only objects this caller could see are reported gone: a tenant learns nothing of
      // other tenants' names.
      await write({ ...event, type: 'WATCH_EVENT_TYPE_DELETED' })
    }
  }

  /** Ends the stream when more than `backlog` events wait; true when it did. */
  const tooFarBehind = () => {
    if (waiting + (held?.length ?? 0) <= deps.backlog) return false
    end(
      richStatus(
        grpc.status.RESOURCE_EXHAUSTED,
        `the stream fell ${deps.backlog} events behind; Watch again from the last resource_version`,
        'WATCH_TOO_FAR_BEHIND',
      ),
    )
    return true
  }

  /** Sends `item` after everything before it. */
  const enqueue = (item: Item) => {
    if (ended) return
    waiting++
    if (tooFarBehind()) return
    queue = queue
      .then(() => (ended ? undefined : send(item)))
      .then(() => {
        waiting--
      })
      .catch((error: unknown) => end(failure(error)))
  }

  /** Enqueues `item`, then lets the client take half the backlog before going on. */
  const paced = async (item: Item) => {
    enqueue(item)
    if (waiting >= Math.ceil(deps.backlog / 2)) await queue
  }

  const parsed = v.safeParse(WatchRequestSchema, {
    kind: kindAsked(call.request.kind),
    resourceVersion: call.request.resourceVersion,
  })
  if (!parsed.success) {
    end(
      failure(
        new ValidationError(
          parsed.issues.map((i) => ({
            path: v.getDotPath(i) === 'kind' ? 'kind' : 'resource_version',
            message: i.message,
          })),
        ),
      ),
    )
    return () => end()
  }
  const { kind: only, resourceVersion } = parsed.output
  const wants = (k: Kind, n: string): k is WatchedKind =>
    k !== 'dpu' && (only === 'any' || only === k) && (!name || name === n)

  const live = (change: Change) => {
    if (ended || !wants(change.kind, change.name)) return
    const item = { ...change, kind: change.kind }
    if (!held) enqueue(item)
    else if (!tooFarBehind()) held.push(item)
  }

  /** Everything up to `position`: the current state, or the changes after `after`. */
  const catchUp = async (position: string) => {
    if (resourceVersion) {
      resumed = true
      let after = resourceVersion
      while (!ended && compareVersions(after, position) < 0) {
        const changes = await client.changesSince(after, MAX_PAGE_SIZE)
        const upTo = changes.filter((c) => compareVersions(c.version, position) <= 0)
        // Each object once, at its last change of the page: it is read as it is now.
        const last = new Map<string, Item & { version: string }>()
        for (const c of upTo) {
          if (!wants(c.kind, c.name)) continue
          // A removal earlier in the page is kept: if the name was taken again (by
          // another tenant), the caller still learns that its own object is gone.
          const key = `${c.kind}/${c.name}`
          const earlier = last.get(key)
          const removed =
            c.removed ?? (earlier && 'removed' in earlier ? earlier.removed : undefined)
          last.set(key, { ...c, kind: c.kind, ...(removed ? { removed } : {}) })
        }
        const ordered = [...last.values()].sort((a, b) => compareVersions(a.version, b.version))
        for (const item of ordered) await paced(item)
        await queue
        if (upTo.length < changes.length || changes.length < MAX_PAGE_SIZE) break
        after = changes.at(-1)?.version ?? position
      }
      const newest = compareVersions(resourceVersion, position) > 0 ? resourceVersion : position
      enqueue({ bookmark: newest })
      return
    }
    for (const kind of ['rg', 'mr'] as const) {
      if (only !== 'any' && only !== kind) continue
      await eachPage(kind, async (names) => {
        for (const n of names) await paced({ kind, name: n, version: position })
        await queue
      })
    }
    enqueue({ bookmark: position })
  }

  /** The caller's visible names of a kind, a page at a time (just `name` when one is asked). */
  const eachPage = async (kind: WatchedKind, each: (names: string[]) => Promise<void>) => {
    if (name) return each([name])
    let after: string | undefined
    do {
      const page = after === undefined ? { limit: MAX_PAGE_SIZE } : { limit: MAX_PAGE_SIZE, after }
      const { items, next } =
        kind === 'rg' ? await ops.listGroups({}, page) : await ops.listHosts({}, page)
      if (ended) return
      await each(items.map((i) => i.name))
      after = next
    } while (after !== undefined)
  }

  client
    .watchChanges(live)
    .then(async (subscription) => {
      stopFeed = subscription.stop
      if (ended) return subscription.stop()
      await catchUp(subscription.position)
      const waitingLive = held ?? []
      held = undefined
      for (const item of waitingLive) enqueue(item)
    })
    .catch((error: unknown) => end(failure(error)))

  return () => end()
}
