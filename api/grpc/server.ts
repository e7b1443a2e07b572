/**
 * Hydrazine's gRPC ingress (`proto/hydrazine/v1/hydrazine.proto`): the same operations,
 * tokens, tenant scoping and validation as the HTTP `/v1` API, through
 * `app/operations.ts`, on typed messages.
 *
 * - Auth: metadata `authorization: Bearer <token>`; missing or unknown → UNAUTHENTICATED.
 * - Specs arrive as messages and are validated by the client with the same valibot
 *   schemas as HTTP bodies (`specs.ts` turns them into that input); objects leave as
 *   messages (`objects.ts`).
 * - Errors (`status.ts`): invalid → INVALID_ARGUMENT with a `google.rpc.BadRequest`
 *   naming each bad request field, forbidden → PERMISSION_DENIED, not found → NOT_FOUND,
 *   conflict with stored state → FAILED_PRECONDITION (retrying the same request will not
 *   help until that state changes), a tenant's quota full → RESOURCE_EXHAUSTED; each with
 *   a `google.rpc.ErrorInfo` whose reason is Hydrazine's code. Anything else → INTERNAL
 *   "internal error", logged.
 * - Lists are paged as AIP-158 has it (`page_size`, `page_token`, `next_page_token`;
 *   `api/pagination.ts`): a request without them gets the first page of 500.
 * - GetResourceGroupIpam: the group's address map, `GET …/{name}/ipam` typed (`ipam.ts`).
 * - Watch: `watch.ts` (bounds) and `watch-stream.ts` (snapshot or resume, flow control).
 * - Also served: `grpc.health.v1` reflecting the readiness probes, and reflection
 *   (`health.ts`).
 *
 * @example
 * const grpc = createGrpcServer({ client, tokens, readiness })
 * const port = await grpc.bind('0.0.0.0:50051')
 */

import * as grpc from '@grpc/grpc-js'
import type { HydrazineClient } from '../../app/index.ts'
import { createOperations, type Operations, type OperationsDeps } from '../../app/index.ts'
import type { Page } from '../../lib/state/pages.ts'
import { bearerAuthenticator, type Principal, type Tokens } from '../auth.ts'
import { encodeContinue, type ListName, pageRequest, pageSizeParam } from '../pagination.ts'
import type { ReadinessProbes } from '../readiness.ts'
import { type HealthService, serveHealth, serveReflection } from './health.ts'
import { ipamMessage } from './ipam.ts'
import {
  credentialsMessage,
  dpuMessage,
  managedResourceMessage,
  publicIpMessage,
  resourceGroupMessage,
} from './objects.ts'
import { type HydrazineServiceHandlers, hydrazineServiceDefinition } from './protocol.ts'
import { dpuSpecInput, groupSpecInput, hostSpecInput, toRequestPaths } from './specs.ts'
import { errorStatus, unauthenticated } from './status.ts'
import { traceInput, traceMessage } from './trace.ts'
import { WATCH_LIMITS, type WatchLimits, WatchStreams } from './watch.ts'

export { WATCH_LIMITS, type WatchLimits } from './watch.ts'

/** Same limit as the HTTP body. */
export const MAX_SPEC_BYTES = 64 * 1024

/** What the gRPC ingress needs: the client (with its change feed for Watch) and tokens. */
export interface GrpcDeps {
  readonly client: OperationsDeps['client'] & Pick<HydrazineClient, 'watchChanges' | 'changesSince'>
  readonly tokens: Tokens
  /** The readiness probes `grpc.health.v1` reports (those of `/readyz`); none: SERVING. */
  readonly readiness?: ReadinessProbes
  /** How often the health service runs the probes (default `HEALTH_EVERY_MS`). */
  readonly healthEveryMs?: number
  /** Sees every error that became INTERNAL. */
  readonly logError?: (error: unknown) => void
  /** How many Watch streams may be open at once (defaults: `WATCH_LIMITS`). */
  readonly watchLimits?: Partial<WatchLimits>
  /** Server interceptors, e.g. one that counts calls for metrics. */
  readonly interceptors?: grpc.ServerInterceptor[]
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
  'grpc.max_receive_message_length': 4 * MAX_SPEC_BYTES,
}

export interface GrpcIngress {
  readonly server: grpc.Server
  /** The health service: `refresh()` runs the probes now. */
  readonly health: HealthService
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

  /**
   * A unary handler: authenticate, run `op` as the caller, map its errors; refusals of
   * input name the request's proto fields (those of its spec under `spec`).
   */
  function unary<Req, Res>(
    op: (ops: Operations, request: Req) => Promise<Res>,
  ): grpc.handleUnaryCall<Req, Res> {
    return function handleUnary(call, callback) {
      const principal = principalOf(call.metadata)
      if (!principal) {
        callback(unauthenticated())
        return
      }
      toRequestPaths('spec', () => op(operationsFor(principal), call.request)).then(
        (response) => callback(null, response),
        (error: unknown) => callback(failure(error)),
      )
    }
  }

