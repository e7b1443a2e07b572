/**
 * Hydrazine's gRPC ingress (`proto/hydrazine.proto`): the same operations, tokens,
 * tenant scoping and validation as the HTTP `/v1` API, through `api/operations.ts`.
 *
 * - Auth: metadata `authorization: Bearer <token>`; missing or unknown → UNAUTHENTICATED.
 * - Errors (classes from `api/errors.ts`): invalid → INVALID_ARGUMENT, forbidden →
 *   PERMISSION_DENIED, not found → NOT_FOUND, conflict with stored state →
 *   FAILED_PRECONDITION (the request is well-formed but the system is not in a state that
 *   allows it; retrying the same request will not help until that state changes), a
 *   tenant's quota full → RESOURCE_EXHAUSTED.
 *   Trailing metadata carries `hz-code` and, for invalid input, `hz-issues`
 *   (`[{path, message}]` JSON). Anything else → INTERNAL "internal error", logged.
 * - Lists are paged as AIP-158 has it (`page_size`, `page_token`, `next_page_token`;
 *   `api/pagination.ts`): a request without them gets the first page of 500.
 * - Watch streams the current state of matching objects, then every change announced on
 *   the store's change channel, through its own Redis subscriber connection.
 *
 * @example
 * const grpc = createGrpcServer({ client, tokens })
 * const port = await grpc.bind('0.0.0.0:50051')
 */
import * as grpc from '@grpc/grpc-js'
import type { PublicIpStatus } from '../../lib/ipam/index.ts'
import type { Page, PageRequest } from '../../lib/state/pages.ts'
import type { Kind } from '../../lib/state/store.ts'

/** The kinds a Watch streams. */
type WatchedKind = Exclude<Kind, 'dpu'>

import type { ApplyRequest__Output } from '../../proto/gen/hydrazine/v1/ApplyRequest.ts'
import type { ApplyResponse } from '../../proto/gen/hydrazine/v1/ApplyResponse.ts'
import type { ObjectEvent } from '../../proto/gen/hydrazine/v1/ObjectEvent.ts'
import type { ObjectKind__Output } from '../../proto/gen/hydrazine/v1/ObjectKind.ts'
import type { PublicIp } from '../../proto/gen/hydrazine/v1/PublicIp.ts'
import type { WatchRequest__Output } from '../../proto/gen/hydrazine/v1/WatchRequest.ts'
import type { Accepted, HydrazineClient } from '../../queues/producer.ts'
import { ValidationError } from '../../queues/producer.ts'
import { bearerAuthenticator, type Principal, type Tokens, tenantOf } from '../auth.ts'
import { type ClassifiedError, classifyError, type ErrorClass, type Issue } from '../errors.ts'
import { createOperations, type Operations, type OperationsDeps } from '../operations.ts'
import {
  encodeContinue,
  type ListName,
  MAX_PAGE_SIZE,
  pageRequest,
  pageSizeParam,
} from '../pagination.ts'
import { type HydrazineHandlers, hydrazineServiceDefinition } from './protocol.ts'

/** What the gRPC ingress needs: the client (with its change feed for Watch) and tokens. */
export interface GrpcDeps {
  readonly client: OperationsDeps['client'] & Pick<HydrazineClient, 'watchChanges'>
  readonly tokens: Tokens
  /** Sees every error that became INTERNAL. */
  readonly logError?: (error: unknown) => void
  /** How many Watch streams may be open at once (defaults: `WATCH_LIMITS`). */
  readonly watchLimits?: Partial<WatchLimits>
}

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

/**
 * Connection hygiene: keepalive pings find dead peers, and a connection is closed (its
 * streams ended, for the client to open again) after a maximum age, so no connection
 * holds a server for ever.
 */
const SERVER_OPTIONS: grpc.ChannelOptions = {
  'grpc.keepalive_time_ms': 60_000,
  'grpc.keepalive_timeout_ms': 20_000,
  'grpc.max_connection_age_ms': 60 * 60_000,
  'grpc.max_connection_age_grace_ms': 60_000,
}

export interface GrpcIngress {
  readonly server: grpc.Server
  /** Binds `host:port` (port 0 picks one) and resolves to the bound port. */
  bind(address: string, credentials?: grpc.ServerCredentials): Promise<number>
  /** Ends every Watch stream and stops the server (forcibly after `graceMs`). */
  close(graceMs?: number): Promise<void>
}

/** Same limit as the HTTP body. */
export const MAX_SPEC_BYTES = 64 * 1024

const STATUS_BY_CLASS: Readonly<Record<ErrorClass, grpc.status>> = {
  invalid: grpc.status.INVALID_ARGUMENT,
  forbidden: grpc.status.PERMISSION_DENIED,
  'not-found': grpc.status.NOT_FOUND,
  conflict: grpc.status.FAILED_PRECONDITION,
  quota: grpc.status.RESOURCE_EXHAUSTED,
}

