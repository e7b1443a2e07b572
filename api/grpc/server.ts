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
 *   the store's change channel, through its own Redis subscriber connection (`watch.ts`).
 *
 * How errors become statuses is `status.ts`; how specs and answers are encoded,
 * `messages.ts`.
 *
 * @example
 * const grpc = createGrpcServer({ client, tokens })
 * const port = await grpc.bind('0.0.0.0:50051')
 */
import * as grpc from '@grpc/grpc-js'
import type { Page } from '../../lib/state/pages.ts'
import type { ApplyRequest__Output } from '../../proto/gen/hydrazine/v1/ApplyRequest.ts'
import type { HydrazineClient } from '../../queues/producer.ts'
import { bearerAuthenticator, type Principal, type Tokens } from '../auth.ts'
import { createOperations, type Operations, type OperationsDeps } from '../operations.ts'
import { encodeContinue, type ListName, pageRequest, pageSizeParam } from '../pagination.ts'
import { applied, MAX_SPEC_BYTES, publicIp, specObject } from './messages.ts'
import { type HydrazineHandlers, hydrazineServiceDefinition } from './protocol.ts'
import { errorStatus, UNAUTHENTICATED } from './status.ts'
import { WATCH_LIMITS, type WatchLimits, WatchStreams } from './watch.ts'

export { MAX_SPEC_BYTES } from './messages.ts'
export { WATCH_LIMITS, type WatchLimits } from './watch.ts'

/** What the gRPC ingress needs: the client (with its change feed for Watch) and tokens. */
export interface GrpcDeps {
  readonly client: OperationsDeps['client'] & Pick<HydrazineClient, 'watchChanges'>
  readonly tokens: Tokens
  /** Sees every error that became INTERNAL. */
  readonly logError?: (error: unknown) => void
  /** How many Watch streams may be open at once (defaults: `WATCH_LIMITS`). */
  readonly watchLimits?: Partial<WatchLimits>
}

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

export function createGrpcServer(deps: GrpcDeps): GrpcIngress {
  const authenticate = bearerAuthenticator(deps.tokens)
  const operationsFor = createOperations(deps)
  const logError = deps.logError ?? (() => {})

  const principalOf = (metadata: grpc.Metadata): Principal | undefined => {
    const values = metadata.get('authorization')
    const [value] = values
    return values.length === 1 && typeof value === 'string' ? authenticate(value) : undefined
  }

  const failure = (error: unknown) => errorStatus(error, logError)
  const watches = new WatchStreams({
    client: deps.client,
    operationsFor,
    failure,
    limits: { ...WATCH_LIMITS, ...deps.watchLimits },
  })

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

    Watch: function watch(call) {
      const principal = principalOf(call.metadata)
      if (!principal) {
        call.emit('error', UNAUTHENTICATED)
        return
      }
      watches.open(call, principal)
    },
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
      watches.closeAll()
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