  /** The page a List request asks for (`page_size`, `page_token`). */
  const pageAsked = (list: ListName, r: { pageSize: number; pageToken: string }) =>
    pageRequest(list, pageSizeParam(r.pageSize), r.pageToken, 'pageToken')
  /** The token of the page after `page` ('' on the last). */
  const nextToken = (list: ListName, page: Page<unknown>) =>
    page.next === undefined ? '' : encodeContinue(list, page.next)
  /** An accepted write's job, when one was enqueued. */
  const job = (accepted: { jobId?: string | undefined }) =>
    accepted.jobId === undefined ? {} : { jobId: accepted.jobId }

  const handlers: HydrazineServiceHandlers = {
    Trace: unary(async (ops, r) => traceMessage(await ops.trace(traceInput(r)))),
    ApplyResourceGroup: unary(async (ops, r) => {
      const accepted = await ops.applyGroup(r.name, groupSpecInput(r.spec))
      return { resourceGroup: resourceGroupMessage(accepted.object), ...job(accepted) }
    }),
    GetResourceGroup: unary(async (ops, r) => ({
      resourceGroup: resourceGroupMessage(await ops.getGroup(r.name)),
    })),
    GetResourceGroupIpam: unary(async (ops, r) => ipamMessage(await ops.groupIpam(r.name))),
    ListResourceGroups: unary(async (ops, r) => {
      const page = await ops.listGroups(
        { tenant: r.tenant || undefined },
        pageAsked('resource-groups', r),
      )
      return {
        resourceGroups: page.items.map(resourceGroupMessage),
        nextPageToken: nextToken('resource-groups', page),
      }
    }),
    DeleteResourceGroup: unary(async (ops, r) => {
      const accepted = await ops.deleteGroup(r.name, r.force)
      return { resourceGroup: resourceGroupMessage(accepted.object), ...job(accepted) }
    }),

    ApplyManagedResource: unary(async (ops, r) => {
      const accepted = await ops.applyHost(r.name, hostSpecInput(r.spec))
      return { managedResource: managedResourceMessage(accepted.object), ...job(accepted) }
    }),
    GetManagedResource: unary(async (ops, r) => ({
      managedResource: managedResourceMessage(await ops.getHost(r.name)),
    })),
    ListManagedResources: unary(async (ops, r) => {
      const page = await ops.listHosts(
        { resourceGroup: r.resourceGroup || undefined },
        pageAsked('managed-resources', r),
      )
      return {
        managedResources: page.items.map(managedResourceMessage),
        nextPageToken: nextToken('managed-resources', page),
      }
    }),
    DeleteManagedResource: unary(async (ops, r) => {
      const accepted = await ops.deleteHost(r.name, r.force)
      return { managedResource: managedResourceMessage(accepted.object), ...job(accepted) }
    }),

    RegisterPublicIp: unary(async (ops, r) => ({
      publicIp: publicIpMessage(await ops.registerPublicIp(r.ip)),
    })),
    GetPublicIp: unary(async (ops, r) => ({
      publicIp: publicIpMessage(await ops.getPublicIp(r.ip)),
    })),
    ListPublicIps: unary(async (ops, r) => {
      const page = await ops.listPublicIps(pageAsked('public-ips', r))
      return {
        publicIps: page.items.map(publicIpMessage),
        nextPageToken: nextToken('public-ips', page),
      }
    }),
    UnregisterPublicIp: unary(async (ops, r) => {
      await ops.unregisterPublicIp(r.ip)
      return {}
    }),

    ApplyDpu: unary(async (ops, r) => {
      const { object, changed } = await ops.applyDpu(r.name, dpuSpecInput(r.spec))
      return { dpu: dpuMessage(object), changed }
    }),
    GetDpu: unary(async (ops, r) => ({ dpu: dpuMessage(await ops.getDpu(r.name)) })),
    ListDpus: unary(async (ops, r) => {
      const page = await ops.listDpus(pageAsked('dpus', r))
      return { dpus: page.items.map(dpuMessage), nextPageToken: nextToken('dpus', page) }
    }),
    DeleteDpu: unary(async (ops, r) => {
      await ops.deleteDpu(r.name)
      return {}
    }),
    IssueDpuCredentials: unary(async (ops, r) => ({
      credentials: credentialsMessage(await ops.issueDpuCredentials(r.name)),
    })),

    Watch: function watch(call) {
      const principal = principalOf(call.metadata)
      if (!principal) {
        call.emit('error', unauthenticated())
        return
      }
      watches.open(call, principal)
    },
  }

  const server = new grpc.Server({
    ...SERVER_OPTIONS,
    ...(deps.interceptors ? { interceptors: deps.interceptors } : {}),
  })
  server.addService(hydrazineServiceDefinition(), handlers)
  const health = serveHealth(server, deps.readiness ?? {}, deps.healthEveryMs)
  serveReflection(server)

  return {
    server,
    health,
    bind(address, credentials = grpc.ServerCredentials.createInsecure()) {
      return new Promise((resolve, reject) => {
        server.bindAsync(address, credentials, (error, port) =>
          error ? reject(error) : resolve(port),
        )
      })
    },
    async close(graceMs = 2000) {
      health.stop()
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