/** Keeps trailers far below grpc-js's 8 KiB metadata limit whatever the input echoed. */
const MAX_DETAILS = 2048
const MAX_ISSUES_JSON = 4096

const clip = (s: string, max: number) => (s.length > max ? `${s.slice(0, max - 1)}…` : s)
/** Metadata values must be printable ASCII; JSON stays valid with \u escapes. */
const asciiJson = (value: unknown) =>
  JSON.stringify(value).replace(
    /[^\x20-\x7e]/g,
    (ch) => `\\u${ch.charCodeAt(0).toString(16).padStart(4, '0')}`,
  )

function issuesTrailer(issues: readonly Issue[]): string {
  const clipped = issues.map((i) => ({ path: clip(i.path, 200), message: clip(i.message, 300) }))
  while (clipped.length > 1 && asciiJson(clipped).length > MAX_ISSUES_JSON) clipped.pop()
  return asciiJson(clipped)
}

function statusOf(known: ClassifiedError): Partial<grpc.StatusObject> {
  const metadata = new grpc.Metadata()
  metadata.set('hz-code', known.code)
  if (known.issues) metadata.set('hz-issues', issuesTrailer(known.issues))
  return {
    code: STATUS_BY_CLASS[known.errorClass],
    details: clip(known.message, MAX_DETAILS),
    metadata,
  }
}

const UNAUTHENTICATED: Partial<grpc.StatusObject> = {
  code: grpc.status.UNAUTHENTICATED,
  details: 'a valid bearer token is required in metadata "authorization"',
}

/** A spec's JSON text as an object, or a ValidationError as HTTP gives for its body. */
function specObject(text: string): Record<string, unknown> {
  const refuse = (message: string): never => {
    throw new ValidationError([{ path: '(specJson)', message }])
  }
  if (Buffer.byteLength(text) > MAX_SPEC_BYTES) refuse(`must not exceed ${MAX_SPEC_BYTES} bytes`)
  let spec: unknown
  try {
    spec = JSON.parse(text)
  } catch {
    refuse('must be valid JSON')
  }
  if (typeof spec !== 'object' || spec === null || Array.isArray(spec)) {
    refuse('must be a JSON object')
  }
  return spec as Record<string, unknown>
}

function applied(accepted: Accepted<unknown>): ApplyResponse {
  return {
    objectJson: JSON.stringify(accepted.object),
    ...(accepted.jobId === undefined ? {} : { jobId: accepted.jobId }),
  }
}

