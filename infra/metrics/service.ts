/**
 * The service's own metrics beside the controller's (`controller.ts`): requests to the
 * HTTP and gRPC APIs, and the `/32`s Hydrazine announces through FRR. The HTTP API
 * reports through `createApp`'s `observeRequest`; gRPC through a server interceptor.
 */
import * as grpc from '@grpc/grpc-js'
import { Counter, Gauge, type Registry } from 'prom-client'
import type { RequestSeen } from '../../api/http/request-metrics.ts'

/** The hooks the ingress reports to. */
export interface IngressInstruments {
  /** For `createApp({ observeRequest })`. */
  readonly httpRequest: (request: RequestSeen) => void
  /** For the gRPC server's `interceptors`: counts each call once it has its status. */
  readonly grpcInterceptor: grpc.ServerInterceptor
}

/** Registers the HTTP and gRPC request counters. */
export function ingressInstruments(registry: Registry): IngressInstruments {
  const http = new Counter({
    name: 'hydrazine_http_requests_total',
    help: 'HTTP API requests answered, by method, matched route (unmatched: none) and status',
    labelNames: ['method', 'route', 'status'] as const,
    registers: [registry],
  })
  const rpc = new Counter({
    name: 'hydrazine_grpc_requests_total',
    help: 'gRPC API calls ended, by method and status code (CANCELLED: the client went away)',
    labelNames: ['method', 'code'] as const,
    registers: [registry],
  })
  return {
    httpRequest: ({ method, route, status }) => http.inc({ method, route, status: String(status) }),
    grpcInterceptor: countingInterceptor((method, code) => rpc.inc({ method, code })),
  }
}

/**
 * A server interceptor that reports each call once, when its status is sent (or when the
 * client cancelled it): the method's path (`/hydrazine.v1.Hydrazine/GetResourceGroup`)
 * and the status code's name (`OK`, `NOT_FOUND`, …).
 */
export function countingInterceptor(
  count: (method: string, code: string) => void,
): grpc.ServerInterceptor {
  return function countCall(descriptor, call) {
    let counted = false
    const once = (code: grpc.status) => {
      if (counted) return
      counted = true
      count(descriptor.path, grpc.status[code] ?? String(code))
    }
    return new grpc.ServerInterceptingCall(call, {
      start(next) {
        next({ onCancel: () => once(grpc.status.CANCELLED) })
      },
      sendStatus(status, next) {
        once(status.code)
        next(status)
      },
    })
  }
}

/**
 * Registers `hydrazine_frr_announced_prefixes`, read on each scrape from the FRR
 * consumer's kept configuration (0 before its first read of bgpd, at its start).
 */
export function announcedCollector(registry: Registry, announced: () => number | undefined): void {
  const gauge: Gauge = new Gauge({
    name: 'hydrazine_frr_announced_prefixes',
    help: "Public IP prefixes (/32 and /128) Hydrazine announces through FRR (bgpd's configuration as last read or changed)",
    registers: [registry],
    collect() {
      gauge.set(announced() ?? 0)
    },
  })
}

/**
 * Registers `hydrazine_ovn_central_damaged_databases` (per-group centrals whose database
 * served and cannot be read now: their groups are Failed, `CentralDamaged`) and
 * `hydrazine_ovn_central_databases_remade_total` (unreadable databases of centrals that
 * never served, made again), read on each scrape from the embedded central provider.
 */
export function centralDatabasesCollector(
  registry: Registry,
  databases: () => { readonly damaged: readonly unknown[]; readonly remade: number },
): void {
  const damaged: Gauge = new Gauge({
    name: 'hydrazine_ovn_central_damaged_databases',
    help: 'Databases of per-group OVN centrals that served and cannot be read: not replaced, the group is Failed (CentralDamaged) until the operator moves the file aside',
    registers: [registry],
    collect() {
      damaged.set(databases().damaged.length)
    },
  })
  const remade: Counter = new Counter({
    name: 'hydrazine_ovn_central_databases_remade_total',
    help: 'Unreadable databases of per-group OVN centrals that never served (a creation a power cut stopped), made again',
    registers: [registry],
    collect() {
      remade.reset()
      remade.inc(databases().remade)
    },
  })
}
