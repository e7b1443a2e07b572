/**
 * What the gRPC server serves besides Hydrazine's own API: `grpc.health.v1.Health`
 * (grpc-health-check), SERVING while every readiness probe passes — the same probes as
 * HTTP `/readyz` (`api/readiness.ts`), run every `everyMs` — for the whole server (`""`)
 * and for `hydrazine.v1.HydrazineService`; and server reflection (`grpc.reflection.v1`
 * and `v1alpha`, @grpc/reflection) describing both, for grpcurl and similar tools.
 *
 * @example
 * const health = serveHealth(server, { redis: () => ping() }, 5000)
 * serveReflection(server)
 * health.stop()
 */
import type * as grpc from '@grpc/grpc-js'
import { ReflectionService } from '@grpc/reflection'
import { HealthImplementation, type ServingStatus } from 'grpc-health-check'
import { packageDefinition } from '../../proto/load.ts'
import { checkReadiness, type ReadinessProbes } from '../readiness.ts'
import { HYDRAZINE_SERVICE, hydrazinePackageDefinition } from './protocol.ts'

/** The health service's proto, vendored under `proto/` for clients to generate from. */
export const HEALTH_PROTO = 'grpc/health/v1/health.proto'

/** How often the readiness probes run (default). */
export const HEALTH_EVERY_MS = 5000

export interface HealthService {
  /** Runs the probes now and updates the status; resolves to whether all passed. */
  refresh(): Promise<boolean>
  /** Stops probing. */
  stop(): void
}

/** Adds the health service to `server`, probing `probes` every `everyMs` from now on. */
export function serveHealth(
  server: grpc.Server,
  probes: ReadinessProbes,
  everyMs = HEALTH_EVERY_MS,
): HealthService {
  const services = ['', HYDRAZINE_SERVICE]
  const initial: ServingStatus = Object.keys(probes).length === 0 ? 'SERVING' : 'NOT_SERVING'
  const health = new HealthImplementation(Object.fromEntries(services.map((s) => [s, initial])))
  health.addToServer(server)
  let stopped = false
  const refresh = async () => {
    const { ready } = await checkReadiness(probes)
    if (!stopped) for (const s of services) health.setStatus(s, ready ? 'SERVING' : 'NOT_SERVING')
    return ready
  }
  void refresh()
  const timer = setInterval(() => void refresh(), everyMs)
  timer.unref()
  return {
    refresh,
    stop() {
      stopped = true
      clearInterval(timer)
      for (const s of services) health.setStatus(s, 'NOT_SERVING')
    },
  }
}

/** Adds server reflection of Hydrazine's service and the health service to `server`. */
export function serveReflection(server: grpc.Server): void {
  const described = { ...hydrazinePackageDefinition(), ...packageDefinition(HEALTH_PROTO) }
  new ReflectionService(described).addToServer(server)
}