function publicIp(status: PublicIpStatus): PublicIp {
  return {
    ip: status.ip,
    allocated: status.allocated,
    ...(status.allocatedTo === undefined ? {} : { allocatedTo: status.allocatedTo }),
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

const KIND_TO_PROTO: Readonly<Record<WatchedKind, ObjectKind__Output>> = {
  rg: 'RESOURCE_GROUP',
  mr: 'MANAGED_RESOURCE',
}

export function createGrpcServer(deps: GrpcDeps): GrpcIngress {
  const authenticate = bearerAuthenticator(deps.tokens)
  const operationsFor = createOperations(deps)
  const logError = deps.logError ?? (() => {})
  const watches = new Set<() => void>()
  const limits = { ...WATCH_LIMITS, ...deps.watchLimits }
  /** Open Watch streams per principal (`operator`, `tenant:<id>`). */
  const watching = new Map<string, number>()

  const principalOf = (metadata: grpc.Metadata): Principal | undefined => {
    const values = metadata.get('authorization')
    const [value] = values
    return values.length === 1 && typeof value === 'string' ? authenticate(value) : undefined
  }

  const failure = (error: unknown): Partial<grpc.StatusObject> => {
    const known = classifyError(error)
    if (known) return statusOf(known)
    logError(error)
    return { code: grpc.status.INTERNAL, details: 'internal error' }
  }

  /** A unary handler: authenticate, run `op` as the caller, map its errors. */
  function unary<Req, Res>(
    op: (ops: Operations, request: Req) => Promise<Res>,
  ): grpc.handleUnaryCall<Req, Res> {
    return function handleUnary(call, callback) {
      const principal = principalOf(call.metadata)
      if (!principal) {
        callback(UNAUTHENTICATED)
        return
      }
      Promise.resolve()
        .then(() => op(operationsFor(principal), call.request))
        .then(
          (response) => callback(null, response),
          (error: unknown) => callback(failure(error)),
        )
    }
  }

  /** The page a List request asks for (`pageSize`, `pageToken`). */
  const pageAsked = (list: ListName, r: { pageSize: number; pageToken: string }) =>
    pageRequest(list, pageSizeParam(r.pageSize), r.pageToken, 'pageToken')
  /** A page's answer: its items and the token of the next page ('' on the last). */
  const paged = <T, I>(list: ListName, page: Page<T>, item: (t: T) => I) => ({
    items: page.items.map(item),
    nextPageToken: page.next === undefined ? '' : encodeContinue(list, page.next),
  })
  const list = <T>(name: ListName, page: Page<T>) => {
    const { items, nextPageToken } = paged(name, page, (i) => JSON.stringify(i))
    return { itemsJson: items, nextPageToken }
  }

  const handlers: HydrazineHandlers = {
    ApplyResourceGroup: unary(async (ops, r: ApplyRequest__Output) =>
      applied(await ops.applyGroup(r.name, specObject(r.specJson))),
    ),
    GetResourceGroup: unary(async (ops, r) => ({
      objectJson: JSON.stringify(await ops.getGroup(r.name)),
    })),
    ListResourceGroups: unary(async (ops, r) =>
      list(
        'resource-groups',
        await ops.listGroups({ tenant: r.tenant || undefined }, pageAsked('resource-groups', r)),
      ),
    ),
    DeleteResourceGroup: unary(async (ops, r) => applied(await ops.deleteGroup(r.name, r.force))),

    ApplyManagedResource: unary(async (ops, r: ApplyRequest__Output) =>
      applied(await ops.applyHost(r.name, specObject(r.specJson))),
    ),
    GetManagedResource: unary(async (ops, r) => ({
      objectJson: JSON.stringify(await ops.getHost(r.name)),
    })),
    ListManagedResources: unary(async (ops, r) =>
      list(
        'managed-resources',
        await ops.listHosts(
          { resourceGroup: r.resourceGroup || undefined },
          pageAsked('managed-resources', r),
        ),
      ),
    ),
    DeleteManagedResource: unary(async (ops, r) => applied(await ops.deleteHost(r.name, r.force))),

    RegisterPublicIp: unary(async (ops, r) => publicIp(await ops.registerPublicIp(r.ip))),
    GetPublicIp: unary(async (ops, r) => publicIp(await ops.getPublicIp(r.ip))),
    ListPublicIps: unary(async (ops, r) =>
      paged('public-ips', await ops.listPublicIps(pageAsked('public-ips', r)), publicIp),
    ),
    UnregisterPublicIp: unary(async (ops, r) => {
      await ops.unregisterPublicIp(r.ip)
      return {}
    }),

    ApplyDpu: unary(async (ops, r: ApplyRequest__Output) => ({
      objectJson: JSON.stringify((await ops.applyDpu(r.name, specObject(r.specJson))).object),
    })),
    GetDpu: unary(async (ops, r) => ({ objectJson: JSON.stringify(await ops.getDpu(r.name)) })),
    ListDpus: unary(async (ops, r) => list('dpus', await ops.listDpus(pageAsked('dpus', r)))),
    IssueDpuCredentials: unary(async (ops, r) => ({
      objectJson: JSON.stringify(await ops.issueDpuCredentials(r.name)),
    })),
    DeleteDpu: unary(async (ops, r) => {
      await ops.deleteDpu(r.name)
      return {}
    }),

    Watch: function watch(call: grpc.ServerWritableStream<WatchRequest__Output, ObjectEvent>) {
      const principal = principalOf(call.metadata)
      if (!principal) {
        call.emit('error', UNAUTHENTICATED)
        return
      }
      const who = principal.kind === 'operator' ? 'operator' : `tenant:${tenantOf(principal)}`
      const open = watching.get(who) ?? 0
      if (open >= limits.perPrincipal || watches.size >= limits.total) {
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
      watching.set(who, open + 1)
      const stop = streamChanges(call, operationsFor(principal), () => {
        watches.delete(stop)
        const left = (watching.get(who) ?? 1) - 1
        if (left > 0) watching.set(who, left)
        else watching.delete(who)
      })
      watches.add(stop)
    },
  }

  /** Runs one Watch stream; returns the function that ends it. */
  function streamChanges(
    call: grpc.ServerWritableStream<WatchRequest__Output, ObjectEvent>,
    ops: Operations,
    onEnd: () => void,
  ): () => void {
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

    deps.client
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

  const server = new grpc.Server({
    ...SERVER_OPTIONS,
    'grpc.max_receive_message_length': 4 * MAX_SPEC_BYTES,
  })
  server.addService(hydrazineServiceDefinition(), handlers)

  return {
    server,
    bind(address, credentials = grpc.ServerCredentials.createInsecure()) {
      return new Promise((resolve, reject) => {
        server.bindAsync(address, credentials, (error, port) =>
          error ? reject(error) : resolve(port),
        )
      })
    },
    async close(graceMs = 2000) {
      for (const stop of [...watches]) stop()
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          server.forceShutdown()
          resolve()
        }, graceMs)
        timer.unref()
        server.tryShutdown(() => {
          clearTimeout(timer)
          resolve()
        })
      })
    },
  }
}
